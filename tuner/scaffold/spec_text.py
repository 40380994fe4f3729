"""A ``KernelSpec`` skeleton for a CUDA file, as Python text a person finishes.

Each kernel of the file becomes one ``KernelSpec``: its arguments with the
roles ``tuner.scaffold.cuda_source`` guessed, the file's parameters with
values to start from (the file's default first), and a reference function
that says it is not written yet. Every guess carries a ``CHECK`` comment.
"""

from __future__ import annotations

import keyword
import os
import re
from dataclasses import dataclass, replace
from pathlib import Path

from tuner.families import REGISTRY
from tuner.families.base import C_TYPES, DTYPES
from tuner.families.spec import EXPRESSION_NAMES, MAX_NAME
from tuner.scaffold.cuda_source import CudaSource, Kernel, KernelArg, Knob

BLOCK_SIZES = (32, 64, 128, 256, 512, 1024)
BLOCK_SIZES_Y = (1, 2, 4, 8, 16, 32)
MAX_THREADS = 1024  # per block, on every CUDA GPU since compute capability 2.0
# Integer arguments that are, by their name, the problem's size.
SIZE_NAMES = {"n", "size", "length", "len", "count", "num", "nelements", "num_elements", "numel", "width", "height",
              "rows", "nrows", "cols", "ncols", "elements"}  # fmt: skip
SIZE_1D = 1 << 24  # elements of each array: 64 MB of float32, well above any L2
SIZE_2D = 2048  # n x n


@dataclass(frozen=True)
class DeclaredKernel:
    """One kernel as the skeleton declares it: the Python names and what the config needs."""

    family: str  # the family's name (and the spec's variable)
    kernel: Kernel
    dtype: str  # the problem's element type
    n: int  # the problem size the config sweeps
    notes: tuple[str, ...]  # what a person must do that no CHECK comment can say (a kernel without extern "C")


def family_name(kernel: str, taken: set[str]) -> str:
    """A family name for ``kernel``: an ASCII identifier of at most MAX_NAME
    characters, none of the registered families' (a built-in's name is taken)."""
    name = re.sub(r"\W", "_", kernel.encode("ascii", "replace").decode())[:MAX_NAME].strip("_") or "kernel"
    if name[0].isdigit() or keyword.iskeyword(name):
        name = f"k_{name}"[:MAX_NAME]
    if name in taken or name in REGISTRY.names() or name in EXPRESSION_NAMES:
        name = f"my_{name}"[:MAX_NAME]
    return name


def skeleton(source: CudaSource, source_text: str, module: str) -> tuple[str, list[DeclaredKernel]]:
    """The Python text declaring every kernel of ``source`` and what each one
    is (``source_text``: the ``source=`` path as the file gives it; ``module``:
    the file's name, for its messages)."""
    declared: list[DeclaredKernel] = []
    taken: set[str] = set()
    blocks = []
    for kernel in source.kernels:
        name = family_name(kernel.name, taken)
        taken.add(name)
        knobs = [k for k in source.knobs if kernel.mentions(k.name) or not any(o.mentions(k.name) for o in source.kernels)]
        text, dtype, notes = _declaration(name, kernel, knobs, source_text, module)
        blocks.append(text)
        declared.append(DeclaredKernel(name, kernel, dtype, SIZE_2D if kernel.two_dimensional else SIZE_1D, tuple(notes)))
    names = ", ".join(f"``{d.family}``" for d in declared)
    check, run = f"python -m tuner check-family {module}", "snakemake --cores 1"
    width = max(len(check), len(run))
    header = f'''"""{source.path.name}'s kernels for tuner: {names}, a skeleton that `tuner init --kernel` wrote.

Check each line marked CHECK (the arguments' roles, each parameter's values,
the launch) and write each reference: what the kernel computes, in numpy,
which the output of every configuration measured is compared with. Then:

    {check:<{width}}  # load, space, compile, arguments, reference
    {run:<{width}}  # sweep, study, report and export on this machine's GPU
"""

from __future__ import annotations

import numpy as np  # noqa: F401 - for the references

from tuner.families import In, InOut, KernelSpec, Out, Scalar  # noqa: F401 - the roles
'''
    return header + "".join(blocks), declared


