"""Which compiled kernel a name means.

A kernel is named as its source names it: ``saxpy`` (``extern "C"``),
``stencil_kernel`` (a C++ kernel, whose symbol nvcc mangles to
``_Z14stencil_kernelPfS_``), ``ns::stencil``, or a template instance such as
``reduce<float, 256>`` (Kernel Tuner's form). A template is instantiated by a
line appended to the compiled source (``instantiation``), which takes the
instance's address, so nvcc emits it with no wrapper kernel. The symbols a
module holds come from ptxas's report or the PTX, and are matched against
the name after demangling (``cu++filt`` beside nvcc, else the system's
``c++filt``; without either, the Itanium mangling's leading name is read).
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Mapping, Sequence


class KernelLookupError(LookupError):
    """No kernel, or several, answer to a name: the message is one line naming them."""


def template_parts(name: str) -> tuple[str, tuple[str, ...] | None]:
    """``"ns::reduce<float, 256>"`` -> ``("ns::reduce", ("float", "256"))``;
    a name without template arguments -> ``(name, None)``."""
    name = name.strip()
    start = name.find("<")
    if start < 0 or not name.endswith(">"):
        return name, None
    return name[:start].strip(), tuple(split_top_level(name[start + 1 : -1]))


def split_top_level(text: str, separator: str = ",") -> list[str]:
    """``text`` split at ``separator`` outside brackets of any kind."""
    parts, depth, current = [], 0, []
    for char in text:
        if char in "<([{":
            depth += 1
        elif char in ">)]}":
            depth -= 1
        if char == separator and depth == 0:
            parts.append("".join(current).strip())
            current = []
        else:
            current.append(char)
    tail = "".join(current).strip()
    return parts + [tail] if tail or parts else parts


def instantiation(kernel: str) -> str | None:
    """The line that makes nvcc emit template instance ``kernel`` (None for a
    plain name): taking its address in host code instantiates the kernel for
    the device too."""
    if template_parts(kernel)[1] is None:
        return None
    return f"[[maybe_unused]] static void* const tuner_kernel_instance = (void*)&{kernel};\n"


_PTXAS_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
_PTX_ENTRY = re.compile(r"\.entry\s+([\w$.]+)\s*\(")


def ptxas_entries(log: str) -> list[str]:
    """The kernels (symbols) ptxas compiled, as its ``-v`` report names them."""
    return list(dict.fromkeys(_PTXAS_ENTRY.findall(log)))


def ptx_entries(ptx: str) -> list[str]:
    """The kernels (symbols) a PTX module defines."""
    return list(dict.fromkeys(_PTX_ENTRY.findall(ptx)))


def resolve(kernel: str, symbols: Sequence[str], *, source: str, defines: Mapping[str, str] = {}) -> str:
    """The symbol of ``symbols`` that ``kernel`` names.

    ``kernel`` may be the symbol itself (an ``extern "C"`` name, or a mangled
    one), a C++ name (qualified or not), or a template instance whose
    arguments are compared after the defines (a type macro) are substituted
    and literals are read as numbers (``256u`` is ``256``). A template named
    with arguments matches its one instance in the module where the
    arguments' spelling differs from the demangler's.

    Raises:
        KernelLookupError: no symbol, or several, answer to ``kernel``.
    """
    if kernel in symbols:
        return kernel
    names = demangled(tuple(symbols))
    wanted_base, wanted_args = template_parts(kernel)
    found = []
    for symbol in symbols:
        base, args = template_parts(function_name(names[symbol]))
        if base == wanted_base or (("::" not in wanted_base) and base.rpartition("::")[2] == wanted_base):
            found.append((symbol, base, args))
    qualified = [f for f in found if f[1] == wanted_base]
    found = qualified or found
    if wanted_args is not None and len(found) > 1:
        wanted = [_normal(arg, defines) for arg in wanted_args]
        found = [f for f in found if f[2] is not None and [_normal(a, defines) for a in f[2]] == wanted] or found
    if len(found) == 1:
        return found[0][0]
    listed = sorted(names[s] for s in symbols) if not found else sorted(names[f[0]] for f in found)
    if not found:
        raise KernelLookupError(f"{source} has no kernel {kernel!r} (its kernels: {listed})")
    raise KernelLookupError(f"{source}: kernel {kernel!r} must name one kernel, it names {len(found)}: {listed}; give the "
                            f"template arguments or the mangled name ({sorted(f[0] for f in found)})")  # fmt: skip


def function_name(demangled_text: str) -> str:
    """``"void ns::reduce<float, 256>(float const*, int)"`` -> ``"ns::reduce<float, 256>"``:
    the parameters and the return type dropped."""
    text = demangled_text.strip()
    if text.endswith(")"):
        depth = 0
        for i in range(len(text) - 1, -1, -1):
            depth += {")": 1, "(": -1}.get(text[i], 0)
            if depth == 0:
                text = text[:i]
                break
    words = split_top_level(text, " ")
    return words[-1] if words else text


def _normal(argument: str, defines: Mapping[str, str]) -> str:
    """A template argument as text that compares equal however it was spelled."""
    text = " ".join(argument.split())
    for _ in range(4):  # a define naming another define
        if text not in defines:
            break
        text = " ".join(str(defines[text]).split())
    number = re.fullmatch(r"(?:\([\w\s:]+\))?\s*(-?(?:0x[0-9a-fA-F]+|\d+))[uUlL]*", text)
    if number:
        return str(int(number.group(1), 0))
    if text in ("true", "false"):
        return "1" if text == "true" else "0"
    return re.sub(r"\s*([*&<>,:()])\s*", r"\1", text)


@functools.lru_cache(maxsize=256)
def demangled(symbols: tuple[str, ...]) -> dict[str, str]:
    """Symbol -> its C++ name (``_Z14stencil_kernelPfS_`` -> ``stencil_kernel(float*, float*)``);
    a symbol that is no mangled name maps to itself."""
    mangled = [s for s in symbols if s.startswith("_Z")]
    names = {s: s for s in symbols}
    tool = _demangler()
    if mangled and tool:
        try:
            out = subprocess.run([tool, *mangled], capture_output=True, text=True, check=True, timeout=30).stdout.splitlines()
        except (OSError, subprocess.SubprocessError):
            out = []
        if len(out) == len(mangled):
            names.update(zip(mangled, out))
            return names
    names.update({s: _itanium_name(s) or s for s in mangled})
    return names


@functools.lru_cache(maxsize=None)
def _demangler() -> str | None:
    """``cu++filt`` (beside nvcc, or on PATH), else ``c++filt``; None without either."""
    nvcc = shutil.which("nvcc")
    beside = Path(nvcc).resolve().parent / "cu++filt" if nvcc else None
    for tool in (beside, shutil.which("cu++filt"), shutil.which("c++filt")):
        if tool and os.access(tool, os.X_OK) and Path(tool).is_file():
            return str(tool)
    return None


def _itanium_name(symbol: str) -> str | None:
    """The qualified name at the head of an Itanium mangled symbol, with
    ``<...>`` where it is a template instance (its arguments unread): enough
    to find a kernel by name where no demangler is installed."""
    position = 2
    nested = symbol.startswith("_ZN")
    position += nested
    parts = []
    while position < len(symbol):
        length = re.match(r"\d+", symbol[position:])
        if not length:
            break
        start = position + len(length.group())
        parts.append(symbol[start : start + int(length.group())])
        position = start + int(length.group())
        if not nested:
            break
    if not parts:
        return None
    name = "::".join(parts)
    return name + "<...>" if symbol[position : position + 1] == "I" else name
