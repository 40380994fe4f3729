"""What a CUDA file offers to tune: its kernels, their arguments, and the names a ``-D`` sets.

A kernel is found by its ``__global__`` and its parameter list; an argument's
role is guessed from its declaration and the kernel's body (a ``const``
pointer is read, a pointer the body only assigns to is written, another is
read and written, a value is a scalar). The parameters are the names the
file leaves to its compile line: those it defines only where they are not
defined already (``#ifndef X`` / ``#define X default``), those its ``#if``
lines test without defining them (the preprocessor reads them as 0), and the
identifiers the compiler finds undefined (Kernel Tuner's convention: the
kernel uses ``block_size_x`` and the tuner defines it). Each is a guess for a
person to check; nothing here runs the kernel.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

# C's scalar types -> numpy's names (LP64: long is 64 bits).
C_SCALARS = {
    "float": "float32", "double": "float64", "__half": "float16", "half": "float16",
    "char": "int8", "signed char": "int8", "int8_t": "int8", "unsigned char": "uint8", "uint8_t": "uint8",
    "short": "int16", "short int": "int16", "int16_t": "int16", "unsigned short": "uint16", "uint16_t": "uint16",
    "int": "int32", "signed": "int32", "signed int": "int32", "int32_t": "int32",
    "unsigned": "uint32", "unsigned int": "uint32", "uint32_t": "uint32",
    "long": "int64", "long int": "int64", "long long": "int64", "long long int": "int64", "int64_t": "int64",
    "unsigned long": "uint64", "unsigned long int": "uint64", "unsigned long long": "uint64",
    "unsigned long long int": "uint64", "uint64_t": "uint64", "size_t": "uint64",
}  # fmt: skip
QUALIFIERS = {"const", "volatile", "__restrict__", "restrict", "__restrict", "struct"}
# The preprocessor's own words, which an #if line may hold without naming a parameter.
PREPROCESSOR_WORDS = {"defined", "__CUDA_ARCH__", "__CUDACC__", "__cplusplus", "true", "false"}

_COMMENT_OR_STRING = re.compile(r'("(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\')|/\*.*?\*/|//[^\n]*', re.S)
_IDENTIFIER = re.compile(r"\b[A-Za-z_]\w*\b")
_UNDEFINED = re.compile(r'identifier "(\w+)" is undefined')
_WORD = re.compile(r"\s*([A-Za-z_]\w*)\s*")
# What may stand between __global__ and a kernel's name with parentheses of its own.
ATTRIBUTES = {"__launch_bounds__", "__cluster_dims__", "__maxnreg__", "__attribute__", "__declspec", "alignas"}


@dataclass(frozen=True)
class KernelArg:
    """One parameter of a kernel, and how the kernel's body uses it.

    Attributes:
        name: its name in the kernel's parameter list.
        c_type: its type without qualifiers and pointer (``float``, ``unsigned long long``).
        pointer: an array (a pointer) rather than a value.
        const: a pointer to const (only read).
        read: the body reads an element (``name[i]`` other than as an assignment's target).
        written: the body assigns to an element (``name[i] = ...``, ``+=``, ``++``).
        escapes: the body uses the pointer itself (passes it, casts it, takes an
            element's address), so what it does with the array is not seen here.
    """

    name: str
    c_type: str
    pointer: bool
    const: bool = False
    read: bool = False
    written: bool = False
    escapes: bool = False

    @property
    def role(self) -> str:
        """The guessed role: in, out, inout or scalar. A pointer whose use is
        not seen is read and written (inout: restored before every launch, which is right either way)."""
        if not self.pointer:
            return "scalar"
        if self.const:
            return "in"
        if self.escapes or (self.read and self.written):
            return "inout"
        return "out" if self.written else "in"

    @property
    def numpy_dtype(self) -> str | None:
        """numpy's name of its element (or value) type, None for a type C_SCALARS does not know."""
        return C_SCALARS.get(self.c_type)


@dataclass(frozen=True)
class Kernel:
    """A ``__global__`` function: its name, its arguments, whether ``extern "C"`` keeps its name, its text."""

    name: str
    args: tuple[KernelArg, ...]
    extern_c: bool
    text: str  # from __global__ to the end of the body: what it mentions

    def mentions(self, name: str) -> bool:
        return re.search(rf"\b{re.escape(name)}\b", self.text) is not None

    @property
    def two_dimensional(self) -> bool:
        """The body indexes threads or blocks in y: a 2-D launch."""
        return re.search(r"\b(threadIdx|blockIdx|blockDim)\s*\.\s*y\b", self.text) is not None


@dataclass(frozen=True)
class Knob:
    """A name the compile line sets: ``default`` is the file's own value (its
    ``#ifndef`` default), or None where the file leaves it undefined."""

    name: str
    default: str | None
    how: str  # "#ifndef default", "#if test" or "undefined identifier"


@dataclass(frozen=True)
class CudaSource:
    path: Path
    kernels: tuple[Kernel, ...]
    knobs: tuple[Knob, ...]
    notes: tuple[str, ...]  # what could not be read (nvcc missing, a compile error other than an undefined name)


def read_cuda_source(path: Path, include_dirs: Sequence[Path] = (), nvcc: str | None = "nvcc") -> CudaSource:
    """The kernels and parameters of the CUDA file ``path`` (``nvcc``: the
    compiler asked for undefined identifiers, None to ask none).

    Raises:
        ValueError: the file cannot be read or holds no ``__global__`` function (one line naming it).
    """
    try:
        raw = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError as error:
        raise ValueError(f"--kernel: must name a readable CUDA file, got {str(path)!r} ({error.strerror or error})") from None
    code = strip_comments(raw)
    kernels = tuple(_kernels(code))
    if not kernels:
        raise ValueError(f"--kernel: {path}: must hold a __global__ kernel, got none")
    arg_names = {a.name for k in kernels for a in k.args}
    knobs: dict[str, Knob] = {}
    for knob in _defaulted_knobs(code) + _tested_knobs(code):
        knobs.setdefault(knob.name, knob)
    notes: list[str] = []
    if nvcc:
        undefined, note = _undefined_identifiers(Path(path), include_dirs, nvcc)
        notes += [note] if note else []
        for name in undefined:
            knobs.setdefault(name, Knob(name, None, "undefined identifier"))
    found = tuple(k for k in knobs.values() if k.name not in arg_names)
    order = {name: code.find(name) for name in knobs}  # as the file first names them
    return CudaSource(Path(path), kernels, tuple(sorted(found, key=lambda k: order[k.name])), tuple(notes))


def strip_comments(text: str) -> str:
    """``text`` without its comments (a block comment's line breaks kept, so lines still count), strings kept."""

    def replace(match: re.Match) -> str:
        if match.group(1):
            return match.group(1)
        return "\n" * match.group(0).count("\n") or " "

    return _COMMENT_OR_STRING.sub(replace, text)


def _balanced(text: str, start: int, opening: str = "(", closing: str = ")") -> int:
    """The index just past the bracket that closes the one at ``start``."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == opening:
            depth += 1
        elif text[i] == closing:
            depth -= 1
            if depth == 0:
                return i + 1
    return len(text)


def _kernels(code: str) -> list[Kernel]:
    kernels = []
    for match in re.finditer(r"\b__global__\b", code):
        head_start = code.rfind("\n", 0, match.start()) + 1
        extern_c = _extern_c(code, match.start())
        # Past the return type and attributes (__launch_bounds__(...) may hold parentheses) to the name and its "(".
        position, name = match.end(), None
        while word := _WORD.match(code, position):
            position = word.end()
            if position < len(code) and code[position] == "(":
                if word.group(1) in ATTRIBUTES:
                    position = _balanced(code, position)
                    continue
                name = word.group(1)
                break
        if name is None:
            continue
        params_end = _balanced(code, position)
        params = code[position + 1 : params_end - 1]
        body_start = code.find("{", params_end)
        if body_start < 0 or code[params_end:body_start].strip().endswith(";"):
            continue  # a declaration, not a definition
        body_end = _balanced(code, body_start, "{", "}")
        body = code[body_start:body_end]
        args = tuple(_argument(text, body) for text in _split_parameters(params) if text.strip() not in ("", "void"))
        kernels.append(Kernel(name, args, extern_c, code[head_start:body_end]))
    return kernels


def _extern_c(code: str, at: int) -> bool:
    """``extern "C"`` on this ``__global__``'s declaration, or an ``extern "C" {`` block around it."""
    start = max(code.rfind(";", 0, at), code.rfind("}", 0, at), code.rfind("{", 0, at), code.rfind("#", 0, at))
    if re.search(r'extern\s+"C"', code[start + 1 : at]):
        return True
    return any(_balanced(code, block.end() - 1, "{", "}") > at for block in re.finditer(r'extern\s+"C"\s*\{', code[:at]))


def _split_parameters(text: str) -> list[str]:
    parts, depth, current = [], 0, []
    for char in text:
        if char in "<([":
            depth += 1
        elif char in ">)]":
            depth -= 1
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return parts


def _argument(text: str, body: str) -> KernelArg:
    declaration = re.sub(r"\s+", " ", text.split("=")[0]).strip()
    words = _IDENTIFIER.findall(declaration)
    name = words[-1] if words else declaration
    pointer = "*" in declaration or "[" in declaration
    before_star = declaration.split("*")[0] if "*" in declaration else declaration
    const = pointer and re.search(r"\bconst\b", before_star) is not None
    c_type = " ".join(w for w in words[:-1] if w not in QUALIFIERS)
    if not pointer:
        return KernelArg(name=name, c_type=c_type, pointer=False)
    read, written, escapes = _uses(name, body)
    return KernelArg(name=name, c_type=c_type, pointer=True, const=const, read=read, written=written, escapes=escapes)


def _uses(name: str, body: str) -> tuple[bool, bool, bool]:
    """(read, written, escapes) of the array ``name`` in ``body``: its elements
    read, assigned to, or the pointer used otherwise (passed, cast, ``&name[i]``)."""
    read = written = escapes = False
    for use in re.finditer(rf"\b{re.escape(name)}\b", body):
        before = body[: use.start()].rstrip()
        after = body[use.end() :].lstrip()
        if (before.endswith("&") and not before.endswith("&&")) or not after.startswith("["):
            escapes = True
            continue
        close = _balanced(after, 0, "[", "]")
        tail = after[close:].lstrip()
        if re.match(r"(=(?!=)|\+\+|--)", tail):
            written = True
        elif re.match(r"([-+*/%&|^]|<<|>>)=", tail):
            read = written = True
        else:
            read = True
    return read, written, escapes


def _defaulted_knobs(code: str) -> list[Knob]:
    """``#ifndef X`` (or ``#if !defined(X)``) followed by ``#define X value``."""
    found = []
    pattern = r"^[ \t]*#[ \t]*(?:ifndef[ \t]+(\w+)|if[ \t]+!\s*defined\s*\(?\s*(\w+)\s*\)?)[ \t]*\n[ \t]*#[ \t]*define[ \t]+(\w+)\b[ \t]*(.*)$"
    for match in re.finditer(pattern, code, re.M):
        name = match.group(1) or match.group(2)
        if match.group(3) == name:
            found.append(Knob(name, match.group(4).strip() or None, "#ifndef default"))
    return found


def _tested_knobs(code: str) -> list[Knob]:
    """Names an ``#if``/``#elif`` line tests (through the file's own macros) that the file never defines."""
    macros = dict(re.findall(r"^[ \t]*#[ \t]*define[ \t]+(\w+)(?:\([^)]*\))?[ \t]*(.*)$", code, re.M))
    found, seen = [], set()
    for line in re.findall(r"^[ \t]*#[ \t]*(?:el)?if[ \t]+(.*)$", code, re.M):
        line = re.sub(r"\bdefined\s*\(?\s*\w+\s*\)?", " ", line)
        pending = _IDENTIFIER.findall(line)
        while pending:
            name = pending.pop(0)
            if name in seen or name in PREPROCESSOR_WORDS:
                continue
            seen.add(name)
            if name in macros:
                pending += _IDENTIFIER.findall(macros[name])  # USE_CACHE read_only: read_only is the knob
            else:
                found.append(Knob(name, None, "#if test"))
    return found


def _undefined_identifiers(path: Path, include_dirs: Sequence[Path], nvcc: str) -> tuple[list[str], str | None]:
    """Identifiers nvcc's front end reports undefined in ``path``, and a note where it could not say."""
    command = [nvcc, "--ptx", "-o", "/dev/null", f"-I{path.parent}", *(f"-I{d}" for d in include_dirs), str(path)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    except FileNotFoundError:
        return [], f"nvcc not found: the identifiers {path.name} uses without defining them were not looked for"
    except subprocess.TimeoutExpired:
        return [], f"nvcc took over 300 s on {path.name}: the identifiers it uses without defining them were not looked for"
    names = list(dict.fromkeys(_UNDEFINED.findall(done.stderr)))
    others = [line for line in done.stderr.splitlines()
              if "error" in line and not _UNDEFINED.search(line) and not re.search(r"\d+ errors? detected", line)]  # fmt: skip
    note = f"nvcc reports more than undefined names in {path.name}, first: {others[0].strip()[:200]}" if others else None
    return names, note
