"""Reading a config file: YAML as people write it (anchors, aliases, merge
keys), with duplicate keys refused, and every way a file can attack or stall
the reader (size, nesting, alias expansion, bytes that are not UTF-8 or not
YAML) refused in one line with the file, line and column."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tuner.settings.model import ConfigError

# Bounds on a config file: far above any real config (config.yaml is a few
# KiB, a few levels deep), far below what stalls or exhausts the reader.
MAX_YAML_BYTES = 1 << 20
MAX_YAML_DEPTH = 32
MAX_YAML_NODES = 200_000  # values once every alias is expanded (an alias "bomb" expands to billions)

_MERGE_TAG = "tag:yaml.org,2002:merge"


class StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses a key given twice in one mapping (plain YAML
    keeps the last silently, so a duplicated sweep would vanish) and nesting
    deeper than ``MAX_YAML_DEPTH`` (before Python's recursion limit does)."""

    _depth = 0

    def compose_node(self, parent, index):
        self._depth += 1
        try:
            if self._depth > MAX_YAML_DEPTH:
                mark = self.peek_event().start_mark
                raise ConfigError(f"{mark.name}:{mark.line + 1}:{mark.column + 1}: must nest at most {MAX_YAML_DEPTH} "
                                  f"levels of mappings and lists, got deeper")  # fmt: skip
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _construct_mapping(loader: StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen: dict[Any, yaml.Mark] = {}
    for key_node, _ in node.value:
        if key_node.tag == _MERGE_TAG:
            continue  # `<<: *base`: the base's keys, which the mapping's own override
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            mark = key_node.start_mark
            raise ConfigError(
                f"{mark.name}:{mark.line + 1}:{mark.column + 1}: keys must be unique within a mapping, got {key!r} again"
                f" (first at line {seen[key].line + 1})"
            )
        seen[key] = key_node.start_mark
    return loader.construct_mapping(node, deep=deep)  # SafeLoader's: merges `<<` first


StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _expanded_size(node: yaml.Node, limit: int) -> int:
    """How many values ``node`` holds with every alias expanded (each node
    counted once per place it appears), stopping past ``limit``."""
    sizes: dict[int, int] = {}

    def size(n: yaml.Node) -> int:
        if id(n) in sizes:
            return sizes[id(n)]
        if isinstance(n, yaml.SequenceNode):
            total = 1 + sum(size(child) for child in n.value)
        elif isinstance(n, yaml.MappingNode):
            total = 1 + sum(size(k) + size(v) for k, v in n.value)
        else:
            total = 1
        sizes[id(n)] = total = min(total, limit + 1)
        return total

    return size(node)


def _utf8(data: bytes, path: Path) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        column = error.start - (data.rfind(b"\n", 0, error.start) + 1) + 1
        raise ConfigError(f"{path}:{line}:{column}: must be UTF-8 text, got the byte 0x{data[error.start]:02x} "
                          f"(byte offset {error.start}), which is not UTF-8 there") from None  # fmt: skip


def read_yaml(path: str | Path) -> dict:
    """The mapping in a YAML file; syntax errors, duplicate keys, bytes that
    are not UTF-8 and files too large, too deep or expanding too far (aliases)
    as one line with the file, line and column."""
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > MAX_YAML_BYTES:
            raise ConfigError(f"{path}: must be a config of at most {MAX_YAML_BYTES >> 20} MiB, got {size} bytes")
        data = path.read_bytes()
    except OSError as error:
        raise ConfigError(f"{path}: must be a readable YAML file, got {type(error).__name__}: {error.strerror}") from None
    text = _utf8(data, path)
    loader = None
    try:
        loader = StrictLoader(text)  # its reader refuses characters YAML does not allow, here
        loader.name = str(path)
        node = loader.get_single_node()
        if node is not None:
            expanded = _expanded_size(node, MAX_YAML_NODES)
            if expanded > MAX_YAML_NODES:
                raise ConfigError(f"{path}: must hold at most {MAX_YAML_NODES} values with its aliases (*name) expanded, "
                                  f"got more (aliases that repeat aliases)")  # fmt: skip
        data = None if node is None else loader.construct_document(node)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        raise ConfigError(f"{where}: must be valid YAML, got a syntax error: {error.problem}") from None
    except yaml.reader.ReaderError as error:  # a control character YAML does not allow
        line = text.count("\n", 0, error.position) + 1
        column = error.position - (text.rfind("\n", 0, error.position) + 1) + 1
        code = error.character if isinstance(error.character, int) else ord(error.character)
        raise ConfigError(f"{path}:{line}:{column}: must be valid YAML, got the control character U+{code:04X}, "
                          f"which YAML does not allow") from None  # fmt: skip
    finally:
        if loader is not None:
            loader.dispose()
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: must hold a mapping of settings, got {type(data).__name__}")
    return data
