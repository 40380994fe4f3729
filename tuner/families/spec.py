"""A kernel family declared rather than programmed: ``KernelSpec``.

The common case of a kernel of one's own is a CUDA source, its tunable
``-D`` defines, a few rules between them, an argument list, a launch geometry
and a numpy reference. ``KernelSpec`` takes exactly that and is an ordinary
``Family``: sweeps, studies, warm starts, replays, the profile, the report and
the export treat it like any built-in one. Everything a hand-written family
programs follows from the arguments' roles:

- ``In``: uploaded once per problem, read by the kernel.
- ``InOut``: uploaded once as a pristine copy; the working copy is restored
  from it before the verification launch and before every timed sample
  (never timed), so each launch sees the same input.
- ``Out``: poisoned (0xFF bytes: NaN, or -1) before the verification launch,
  so an element the kernel never writes fails.
- ``Scalar``: a value, or an expression of the problem size and parameters.
- ``Constant``: an array copied into the module's ``__constant__`` symbol of
  that name.

The output (one ``Out`` or ``InOut``, or several) is compared with the
reference on the device when there is one (``tuner.measure.check``), on the
host otherwise: exactly for integers, by relative error for floats. The bytes
moved default to the arrays read plus the arrays written; the device memory a
problem needs follows from the shapes.

Names follow Kernel Tuner's where they mean the same thing: ``tune_params``
(every parameter is a ``-D`` define unless listed in ``runtime_params``; one
with a single value is a problem constant), ``restrictions`` (Python
expressions over the parameters, or callables taking the dict of them),
``block_size_x/y/z`` as the block's default dimensions, ``problem_size``
with ``grid_div_x/y/z`` for the grid, and the kernel named as the source
names it (``stencil_kernel``, a C++ kernel, or ``reduce<float,
block_size_x>``, a template instantiated from the parameters). Expressions
may name the parameters, ``n`` (the problem's size), ``dtype``,
``itemsize``, ``sm_count`` (in the launch and scalars only) and
``ceil_div``, ``min``, ``max``, ``ceil``, ``floor``, ``log2``; shapes,
``init`` and the reference read ``n`` and the constants. A callable gets
the same names as one dict. A launch over the device's limits (threads or
dimensions of a block, the grid's dimensions) makes a configuration
infeasible before anything is compiled. ``docs/kernel-spec.md`` documents
every option.
"""

from __future__ import annotations

import ast
import functools
import inspect
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from tuner.families.base import (
    C_TYPES,
    DTYPES,
    Config,
    DeviceOutput,
    Family,
    Launch,
    Param,
    Problem,
    ScopedRule,
    Verdict,
    amount_unfit,
    nvcc_text_unfit,
)
from tuner.families.buffers import ceil_div, poison
from tuner.families.inputs import integers, uniform
from tuner.families.limits import DeviceLimits, launch_violations

ROLES = ("in", "out", "inout", "scalar", "constant")
# PyCUDA struct letters of scalar arguments.
SCALAR_FORMATS = {"int8": "b", "uint8": "B", "int16": "h", "uint16": "H", "int32": "i", "uint32": "I",
                  "int64": "q", "uint64": "Q", "float16": "e", "float32": "f", "float64": "d"}  # fmt: skip
HELPERS = {"ceil_div": ceil_div, "min": min, "max": max, "ceil": math.ceil, "floor": math.floor, "log2": math.log2,
           "abs": abs, "int": int}  # fmt: skip
BLOCK_NAMES = ("block_size_x", "block_size_y", "block_size_z")
_GLOBALS = {"__builtins__": {}, **HELPERS}  # what expressions see besides their names (eval adds nothing to it)


class SpecError(ValueError):
    """A kernel spec that cannot work: the message names the family, the rule and the value."""


@dataclass(frozen=True)
class Arg:
    """One kernel argument, in the kernel's order.

    Attributes:
        name: the argument's name (the reference receives arrays by it).
        role: in, out, inout, scalar or constant.
        shape: arrays: an expression of ``n`` and the constants (``"n"``,
            ``"n * n"``, ``"WIDTH * HEIGHT"``) or a tuple of them (``("n", "n")``).
        dtype: arrays: element type (None: the problem's); scalars: required.
        value: scalars: a number or an expression.
        init: arrays read by the kernel: ``init(rng, shape, dtype)`` makes
            the host input (default: random, never all zeros). Further
            parameters it declares by name get ``n``, ``itemsize``, a
            constant, or an array made before it (an argument earlier in
            ``args``): ``init(rng, shape, dtype, n, rows)``.
    """

    name: str
    role: str
    shape: Any = "n"
    dtype: str | None = None
    value: Any = None
    init: Callable | None = None

    @property
    def is_array(self) -> bool:
        return self.role in ("in", "out", "inout", "constant")

    @property
    def is_output(self) -> bool:
        return self.role in ("out", "inout")


def In(name: str, shape: Any = "n", dtype: str | None = None, init: Callable | None = None) -> Arg:
    return Arg(name, "in", shape, dtype, init=init)


def Out(name: str, shape: Any = "n", dtype: str | None = None) -> Arg:
    return Arg(name, "out", shape, dtype)


def InOut(name: str, shape: Any = "n", dtype: str | None = None, init: Callable | None = None) -> Arg:
    return Arg(name, "inout", shape, dtype, init=init)


def Scalar(name: str, value: Any, dtype: str) -> Arg:
    return Arg(name, "scalar", None, dtype, value=value)


