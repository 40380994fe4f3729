"""``snakemake --config`` overrides, typed from the schema.

Snakemake reads a nested override (``--config 'timing={max_time_s: 0.5}'``)
with YAML's base loader, which leaves every value a string (``'0.5'``), and
keeps a whole value as a string where that loader fails. Here each string
the override gave is read as YAML, as the same text in a config file would
be, wherever the schema does not take that string as it is (a name, a path,
one of a list of words): ``'0.5'`` becomes 0.5 where a number is meant and
stays ``'0.5'`` where a name is. A string that does not parse where the
schema wants something else stops the run with one line naming the key.
"""

from __future__ import annotations

from typing import Any, Iterator, Mapping, MutableMapping

import yaml

from tuner.settings.model import ConfigError
from tuner.settings.yaml_file import StrictLoader

_ARTICLE = {"integer": "an integer", "array": "a list", "object": "a mapping", "number": "a number", "boolean": "true or false"}


def typed_overrides(config: MutableMapping, overrides: Mapping, schema: Mapping | None = None) -> None:
    """Replace, in ``config`` (overrides already merged in), each string leaf
    of ``overrides`` by its YAML value where ``schema`` (the config's) does not
    take the string as it is.

    Raises:
        ConfigError: a string that does not parse as YAML where the schema
            wants another type; one line naming the key.
    """
    if schema is None:
        from tuner.settings.parse import config_schema

        schema = config_schema()
    for path, text in _string_leaves(overrides):
        sub = _at(schema, schema, path)
        if sub is not None and _takes_string(schema, sub, text):
            continue
        try:
            value = yaml.load(text, Loader=StrictLoader)  # noqa: S506 - a safe loader that also refuses duplicate keys
        except yaml.YAMLError as error:
            if sub is None:
                continue  # no type is known here: the schema's own check speaks
            wanted = " or ".join(_ARTICLE.get(t, t) for t in sorted(_types(schema, sub) - {"string"})) or "a YAML value"
            problem = getattr(error, "problem", None) or str(error).splitlines()[0]
            raise ConfigError(f"{_key(path)}: must be {wanted}, given with --config as YAML, got {text!r}, "
                              f"which does not parse as YAML ({problem})") from None  # fmt: skip
        if not isinstance(value, str):
            _set(config, path, value)


def _string_leaves(value: Any, path: tuple = ()) -> Iterator[tuple[tuple, str]]:
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _string_leaves(item, (*path, key))
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            yield from _string_leaves(item, (*path, i))


def _resolve(root: Mapping, schema: Mapping) -> Mapping:
    while isinstance(schema, Mapping) and "$ref" in schema:
        node: Any = root
        for part in schema["$ref"].removeprefix("#/").split("/"):
            node = node[part]
        schema = node
    return schema


def _at(root: Mapping, schema: Mapping, path: tuple) -> Mapping | None:
    """The schema of the value at ``path``, or None where it says nothing."""
    for part in path:
        schema = _resolve(root, schema)
        if isinstance(part, int):
            schema = schema.get("items")
        else:
            schema = schema.get("properties", {}).get(part, schema.get("additionalProperties"))
        if not isinstance(schema, Mapping):
            return None
    return _resolve(root, schema)


def _alternatives(root: Mapping, schema: Mapping) -> Iterator[Mapping]:
    schema = _resolve(root, schema)
    choices = schema.get("oneOf") or schema.get("anyOf")
    if choices:
        for choice in choices:
            yield from _alternatives(root, choice)
    else:
        yield schema


def _types(root: Mapping, schema: Mapping) -> set[str]:
    names: set[str] = set()
    for choice in _alternatives(root, schema):
        kind = choice.get("type")
        names.update(kind if isinstance(kind, list) else [kind] if kind else [])
        for value in choice.get("enum", []) + ([choice["const"]] if "const" in choice else []):
            names.add({bool: "boolean", int: "integer", float: "number", str: "string"}.get(type(value), "string"))
    return names


def _takes_string(root: Mapping, schema: Mapping, text: str) -> bool:
    """Whether ``schema`` accepts ``text`` as a string: an alternative of type
    string without a list of words, or a list of words holding ``text``."""
    for choice in _alternatives(root, schema):
        words = list(choice.get("enum", [])) + ([choice["const"]] if "const" in choice else [])
        if text in words:
            return True
        if choice.get("type") == "string" and not words:
            return True
    return False


def _set(config: MutableMapping, path: tuple, value: Any) -> None:
    node: Any = config
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value


def _key(path: tuple) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text