def _declaration(name: str, kernel: Kernel, knobs: list[Knob], source_text: str, module: str) -> tuple[str, str, list[str]]:
    notes = []
    if not kernel.extern_c:
        notes.append(f'kernel {kernel.name} is not extern "C": tuner finds a kernel by its unmangled name, so put '
                     f'extern "C" before its __global__ in the CUDA file')  # fmt: skip
    arrays = [a for a in kernel.args if a.pointer]
    dtype = next((a.numpy_dtype for a in arrays if a.numpy_dtype in DTYPES), "float32")
    two_d = kernel.two_dimensional
    shape = '("n", "n")' if two_d else None
    roles = {a.name: a.role for a in kernel.args}
    if not any(role in ("out", "inout") for role in roles.values()):
        first = next((a for a in arrays), None)
        if first is None:
            raise ValueError(f"--kernel: kernel {kernel.name} must take an array (a pointer) whose output tuner "
                             f"verifies, got none of its arguments {[a.name for a in kernel.args]}")  # fmt: skip
        roles[first.name] = "inout"
    arg_lines = [_arg_line(a, roles[a.name], dtype, shape) for a in kernel.args]

    knob_names = {k.name for k in knobs}
    params, runtime, type_macro = [], [], None
    for knob in knobs:
        if knob.default and knob.default in C_TYPES.values() and type_macro is None:
            type_macro = knob.name  # a -D naming the element type: the problem's dtype sets it
            continue
        params.append(_param_line(knob, two_d))
    if "block_size_x" not in knob_names:
        # The block's width must be a parameter; a kernel that never names it reads blockDim.x, so it is a launch value.
        params.insert(0, f'        "block_size_x": {_values(256, BLOCK_SIZES)},  # CHECK: threads per block (a launch value: '
                         f'the kernel does not name block_size_x)')  # fmt: skip
        runtime.append("block_size_x")
    if two_d and "block_size_y" not in knob_names:
        params.insert(1, f'        "block_size_y": {_values(8, BLOCK_SIZES_Y)},  # CHECK: the block\'s height (a launch value)')
        runtime.append("block_size_y")
    varied = [b for b in ("block_size_x", "block_size_y", "block_size_z") if b in knob_names or b in runtime]
    restrictions = [" * ".join(varied) + f" <= {MAX_THREADS}"] if len(varied) > 1 else []

    inputs = [python_name(a.name) for a in kernel.args if roles[a.name] != "out"]
    outputs = [python_name(a.name) for a in kernel.args if roles[a.name] in ("out", "inout")]
    reference_args = inputs + ([] if "n" in inputs else ["n"])
    what = outputs[0] if len(outputs) == 1 else f"{', '.join(outputs[:-1])} and {outputs[-1]}"
    lines = [
        "",
        "",
        f"def {name}_reference({', '.join(reference_args)}):",
        f'    """What {kernel.name} writes to {what}, in numpy, from its inputs (arrays by argument name, n the problem\'s',
        f'    size){", a tuple in that order" if len(outputs) > 1 else ""}. CHECK: write it."""',
        f'    raise NotImplementedError("{module}: write {name}_reference, what {kernel.name} computes, in numpy")',
        "",
        "",
        f"{name} = KernelSpec(",
        f'    name="{name}",',
        f"    source={source_text!r},{'' if source_text.startswith('/') else '  # relative to this file'}",
        f'    kernel="{kernel.name}",',
        "    args=[",
        *arg_lines,
        "    ],",
        "    tune_params={  # each a -D define (the first value is the default), but those in runtime_params",
        *params,
        "    },",
    ]
    if runtime:
        lines.append(f"    runtime_params={runtime},  # launch values, not defines: one module serves them all")
    if restrictions:
        lines.append(f"    restrictions={restrictions},")
    if two_d:
        lines.append('    problem_size=("n", "n"),  # CHECK: the grid covers n x n threads, divided by the block')
    lines += [
        f"    reference={name}_reference,",
        f'    dtypes=["{dtype}"],',
    ]
    if type_macro:
        lines.append(f'    type_macro="{type_macro}",  # -D{type_macro}=<the element type\'s C name>')
    lines += ["    tolerance=1e-5,  # CHECK: the largest relative error of a float output (integers: exact)", ")", ""]
    return "\n".join(lines), dtype, notes