def Constant(name: str, shape: Any, dtype: str | None = None, init: Callable | None = None) -> Arg:
    return Arg(name, "constant", shape, dtype, init=init)


class Expression:
    """A number, a Python expression over named values, or a callable of their dict."""

    def __init__(self, value: Any, where: str, family: str) -> None:
        self.text = value if isinstance(value, str) else getattr(value, "__name__", repr(value))
        self.where, self.family = where, family
        self._value, self._code, self.names = value, None, frozenset()
        if isinstance(value, str):
            try:
                tree = ast.parse(value, mode="eval")
            except SyntaxError as error:
                raise SpecError(f"family {family!r}: {where} must be a Python expression, got {value!r} ({error.msg})") from None
            self.names = frozenset(node.id for node in ast.walk(tree) if isinstance(node, ast.Name)) - set(HELPERS)
            self._code = compile(tree, f"<{family} {where}>", "eval")
        elif not (callable(value) or isinstance(value, (int, float, np.number))):
            raise SpecError(f"family {family!r}: {where} must be a number, an expression or a callable, got {value!r}")

    def check_names(self, known: set[str]) -> None:
        unknown = sorted(self.names - known)
        if unknown:
            raise SpecError(f"family {self.family!r}: {self.where} {self.text!r} names {unknown[0]!r}, which is not one of {sorted(known)}")

    def __call__(self, env: Mapping[str, Any]) -> Any:
        if self._code is not None:
            return eval(self._code, _GLOBALS, dict(env))
        if callable(self._value):
            return self._value(dict(env))
        return self._value


def _shape_exprs(shape: Any) -> tuple:
    return tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)


class KernelSpec(Family):
    """A family from a declaration. See the module's docstring for the roles
    and the names expressions may use.

    Args:
        name: the family's name (results, configs, ``best.json``).
        source: the CUDA file, relative to the file that makes the spec (or absolute).
        kernel: the kernel as the source names it: ``extern "C"`` or C++
            (``stencil_kernel``, ``ns::stencil``; overloads are told apart by
            their mangled name), or a template instance whose arguments are
            parameters, expressions of them, or type names
            (``reduce<float, block_size_x>``), instantiated by the compile.
        args: the kernel's arguments in order (``In``, ``Out``, ``InOut``, ``Scalar``, ``Constant``).
        tune_params: parameter name -> its values (or a ``Param``, for a rule
            wider than the values); the first value is the default. A
            parameter of one value is a problem constant: a ``-D`` define
            that shapes, ``init`` and the reference read by name too.
        reference: numpy function of the input arrays and scalars (by
            argument name), ``n``, ``dtype`` and the constants; returns the
            expected output (a tuple when there are several).
        dtypes: element types the family computes (``float32``, ``int32``, ...).
        restrictions: expressions (or callables) that must hold for a
            configuration to run; a false one makes it infeasible.
        runtime_params: parameters that are not ``-D`` defines (used in the
            grid or in scalars), so their configurations share a module.
        block: the block's dimensions (expressions); default ``block_size_x/y/z``.
        grid: the grid's dimensions (expressions); default: ``problem_size``
            (expressions of ``n`` and the parameters) divided by
            ``grid_div_x/y/z`` (Kernel Tuner's rule), rounded up.
        bytes_moved, flops: expressions (or callables) of the configuration;
            default bytes: arrays read plus arrays written.
        tolerance: largest relative error of float outputs (integers: exact).
        check_sizes: two sizes for verification passes (default: by the shapes' rank).
        compile_flags: extra nvcc flags.
        type_macro: a ``-D`` name set to the element type's C name (for
            sources that compile for several dtypes), or None.
        shared_bytes: dynamic shared memory per block (an expression).
    """

    def __init__(
        self,
        name: str,
        source: str | Path,
        kernel: str,
        args: Sequence[Arg],
        tune_params: Mapping[str, Sequence | Param],
        reference: Callable,
        *,
        dtypes: Sequence[str] = ("float32",),
        restrictions: Sequence[str | Callable] = (),
        runtime_params: Sequence[str] = (),
        block: Sequence | None = None,
        grid: Sequence | None = None,
        problem_size: Sequence = ("n",),
        grid_div_x: Sequence | None = None,
        grid_div_y: Sequence | None = None,
        grid_div_z: Sequence | None = None,
        bytes_moved: Any = None,
        flops: Any = None,
        tolerance: float = 1e-5,
        check_sizes: tuple[int, int] | None = None,
        compile_flags: Sequence[str] = (),
        type_macro: str | None = None,
        shared_bytes: Any = 0,
    ) -> None:
        def fail(rule: str) -> SpecError:
            return SpecError(f"family {name!r}: {rule}")

        if not (isinstance(name, str) and name.isidentifier() and name.isascii() and len(name) <= MAX_NAME):
            # It names files (cubins, report figures) and the header's structs.
            raise SpecError(f"kernel spec: name must be an ASCII identifier of at most {MAX_NAME} characters, got {name!r}")
        self.name = name
        self.source = str(_resolve_source(source, name))
        if nvcc_text_unfit(self.source):
            raise fail(f"source {nvcc_text_unfit(self.source)}")
        self.kernel = kernel
        self.kernel_base, template_arguments = _kernel_parts(kernel, fail)
        self.dtypes = tuple(dtypes)
        for dtype in self.dtypes:
            if dtype not in DTYPES:
                raise fail(f"dtypes must be among {sorted(DTYPES)}, got {dtype!r}")
        self.params = tuple(_param(key, values, name) for key, values in tune_params.items())
        if not self.params:
            raise fail("tune_params must name at least one parameter")
        self.runtime_params = tuple(runtime_params)
        param_names = set(self.param_names)
        for key in self.runtime_params:
            if key not in param_names:
                raise fail(f"runtime_params must name parameters of tune_params, got {key!r}")
        for param in self.params:
            if param.name in EXPRESSION_NAMES:  # an expression would read the problem's value, not the parameter's
                raise fail(f"tune_params: a parameter must not be named as the problem's {sorted(EXPRESSION_NAMES)}, "
                           f"got {param.name!r}")  # fmt: skip
            for value in param.values if param.name not in self.runtime_params else ():
                why = nvcc_text_unfit(_define_text(value), define=True)
                if why:
                    raise fail(f"tune_params[{param.name!r}]: a value (a -D define) {why}")
        # A parameter of one value (and no rule admitting others) is a problem constant.
        self.constants = {p.name: p.values[0] for p in self.params if len(p.values) == 1 and p.rule is None}
        self.args = tuple(args)
        self._check_args(fail)
        self.tolerance = _tolerance(tolerance, fail)
        self.reference_function = reference
        if not callable(reference):
            raise fail(f"reference must be a function of the input arrays, got {reference!r}")
        self._compile_flags = tuple(compile_flags)
        for flag in self._compile_flags:
            if nvcc_text_unfit(str(flag)):
                raise fail(f"compile_flags: a flag {nvcc_text_unfit(str(flag))}")
        if type_macro is not None and not (isinstance(type_macro, str) and type_macro.isidentifier() and type_macro.isascii()):
            raise fail(f"type_macro must be an ASCII C identifier (a -D name), got {type_macro!r}")
        self.type_macro = type_macro

        problem_names = EXPRESSION_NAMES - {"sm_count"}
        config_names = param_names | problem_names
        launch_names = config_names | {"sm_count"}
        shape_names = problem_names | set(self.constants)

        def expr(value, where, known):
            made = Expression(value, where, name)
            made.check_names(known)
            return made

        self.restrictions = tuple(expr(r, f"restriction {i + 1}", config_names) for i, r in enumerate(restrictions))
        if block is None:
            present = [b for b in BLOCK_NAMES if b in param_names]
            if "block_size_x" not in present:
                raise fail(f"block must be given when tune_params has no block_size_x (parameters: {sorted(param_names)})")
            block = tuple(present)
        self.block_exprs = tuple(expr(b, f"block[{i}]", launch_names) for i, b in enumerate(block))
        if grid is None:
            divisors = (grid_div_x, grid_div_y, grid_div_z)
            defaults = [[b] if b in param_names else [] for b in BLOCK_NAMES]
            self.problem_size = tuple(expr(p, f"problem_size[{i}]", launch_names) for i, p in enumerate(problem_size))
            self.grid_divisors = tuple(
                tuple(expr(d, f"grid_div_{'xyz'[i]}", launch_names) for d in (divisors[i] if divisors[i] is not None else defaults[i]))
                for i in range(len(self.problem_size))
            )
            self.grid_exprs = None
        else:
            self.grid_exprs = tuple(expr(g, f"grid[{i}]", launch_names) for i, g in enumerate(grid))
        self.shared_expr = expr(shared_bytes, "shared_bytes", launch_names)
        self.bytes_expr = None if bytes_moved is None else expr(bytes_moved, "bytes_moved", config_names)
        self.flops_expr = None if flops is None else expr(flops, "flops", config_names)
        self.scalar_exprs = {a.name: expr(a.value, f"scalar {a.name}", launch_names) for a in self.args if a.role == "scalar"}
        self.shape_exprs = {
            a.name: tuple(expr(s, f"shape of {a.name}", shape_names) for s in _shape_exprs(a.shape)) for a in self.args if a.is_array
        }
        self.template_arguments = tuple(_template_argument(t, i, param_names, name) for i, t in enumerate(template_arguments or ()))
        self._template = template_arguments is not None
        self._init_context = _init_parameters(self.args, set(self.constants), fail)
        self.arg_types = "".join("P" if a.role in ("in", "out", "inout") else SCALAR_FORMATS[a.dtype] for a in self.args if a.role != "constant")
        rank = max(len(shape) for shape in self.shape_exprs.values())
        self.check_sizes = tuple(check_sizes) if check_sizes else _check_sizes(rank)
        self._reference_args = _reference_parameters(reference, self.args, set(self.constants), fail)

    def _check_args(self, fail) -> None:
        names = [a.name for a in self.args]
        for arg in self.args:
            if not isinstance(arg, Arg):
                raise fail(f"args must be In, Out, InOut, Scalar or Constant, got {arg!r}")
            if arg.role not in ROLES:
                raise fail(f"argument {arg.name!r}: role must be one of {ROLES}, got {arg.role!r}")
            if names.count(arg.name) > 1:
                raise fail(f"argument names must be unique, got {arg.name!r} twice")
            if arg.role == "scalar" and arg.dtype not in SCALAR_FORMATS:
                raise fail(f"scalar {arg.name!r}: dtype must be one of {sorted(SCALAR_FORMATS)}, got {arg.dtype!r}")
            if arg.is_array and arg.dtype is not None and arg.dtype not in DTYPES and arg.dtype not in SCALAR_FORMATS:
                raise fail(f"argument {arg.name!r}: dtype must be one of {sorted(SCALAR_FORMATS)}, got {arg.dtype!r}")
        if not any(a.is_output for a in self.args):
            raise fail("args must hold at least one Out or InOut array (what is verified)")

    # ---- the space and the recipe ----------------------------------------
    def _env(self, cfg: Config, problem: Problem, **more) -> dict:
        return {**cfg, "n": problem.n, "dtype": problem.dtype, "itemsize": np.dtype(DTYPES[problem.dtype]).itemsize, **more}

    def constraint_violations(self, cfg: Config, problem: Problem) -> list[str]:
        """The restrictions that do not hold, then (where they all do) a launch
        over CUDA's limits: threads or dimensions of a block, the grid's
        dimensions (unless it depends on ``sm_count``, known on the device)."""
        env = self._env(cfg, problem)
        reasons = []
        for restriction in self.restrictions:
            try:
                holds = bool(restriction(env))
            except Exception as error:  # a restriction that cannot be evaluated is a false one, said so
                reasons.append(f"restriction {restriction.text!r} failed: {type(error).__name__}: {error}")
                continue
            if not holds:
                reasons.append(f"restriction {restriction.text!r} does not hold")
        return reasons or self.limit_violations(cfg, problem)

    def scoped_rules(self, problem: Problem) -> list[ScopedRule]:
        """Each restriction written as an expression, with the parameters it
        reads: a search of a sparse space too large to list prunes by them as
        it fixes parameters one at a time (``Family.scoped_rules``)."""
        params = set(self.param_names)

        def holds(restriction: Expression, cfg: Config) -> bool:
            try:
                return bool(restriction(self._env(cfg, problem)))
            except Exception:  # noqa: BLE001 - a restriction that cannot be evaluated is a false one, as in constraint_violations
                return False

        return [ScopedRule(frozenset(r.names & params), lambda cfg, r=r: holds(r, cfg))
                for r in self.restrictions if isinstance(r.text, str) and r.names & params]  # fmt: skip

    def limit_violations(self, cfg: Config, problem: Problem, limits: DeviceLimits = DeviceLimits(),
                         sm_count: int | None = None) -> list[str]:  # fmt: skip
        """Why the launch of ``cfg`` exceeds ``limits`` (CUDA's by default),
        before anything is compiled. A launch expression that raises is no
        limit: ``expression_errors`` reports it, and the launch fails with it.
        Remembered by the values the launch reads (a space's points share a
        few blocks and grids)."""
        reads = self._launch_reads
        key = None if reads is None else (tuple(cfg[name] for name in reads), problem, limits, sm_count)
        known = self._limits_seen.get(key) if key is not None else None
        if known is not None:
            return list(known)
        env = self._env(cfg, problem, sm_count=sm_count)
        try:
            block = _dims([b(env) for b in self.block_exprs], "block", self.name)
        except Exception:
            return []
        grid = None
        if sm_count is not None or "sm_count" not in self._grid_names:
            try:
                grid = self._grid(env)
            except Exception:
                grid = None
        reasons = launch_violations(grid, block, limits)
        if key is not None:
            if len(self._limits_seen) > 100_000:
                self._limits_seen.clear()
            self._limits_seen[key] = tuple(reasons)
        return reasons

    @functools.cached_property
    def _launch_reads(self) -> tuple[str, ...] | None:
        """The parameters the block and grid read (None: a callable among them reads any)."""
        exprs = [*self.block_exprs, *(self.grid_exprs or (*self.problem_size, *(d for ds in self.grid_divisors for d in ds)))]
        if any(e._code is None and callable(e._value) for e in exprs):
            return None
        return tuple(sorted(set(self.param_names) & frozenset().union(*(e.names for e in exprs))))

    @functools.cached_property
    def _limits_seen(self) -> dict:
        return {}

    def kernel_name(self, cfg: Config) -> str:
        """The kernel's name, with its template arguments evaluated for ``cfg``
        (``reduce<float, 256>``): the compile instantiates that template."""
        if not self._template:
            return self.kernel
        return f"{self.kernel_base}<{', '.join(argument(cfg) for argument in self.template_arguments)}>"

    def defines(self, cfg: Config, problem: Problem) -> dict[str, str]:
        defines = {key: _define_text(value) for key, value in cfg.items() if key not in self.runtime_params}
        if self.type_macro:
            defines[self.type_macro] = C_TYPES[problem.dtype]
        return defines

    def compile_flags(self, cfg: Config) -> tuple[str, ...]:
        return self._compile_flags

    def shape(self, arg: Arg, problem: Problem) -> tuple[int, ...]:
        env = self._env(self.constants, problem)
        return tuple(int(s(env)) for s in self.shape_exprs[arg.name])

    def array_dtype(self, arg: Arg, problem: Problem) -> np.dtype:
        return np.dtype(arg.dtype or DTYPES[problem.dtype])

    def _nbytes(self, arg: Arg, problem: Problem) -> int:
        return int(np.prod(self.shape(arg, problem))) * self.array_dtype(arg, problem).itemsize

    def bytes_moved(self, cfg: Config, problem: Problem) -> int:
        if self.bytes_expr is not None:
            return int(self.bytes_expr(self._env(cfg, problem)))
        reads = sum(self._nbytes(a, problem) for a in self.args if a.role in ("in", "inout"))
        writes = sum(self._nbytes(a, problem) for a in self.args if a.is_output)
        return reads + writes

    def flops(self, cfg: Config, problem: Problem) -> int:
        return int(self.flops_expr(self._env(cfg, problem))) if self.flops_expr is not None else 0

    @property
    def compute_bound(self) -> bool:
        return self.flops_expr is not None

    def device_bytes(self, problem: Problem) -> int:
        """Inputs once, in-out arrays twice (working and pristine), outputs
        once, and the reference the device comparison reads (in double for floats)."""
        total = 0
        for arg in self.args:
            if arg.role in ("in", "out"):
                total += self._nbytes(arg, problem)
            elif arg.role == "inout":
                total += 2 * self._nbytes(arg, problem)
            if arg.is_output:
                total += 2 * self._nbytes(arg, problem)
        return total

    # ---- the harness -----------------------------------------------------
    def make_inputs(self, problem: Problem, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """Each array the kernel reads, in the order of ``args``: by its
        ``init`` (given the names it declares: ``n``, ``itemsize``, constants,
        arrays made before it), else random."""
        inputs = {}
        context = {**self.constants, "n": problem.n, "itemsize": np.dtype(DTYPES[problem.dtype]).itemsize}
        for arg in self.args:
            if arg.role in ("in", "inout", "constant"):
                shape, dtype = self.shape(arg, problem), self.array_dtype(arg, problem)
                if arg.init is not None:
                    wanted = self._init_context[arg.name]
                    known = {**context, **inputs}
                    extra = known if wanted is None else {key: known[key] for key in wanted if key in known}
                    array = np.asarray(arg.init(rng, shape, dtype, **extra), dtype=dtype)
                    if array.shape != shape and array.size == int(np.prod(shape)):
                        array = array.reshape(shape)
                    if array.shape != shape:
                        raise SpecError(f"family {self.name!r}: init of {arg.name!r} must give shape {shape}, got {array.shape}")
                else:
                    array = _random(rng, shape, dtype)
                inputs[arg.name] = array
        return inputs

    def reference(self, inputs: dict[str, np.ndarray], problem: Problem) -> np.ndarray:
        """The reference's outputs, each in its argument's shape and type,
        flattened one after another when there are several."""
        env = self._env(self.constants, problem)
        values = {**self.constants, "n": problem.n, "dtype": problem.dtype}
        for arg in self.args:
            if arg.name in inputs:
                values[arg.name] = inputs[arg.name]
            elif arg.role == "scalar" and not (self.scalar_exprs[arg.name].names - set(env)):
                values[arg.name] = np.dtype(arg.dtype).type(self.scalar_exprs[arg.name](env))
        result = self.reference_function(**{k: values[k] for k in self._reference_args})
        outputs = [a for a in self.args if a.is_output]
        result = list(result) if isinstance(result, (tuple, list)) else [result]
        if len(result) != len(outputs):
            raise SpecError(f"family {self.name!r}: reference must return {len(outputs)} arrays ({[a.name for a in outputs]}), got {len(result)}")
        parts = []
        for arg, value in zip(outputs, result):
            shape, dtype = self.shape(arg, problem), self.array_dtype(arg, problem)
            value = np.asarray(value)
            if value.size != int(np.prod(shape)):
                raise SpecError(f"family {self.name!r}: reference for {arg.name!r} must have {int(np.prod(shape))} elements (shape {shape}), got shape {value.shape}")
            parts.append(value.astype(dtype, copy=False).reshape(-1))
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def allocate(self, problem: Problem, inputs: dict[str, np.ndarray], gpu) -> dict:
        buffers = {}
        for arg in self.args:
            if arg.role == "in":
                buffers[arg.name] = gpu.upload(inputs[arg.name])
            elif arg.role == "inout":
                buffers[arg.name] = gpu.alloc(inputs[arg.name].nbytes)
                buffers[arg.name + ":pristine"] = gpu.upload(inputs[arg.name])
            elif arg.role == "out":
                buffers[arg.name] = gpu.alloc(self._nbytes(arg, problem))
        buffers[":constants"] = {a.name: inputs[a.name] for a in self.args if a.role == "constant"}
        return buffers

    def launch_shape(self, cfg: Config, problem: Problem, sm_count: int) -> tuple[tuple[int, int, int], tuple[int, int, int], int]:
        """The grid, the block and the dynamic shared bytes of ``cfg``'s launch.

        Raises:
            SpecError: a dimension that is no whole number of at least 1.
            Exception: whatever an expression raises (a division by zero, say).
        """
        env = self._env(cfg, problem, sm_count=sm_count)
        block = _dims([b(env) for b in self.block_exprs], "block", self.name)
        shared = self.shared_expr(env)
        if not _whole(shared, least=0):
            raise SpecError(f"family {self.name!r}: shared_bytes must be a whole number of at least 0, got {shared!r}")
        return self._grid(env), block, int(shared)

    def _grid(self, env: Mapping[str, Any]) -> tuple[int, int, int]:
        if self.grid_exprs is not None:
            return _dims([g(env) for g in self.grid_exprs], "grid", self.name)
        return _dims([
            ceil_div(int(size(env)), math.prod(int(d(env)) for d in divisors))
            for size, divisors in zip(self.problem_size, self.grid_divisors)
        ], "grid", self.name)  # fmt: skip

    @functools.cached_property
    def _grid_names(self) -> frozenset:
        exprs = self.grid_exprs if self.grid_exprs is not None else (*self.problem_size, *(d for ds in self.grid_divisors for d in ds))
        return frozenset().union(*(e.names for e in exprs)) if exprs else frozenset()

    def expression_errors(self, cfg: Config, problem: Problem, sm_count: int) -> list[str]:
        """What goes wrong evaluating ``cfg``'s launch (grid, block, shared
        bytes), scalars, shapes, bytes and FLOPs for ``problem``: an expression
        that raises, a dimension or shape that is no whole number of at least
        1, a scalar its type cannot hold, bytes that are not positive. Empty
        when every value is one the launch can take. ``sm_count`` stands for
        the device's where none is at hand."""
        errors = list(self._problem_errors(problem))

        def attempt(what: str, evaluate: Callable[[], Any]) -> Any:
            try:
                return evaluate()
            except SpecError as error:
                errors.append(str(error).split(": ", 1)[1] if str(error).startswith("family ") else str(error))
            except Exception as error:  # the spec's expression raised: its text and the error
                errors.append(f"{what} raised {type(error).__name__}: {error}")
            return None

        attempt("the launch", lambda: self.launch_shape(cfg, problem, sm_count))
        env = self._env(cfg, problem, sm_count=sm_count)
        for arg in self.args:
            if arg.role == "scalar":
                attempt(f"scalar {arg.name} {self.scalar_exprs[arg.name].text!r}", lambda a=arg: _scalar(a, self.scalar_exprs[a.name](env)))
        if self.bytes_expr is not None:  # else the bytes follow from the shapes, checked once a problem
            moved = attempt(f"bytes_moved {self.bytes_expr.text!r}", lambda: self.bytes_expr(env))
            if moved is not None and not _whole(moved, least=1):
                errors.append(f"bytes_moved must be a whole number of at least 1, got {moved!r}")
        if self.flops_expr is not None:
            flops = attempt(f"flops {self.flops_expr.text!r}", lambda: self.flops_expr(env))
            if flops is not None and not _whole(flops, least=0):
                errors.append(f"flops must be a whole number of at least 0, got {flops!r}")
        return errors

    def _problem_errors(self, problem: Problem) -> tuple[str, ...]:
        """What goes wrong evaluating ``problem``'s shapes (and the bytes that
        follow from them), once a problem: they read no parameter but the constants."""
        seen = self._problems_checked.get(problem)
        if seen is None:
            errors = []
            env = self._env(self.constants, problem)
            for arg in self.args:
                if arg.is_array:
                    try:
                        _shape(arg, [s(env) for s in self.shape_exprs[arg.name]])
                    except SpecError as error:
                        errors.append(str(error))
                    except Exception as error:
                        errors.append(f"the shape of {arg.name} raised {type(error).__name__}: {error}")
            seen = self._problems_checked[problem] = tuple(errors)
        return seen

    @functools.cached_property
    def _problems_checked(self) -> dict:
        return {}

    def bind(self, cfg: Config, problem: Problem, buffers, function, gpu) -> Launch:
        env = self._env(cfg, problem, sm_count=gpu.sm_count)
        grid, block, shared_bytes = self.launch_shape(cfg, problem, gpu.sm_count)
        for name, array in buffers[":constants"].items():
            gpu.set_constant(function, name, array)
        inouts = [a for a in self.args if a.role == "inout"]

        def restore() -> None:  # every launch starts from the same in-out data
            for arg in inouts:
                gpu.copy(buffers[arg.name].ptr(), buffers[arg.name + ":pristine"].ptr(), buffers[arg.name].nbytes)

        for arg in self.args:
            if arg.role == "out":
                poison(gpu, buffers[arg.name])
        restore()
        values = []
        for arg in self.args:
            if arg.role in ("in", "out", "inout"):
                values.append(buffers[arg.name].ptr())
            elif arg.role == "scalar":
                values.append(np.dtype(arg.dtype).type(self.scalar_exprs[arg.name](env)))
        run = gpu.launcher(function, grid, block, *values, shared_bytes=shared_bytes)
        outputs = [a for a in self.args if a.is_output]

        def fetch() -> np.ndarray:
            parts = [gpu.download(buffers[a.name], int(np.prod(self.shape(a, problem))), self.array_dtype(a, problem)) for a in outputs]
            return parts[0] if len(parts) == 1 else np.concatenate(parts)

        output = None
        if len(outputs) == 1:
            arg = outputs[0]
            dtype = self.array_dtype(arg, problem)
            output = DeviceOutput(ptr=int(buffers[arg.name].ptr()), count=int(np.prod(self.shape(arg, problem))), dtype=dtype,
                                  tolerance=None if dtype.kind in "iub" else self.tolerance)  # fmt: skip
        return Launch(run=run, grid=grid, block=block, fetch=fetch, restore=restore if inouts else None, output=output,
                      shared_bytes=shared_bytes)

    def verify(self, output: np.ndarray, expected: np.ndarray, inputs: dict[str, np.ndarray]) -> Verdict:
        if np.asarray(expected).dtype.kind in "iub":
            wrong = int(np.count_nonzero(np.asarray(output) != expected)) if output.shape == expected.shape else expected.size
            return Verdict(wrong == 0, float(wrong), "" if wrong == 0 else f"{wrong} elements differ")
        return super().verify(output, expected, inputs)


MAX_NAME = 64  # a family name's characters at most (it names files: cubins, figures)
# The problem's names an expression reads beside the parameters (restrictions, grid, block, bytes).
EXPRESSION_NAMES = frozenset({"n", "dtype", "itemsize", "sm_count"})
# C++ keywords (and alternative tokens): a parameter so named breaks its -D define and the header's struct.
CPP_KEYWORDS = frozenset("""alignas alignof and and_eq asm auto bitand bitor bool break case catch char char8_t char16_t
char32_t class compl concept const consteval constexpr constinit const_cast continue co_await co_return co_yield decltype
default delete do double dynamic_cast else enum explicit export extern false float for friend goto if inline int long
mutable namespace new noexcept not not_eq nullptr operator or or_eq private protected public register reinterpret_cast
requires return short signed sizeof static static_assert static_cast struct switch template this thread_local throw true
try typedef typeid typename union unsigned using virtual void volatile wchar_t while xor xor_eq""".split())


def _resolve_source(source: str | Path, name: str) -> Path:
    """``source`` as an absolute path: relative paths are taken from the file
    that made the spec (the first caller outside this module)."""
    path = Path(source)
    if not path.is_absolute():
        for frame in inspect.stack()[1:]:
            if Path(frame.filename).resolve() != Path(__file__).resolve():
                path = Path(frame.filename).resolve().parent / path
                break
    if not path.is_file():
        raise SpecError(f"family {name!r}: source must be an existing CUDA file, got {str(path)!r}")
    return path.resolve()


def _param(key: str, values: Any, family: str) -> Param:
    # The name's rules hold for a Param as for a list of values: either way it becomes a -D define.
    if not (isinstance(key, str) and key.isidentifier() and key.isascii()) or key in CPP_KEYWORDS:
        raise SpecError(f"family {family!r}: parameter names must be ASCII C identifiers and no C++ keyword (they become "
                        f"-D defines and names in best_configs.h), got {key!r}")  # fmt: skip
    if isinstance(values, Param):
        if values.name != key:
            raise SpecError(f"family {family!r}: tune_params[{key!r}] is a Param named {values.name!r}")
        return values
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or not values:
        raise SpecError(f"family {family!r}: tune_params[{key!r}] must be a non-empty list of values, got {values!r}")
    values = tuple(v.item() if isinstance(v, np.generic) else v for v in values)
    for value in values:
        if not isinstance(value, (int, float, str)) or (isinstance(value, float) and not math.isfinite(value)):
            raise SpecError(f"family {family!r}: tune_params[{key!r}] values must be integers, finite numbers or text, got {value!r}")
    if len(set(values)) != len(values):
        raise SpecError(f"family {family!r}: tune_params[{key!r}] lists a value twice: {list(values)}")
    return Param(key, values, f"{key} (a -D define)")


def _tolerance(value: Any, fail) -> float:
    """The largest relative error, as a float: a finite number above 0."""
    why = amount_unfit(value)
    if why:
        raise fail(f"tolerance {why}")
    return float(value)


def _define_text(value: Any) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


def _whole(value: Any, least: int) -> bool:
    """Whether ``value`` is a whole number (int, or a float without fraction) of at least ``least``."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        return False
    if isinstance(value, (float, np.floating)) and not math.isfinite(value):  # int() of them raises
        return False
    return value == int(value) and value >= least


def _dims(values: list, what: str, family: str) -> tuple[int, int, int]:
    """A launch's grid or block from its expressions' values: one to three
    whole numbers of at least 1 (the rest 1). Anything else is the spec's
    mistake, said so (a launch error of that configuration), never changed
    into a launch it did not ask for."""
    if not 1 <= len(values) <= 3 or not all(_whole(v, least=1) for v in values):
        raise SpecError(f"family {family!r}: {what} must be one to three whole numbers of at least 1, got {list(values)}")
    return tuple(int(v) for v in (list(values) + [1, 1, 1])[:3])


def _shape(arg: Arg, values: list) -> tuple[int, ...]:
    if not all(_whole(v, least=1) for v in values):
        raise SpecError(f"the shape of {arg.name} must be whole numbers of at least 1, got {list(values)}")
    return tuple(int(v) for v in values)


def _scalar(arg: Arg, value: Any) -> np.generic:
    """``value`` as the scalar's type, refused where the type cannot hold it
    (an int32 of 2^31 would wrap) or it is no number."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise SpecError(f"scalar {arg.name} must be a number, got {value!r}")
    dtype = np.dtype(arg.dtype)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        if not _whole(value, least=info.min) or value > info.max:
            raise SpecError(f"scalar {arg.name} must be a whole number from {info.min} to {info.max} ({arg.dtype}), got {value!r}")
    elif math.isfinite(value) and not math.isfinite(float(dtype.type(value))):
        raise SpecError(f"scalar {arg.name} must be finite as {arg.dtype}, got {value!r}")
    return dtype.type(value)


# A kernel as the source names it: a C++ name, qualified or not, with template arguments or without.
KERNEL_NAME = re.compile(r"\s*(?:::)?[A-Za-z_]\w*(?:::[A-Za-z_]\w*)*\s*(?:<.*>)?\s*", re.S)


def _kernel_parts(kernel: Any, fail) -> tuple[str, list[str] | None]:
    """``"reduce<float, block_size_x>"`` -> ``("reduce", ["float", "block_size_x"])``;
    a name without template arguments -> ``(name, None)``."""
    if not (isinstance(kernel, str) and KERNEL_NAME.fullmatch(kernel) and kernel.isascii() and kernel.isprintable()
            and '"' not in kernel and "\\" not in kernel):  # fmt: skip
        raise fail(f"kernel must be the kernel's name in the source (a C++ name, e.g. 'stencil_kernel' or "
                   f"'reduce<float, block_size_x>'), got {kernel!r}")  # fmt: skip
    start = kernel.find("<")
    if start < 0:
        return kernel.strip(), None
    inner = kernel.strip()[kernel.strip().find("<") + 1 : -1]
    arguments, depth, current = [], 0, ""
    for char in inner:
        depth += {"<": 1, "(": 1, ">": -1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            arguments.append(current.strip())
            current = ""
        else:
            current += char
    arguments.append(current.strip())
    if depth != 0 or not all(arguments):
        raise fail(f"kernel's template arguments must be a comma-separated list, got {kernel!r}")
    return kernel[:start].strip(), arguments


class _TemplateArgument:
    """One template argument of the kernel: an expression of the parameters,
    evaluated per configuration, or text (a type name, a macro) kept as written."""

    def __init__(self, text: str, expression: Expression | None) -> None:
        self.text, self.expression = text, expression

    def __call__(self, cfg: Config) -> str:
        if self.expression is None:
            return self.text
        value = self.expression(cfg)
        if isinstance(value, (bool, np.bool_)):
            return "true" if value else "false"
        if isinstance(value, (int, np.integer)) or (isinstance(value, (float, np.floating)) and float(value).is_integer()):
            return str(int(value))
        return str(value)


def _template_argument(text: str, index: int, params: set[str], family: str) -> _TemplateArgument:
    """An argument that names parameters only (``block_size_x``,
    ``block_size_x * 2``) is evaluated for each configuration; any other
    (``float``, ``unsigned int``, a macro) reaches the compiler as written."""
    try:
        names = {node.id for node in ast.walk(ast.parse(text, mode="eval")) if isinstance(node, ast.Name)} - set(HELPERS)
    except SyntaxError:
        return _TemplateArgument(text, None)
    if not names or not names <= params:
        return _TemplateArgument(text, None)
    return _TemplateArgument(text, Expression(text, f"kernel's template argument {index + 1}", family))


def _check_sizes(rank: int) -> tuple[int, int]:
    """Two verification sizes of about 2^20 and 2^22 elements: the first fits
    no tile evenly, the second is a power of two."""
    if rank <= 1:
        return (1 << 20) + 37, 1 << 22
    if rank == 2:
        return 1024 + 37, 2048
    return 101 + 2, 1 << math.ceil(22 / rank)


def _random(rng: np.random.Generator, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    count = int(np.prod(shape))
    if dtype.kind == "f":
        flat = uniform(rng, -1.0, 1.0, count, dtype)
    elif dtype.kind in "iu":
        high = min(64, np.iinfo(dtype).max)
        flat = integers(rng, 0 if dtype.kind == "u" else -high, high, count, dtype)
    else:
        flat = rng.integers(0, 2, count).astype(dtype)
    return flat.reshape(shape)


def _init_parameters(args: Sequence[Arg], constants: set[str], fail) -> dict[str, tuple[str, ...] | None]:
    """Argument name -> the names its ``init`` declares beyond ``(rng, shape,
    dtype)``, each ``n``, ``itemsize``, a constant or an array made before it
    (None: it takes ``**kwargs``, and gets them all)."""
    wanted: dict[str, tuple[str, ...] | None] = {}
    made: list[str] = []
    for arg in args:
        if arg.init is not None:
            if not callable(arg.init):
                raise fail(f"init of {arg.name!r} must be a function (rng, shape, dtype), got {arg.init!r}")
            available = {"n", "itemsize", *constants, *made}
            try:
                parameters = list(inspect.signature(arg.init).parameters.values())
            except (TypeError, ValueError):  # a builtin without a signature: the three positional arguments only
                parameters = []
            names = []
            for parameter in parameters[3:]:
                if parameter.kind is inspect.Parameter.VAR_KEYWORD:
                    names = None
                    break
                if parameter.kind is inspect.Parameter.VAR_POSITIONAL:
                    continue
                if parameter.name not in available and parameter.default is inspect.Parameter.empty:
                    raise fail(f"init of {arg.name!r} takes {parameter.name!r}, which must be n, itemsize, a constant "
                               f"or an array made before it (known: {sorted(available)})")  # fmt: skip
                names.append(parameter.name)
            wanted[arg.name] = None if names is None else tuple(names)
        if arg.role in ("in", "inout", "constant"):
            made.append(arg.name)
    return wanted


def _reference_parameters(reference: Callable, args: Sequence[Arg], constants: set[str], fail) -> tuple[str, ...]:
    """The names ``reference`` takes: input arrays, scalars, ``n``, ``dtype`` or constants."""
    available = {a.name for a in args if a.role != "out"} | {"n", "dtype"} | constants
    try:
        parameters = inspect.signature(reference).parameters
    except (TypeError, ValueError):
        raise fail(f"reference must be a Python function, got {reference!r}") from None
    names = tuple(parameters)
    for key in names:
        if key not in available:
            raise fail(f"reference takes {key!r}, which is not an argument the kernel reads, n or a constant (known: {sorted(available)})")
    return names