def python_name(name: str) -> str:
    """An argument's name as the reference takes it: a Python keyword (``in``, ``from``) gets a trailing underscore."""
    return f"{name}_" if keyword.iskeyword(name) else name


def _arg_line(arg: KernelArg, role: str, dtype: str, shape: str | None) -> str:
    if python_name(arg.name) != arg.name:
        arg = replace(arg, name=python_name(arg.name))  # the kernel takes arguments by position: the name is ours
    if role == "scalar":
        scalar_type = arg.numpy_dtype or "int32"
        unknown = "" if arg.numpy_dtype else f" (type {arg.c_type!r}: CHECK its dtype)"
        if scalar_type.startswith(("int", "uint")) and arg.name.lower() in SIZE_NAMES:
            return f'        Scalar("{arg.name}", "n", "{scalar_type}"),  # the problem\'s size{unknown}'
        value = "2.0" if scalar_type.startswith("float") else "1"
        return f'        Scalar("{arg.name}", {value}, "{scalar_type}"),  # CHECK: its value, or an expression of n and the parameters{unknown}'
    maker = {"in": "In", "out": "Out", "inout": "InOut"}[role]
    options = []
    if shape:
        options.append(f"shape={shape}")
    note = ""
    if arg.numpy_dtype is None:
        note = f" (type {arg.c_type!r}: taken as the problem's; CHECK)"
    elif arg.numpy_dtype != dtype:
        options.append(f'dtype="{arg.numpy_dtype}"')
    why = {"in": "read" + (" (const)" if arg.const else ""), "out": "written: poisoned before the launch, so an element "
           "never written fails", "inout": "read and written (or passed on): restored before every launch"}[role]  # fmt: skip
    joined = "".join(f", {o}" for o in options)
    return f'        {maker}("{arg.name}"{joined}),  # CHECK: {why}{note}'


def _param_line(knob: Knob, two_d: bool) -> str:
    default = _number(knob.default)
    if knob.name == "block_size_x":
        return f'        "block_size_x": {_values(default or 256, BLOCK_SIZES)},  # threads per block in x'
    if knob.name == "block_size_y":
        values = _values(default or 1, BLOCK_SIZES_Y) if two_d else [default or 1]
        return f'        "block_size_y": {values},  # threads per block in y'
    if knob.name == "block_size_z":
        return f'        "block_size_z": [{default or 1}],'
    if knob.how == "#if test":
        return f'        "{knob.name}": [0, 1],  # CHECK: the file tests it in #if (undefined reads as 0)'
    if default is not None:
        return f'        "{knob.name}": [{default}],  # CHECK: the file\'s default; add the values to try'
    if knob.default:
        return f'        "{knob.name}": ["{knob.default}"],  # CHECK: the file\'s default; add the values to try'
    return f'        "{knob.name}": [1],  # CHECK: the file uses it without defining it; the values to try'


def _number(text: str | None) -> int | float | None:
    if text is None:
        return None
    text = text.strip().rstrip("uUlLfF") if re.fullmatch(r"[-+]?\d+(\.\d*)?[uUlLfF]*", text.strip()) else text.strip()
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            continue
    return None


def _values(default: int | float, ladder: tuple[int, ...]) -> list:
    """``default`` first (the family's default), then the ladder's others."""
    return [default, *(v for v in ladder if v != default)]


def relative_source(cuda_file: Path, folder: Path) -> str:
    """The CUDA file's path as ``source=`` takes it: relative to the skeleton's
    folder where the file lies in it or beside it (they move together, as in
    one repository), else absolute."""
    relative = Path(os.path.relpath(cuda_file.resolve(), folder.resolve()))
    if relative.parts.count("..") <= 1:
        return relative.as_posix()
    return cuda_file.resolve().as_posix()
