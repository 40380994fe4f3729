"""A kernel as Kernel Tuner runs it, declared as this project's ``KernelSpec``.

What Kernel Tuner decides for a kernel, and where it is kept here:

- **Expressions** (``KtExpression``): a grid divisor, a problem size, a
  restriction or a metric is a number, a Python expression over the tune
  parameters' names, or a function of their dict, evaluated as Kernel Tuner
  evaluates it (whole Python, ``np``/``numpy`` at hand; ``int()`` of a string
  divisor or size).
- **Launch geometry** (``Geometry``): the block is the ``block_size_names``
  parameters (default ``block_size_x/y/z``; 256, 1, 1 where one is not a
  parameter); the grid is the problem size over the product of each
  dimension's divisors, rounded up (Kernel Tuner's ``get_grid_dimensions``).
- **Defines** (``KernelTunerSpec.defines``): ``grid_size_x/y/z``, the block's
  names, every parameter and ``kernel_tuner=1``, or exactly the user's
  ``defines``. A ``loop_unroll_factor`` name is a C++ constant, not a macro
  (nvcc reads ``#pragma unroll``'s argument as a constant expression and never
  expands a macro there): the generated source declares it from a ``-D`` of
  its own, and a value of 0 leaves the pragma ignored, as Kernel Tuner's
  removal of the pragma does.
- **The kernel's name** (``wrapped_source``): a source without ``extern "C"``
  is compiled inside ``extern "C" { }``, as PyCUDA (Kernel Tuner's CUDA
  backend) compiles it, so a kernel is found by its plain name.
- **Verification** (``KernelTunerSpec.verify``): the outputs with an answer
  are fetched and compared by ``numpy.allclose(answer, output, atol=atol)``
  (NaN equal to NaN where the answer holds NaN), or by the user's
  ``verify(answer, result, atol)``; with neither, nothing is compared (Kernel
  Tuner's rule). Arrays with an answer are restored from the user's array
  before every launch, as Kernel Tuner refreshes them before verifying.
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
import hashlib
import inspect
import math
import os
import re
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from tuner.families.base import Config, Problem, Verdict
from tuner.families.spec import KernelSpec

DEFAULT_BLOCK_NAMES = ("block_size_x", "block_size_y", "block_size_z")
DEFAULT_THREADS = (256, 1, 1)  # Kernel Tuner's block where a dimension is no parameter
# The most threads a block may have on every CUDA GPU since compute capability 2.0;
# Kernel Tuner drops configurations over it from its search space, and so does the spec.
MAX_THREADS_PER_BLOCK = 1024
EVAL_GLOBALS = {"np": np, "numpy": np}
BUILTIN_NAMES = frozenset(dir(builtins))


class KernelTunerArgumentError(ValueError):
    """A ``tune_kernel`` argument this project cannot take: one line naming it, the rule and the value."""


class KtExpression:
    """A number, a Python expression over the tune parameters, or a function
    of their dict: Kernel Tuner's grid divisors, problem sizes, restrictions.

    Its ``__name__`` is its text, so the spec's messages quote it.
    """

    def __init__(self, value: Any, where: str, names: Sequence[str], *, whole: bool = False) -> None:
        """
        Args:
            value: the expression (str), a number, or a callable of the parameters' dict.
            where: the argument it came from, for messages (``grid_div_x[0]``).
            names: the names it may read (the tune parameters).
            whole: ``int()`` of a string's value (Kernel Tuner's sizes and divisors).
        """
        self.where, self.names, self.whole = where, tuple(names), whole
        self.value, self._code = value, None
        if isinstance(value, str):
            try:
                tree = ast.parse(value.strip(), mode="eval")
            except SyntaxError as error:
                raise KernelTunerArgumentError(f"{where}: must be a Python expression, got {value!r} ({error.msg})") from None
            read = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
            unknown = sorted(read - set(self.names) - set(EVAL_GLOBALS) - BUILTIN_NAMES)
            if unknown:
                raise KernelTunerArgumentError(f"{where}: {value!r} names {unknown[0]!r}, which is not a tune parameter "
                                               f"({sorted(self.names)})")  # fmt: skip
            self._code = compile(tree, f"<{where}>", "eval")
            self.__name__ = value
        elif callable(value):
            self.__name__ = getattr(value, "__name__", repr(value))
        elif isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool):
            self.__name__ = repr(value)
        else:
            raise KernelTunerArgumentError(f"{where}: must be a number, a string expression or a function of the parameters' "
                                           f"dict, got {value!r}")  # fmt: skip

    def params(self, env: Mapping[str, Any]) -> dict[str, Any]:
        """The tune parameters of ``env`` (which may hold the spec's problem names too)."""
        return {name: env[name] for name in self.names if name in env}

    def __call__(self, env: Mapping[str, Any]) -> Any:
        if self._code is not None:
            value = eval(self._code, dict(EVAL_GLOBALS), self.params(env))
            return int(value) if self.whole else value
        if callable(self.value):
            return self.value(self.params(env))
        return self.value


class KtRestriction:
    """One of Kernel Tuner's restrictions as a callable of the spec's
    environment: a string expression, a function of the parameters' dict
    (``lambda p: ...``), a function of parameters by name, or a
    ``(function, [names])`` pair. Its ``__name__`` is its text."""

    def __init__(self, value: Any, where: str, names: Sequence[str]) -> None:
        self.names = tuple(names)
        self._selected: tuple[str, ...] | None = None
        if isinstance(value, tuple) and len(value) in (2, 3) and callable(value[0]) and isinstance(value[1], (list, tuple)):
            unknown = [n for n in value[1] if n not in self.names]
            if unknown:
                raise KernelTunerArgumentError(
                    f"{where}: names {unknown[0]!r}, which is not a tune parameter ({sorted(self.names)})"
                )
            self._function, self._selected = value[0], tuple(value[1])
            self.__name__ = value[2] if len(value) == 3 and isinstance(value[2], str) else _callable_text(value[0])
        elif isinstance(value, str):
            self._function = KtExpression(value, where, names)
            self.__name__ = value
        elif callable(value) and not _is_constraint_object(value):
            self._function = value
            taken = _positional_names(value)
            if taken and all(name in self.names for name in taken):  # def r(block_size_x, tile_size_x): ...
                self._selected = tuple(taken)
            elif taken is not None and len(taken) != 1:
                raise KernelTunerArgumentError(f"{where}: a restriction function must take the parameters' dict or parameters "
                                               f"by name, got one taking {taken}")  # fmt: skip
            self.__name__ = _callable_text(value)
        else:
            raise KernelTunerArgumentError(f"{where}: must be a string expression, a function of the parameters' dict or a "
                                           f"(function, [parameter names]) pair, got {type(value).__name__} {value!r}")  # fmt: skip

    def __call__(self, env: Mapping[str, Any]) -> bool:
        if isinstance(self._function, KtExpression):
            return bool(self._function(env))
        if self._selected is not None:
            return bool(self._function(**{name: env[name] for name in self._selected}))
        return bool(self._function({name: env[name] for name in self.names if name in env}))


def _is_constraint_object(value: Any) -> bool:
    """A python-constraint ``Constraint`` (callable, but not a restriction of the parameters' dict)."""
    return any(cls.__module__.split(".")[0] == "constraint" for cls in type(value).__mro__)


def _positional_names(function: Callable) -> list[str] | None:
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return None
    return [p.name for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty]


def _callable_text(function: Callable) -> str:
    """A restriction function's source text where Python keeps it (``lambda p: ...``), else its name."""
    try:
        text = inspect.getsource(function).strip()
    except (OSError, TypeError):
        return getattr(function, "__name__", repr(function))
    match = re.search(r"lambda[^:]*:.*", text)
    if getattr(function, "__name__", "") == "<lambda>" and match:
        return match.group(0).rstrip(",)] ")
    return getattr(function, "__name__", text.splitlines()[0])


@dataclasses.dataclass(frozen=True)
class Geometry:
    """Kernel Tuner's launch geometry of one kernel.

    Attributes:
        problem_size: up to three ``KtExpression`` (the rest 1), or one
            callable of the parameters' dict returning them.
        divisors: per dimension, the ``KtExpression`` whose product divides it.
        block_names: the parameters that are the block's x, y, z.
        params: the tune parameters' names.
    """

    problem_size: tuple[KtExpression, ...] | Callable
    divisors: tuple[tuple[KtExpression, ...], tuple[KtExpression, ...], tuple[KtExpression, ...]]
    block_names: tuple[str, str, str]
    params: tuple[str, ...]

    def threads(self, env: Mapping[str, Any]) -> tuple[int, int, int]:
        return tuple(int(env.get(name, default)) if name in self.params else default
                     for name, default in zip(self.block_names, DEFAULT_THREADS))  # fmt: skip

    def sizes(self, env: Mapping[str, Any]) -> list[int]:
        if callable(self.problem_size):
            given = self.problem_size({name: env[name] for name in self.params})
            given = (given,) if isinstance(given, (str, int, np.integer)) else tuple(given)
            given = [KtExpression(s, "problem_size", self.params, whole=True) for s in given]
        else:
            given = list(self.problem_size)
        sizes = [1, 1, 1]
        for i, size in enumerate(given):
            sizes[i] = size(env)
        return sizes

    def grid(self, env: Mapping[str, Any]) -> tuple[int, int, int]:
        sizes = self.sizes(env)
        return tuple(int(math.ceil(float(sizes[i]) / float(math.prod(d(env) for d in self.divisors[i])))) for i in range(3))


class _Dimension:
    """One dimension of the block or grid, as the spec's expression (its name is what messages quote)."""

    def __init__(self, of: Callable, index: int, name: str) -> None:
        self.of, self.index, self.__name__ = of, index, name

    def __call__(self, env: Mapping[str, Any]) -> int:
        return self.of(env)[self.index]


class UserArray:
    """``init`` of an argument the user passed: a copy of their array, not random data."""

    def __init__(self, array: np.ndarray) -> None:
        self.array = array

    def __call__(self, rng: Any, shape: tuple[int, ...], dtype: Any, *context: Any, **more: Any) -> np.ndarray:
        if self.array is None:
            raise RuntimeError("the array of this tune_kernel argument was let go after its call (KernelTunerSpec.release_data)")
        return np.array(self.array, dtype=dtype, order="C", copy=True).reshape(shape)


class KernelTunerSpec(KernelSpec):
    """A ``KernelSpec`` whose defines, launch geometry and verification are
    Kernel Tuner's (module docstring). Made by ``tuner.kernel_tuner.translate``.

    Args:
        answer: Kernel Tuner's answer list (one entry per kernel argument, None
            where not compared), or None.
        verify: the user's ``verify(answer, result, atol)``, or None.
        atol: ``numpy.allclose``'s ``atol``.
        geometry: the launch geometry.
        user_defines: Kernel Tuner's ``defines`` (name -> value or function of
            the parameters), or None for its default defines.
        kt_args: per kernel argument, its ``Arg`` name, in Kernel Tuner's order.
        compared: the kernel arguments fetched for verification (indices).
        spec: the rest of ``KernelSpec``'s arguments.
    """

    def __init__(self, *, answer: list | None, verify: Callable | None, atol: float, geometry: Geometry,
                 user_defines: Mapping[str, Any] | None, kt_args: Sequence[str], compared: Sequence[int],
                 **spec: Any) -> None:  # fmt: skip
        names = tuple(spec["tune_params"])
        block = [_Dimension(geometry.threads, i, geometry.block_names[i]) for i in range(3)]
        grid = [_Dimension(geometry.grid, i, f"grid_size_{'xyz'[i]}") for i in range(3)]
        restrictions = list(spec.pop("restrictions", ()))
        used = [name for name in geometry.block_names if name in names]
        if used:  # Kernel Tuner's own restriction of every search space
            limit = KtRestriction(f"{' * '.join(used)} <= {MAX_THREADS_PER_BLOCK}", "the block's threads", names)
            restrictions.append(limit)
        super().__init__(reference=_answers_of_the_user, block=block, grid=grid, restrictions=restrictions, **spec)
        self.answer, self.user_verify, self.atol = answer, verify, float(atol)
        self.geometry, self.user_defines = geometry, user_defines
        self.kt_args, self.compared = tuple(kt_args), tuple(compared)

    # ---- the user's data -----------------------------------------------------
    def take_data_of(self, other: "KernelTunerSpec") -> None:
        """Hold ``other``'s arrays, answer and verify: another translation of
        the same call (the same name, so the same digest of every argument),
        where this one is the family registered under it."""
        for mine, theirs in zip(self.args, other.args):
            if isinstance(mine.init, UserArray) and isinstance(theirs.init, UserArray):
                mine.init.array = theirs.init.array
        self.answer, self.user_verify = other.answer, other.user_verify

    def release_data(self) -> None:
        """Let go of the user's arrays once measured: the registry keeps the
        family (its rows are read back by it), not the inputs."""
        for arg in self.args:
            if isinstance(arg.init, UserArray):
                arg.init.array = None
        self.answer = None

    # ---- the recipe ------------------------------------------------------
    def defines(self, cfg: Config, problem: Problem) -> dict[str, str]:
        env = dict(cfg)
        if self.user_defines is None:
            values: dict[str, Any] = {}
            for i, size in enumerate(self.geometry.grid(env)):
                values[f"grid_size_{'xyz'[i]}"] = size
            for name, threads in zip(self.geometry.block_names, self.geometry.threads(env)):
                values[name] = threads
            values.update(cfg)
            values["kernel_tuner"] = 1
        else:
            values = {
                name: value(env) if callable(value) else _replace_params(str(value), env)
                for name, value in self.user_defines.items()
            }
        # A loop_unroll_factor name is declared as a C++ constant by the compile (tuner.measure.compile.is_constexpr).
        return {name: str(value) for name, value in values.items()}

    # ---- the harness -----------------------------------------------------
    def reference(self, inputs: dict[str, np.ndarray], problem: Problem) -> np.ndarray:
        """The answers, flattened one after another (what ``check-family``
        looks at); verification reads the answer list itself."""
        parts = [np.asarray(self.answer[i]).reshape(-1) for i in self.compared if self.answer and self.answer[i] is not None]
        return np.concatenate(parts) if parts else np.zeros(0)

    def bind(self, cfg: Config, problem: Problem, buffers, function, gpu):
        launch = super().bind(cfg, problem, buffers, function, gpu)
        shapes = {a.name: (self.shape(a, problem), self.array_dtype(a, problem)) for a in self.args if a.is_array}

        def fetch() -> list:
            """Kernel Tuner's ``result_host``: each compared argument's array, None for the others."""
            result: list = [None] * len(self.kt_args)
            for i in self.compared:
                name = self.kt_args[i]
                shape, dtype = shapes[name]
                result[i] = gpu.download(buffers[name], int(np.prod(shape)), dtype).reshape(shape)
            return result

        return dataclasses.replace(launch, fetch=fetch, output=None)

    def verify(self, output: list, expected: np.ndarray, inputs: dict[str, np.ndarray]) -> Verdict:
        if self.user_verify is not None:
            ok = _call_verify(self.user_verify, self.answer, output, self.atol)
            return Verdict(
                bool(ok),
                0.0 if ok else 1.0,
                "" if ok else f"verify {getattr(self.user_verify, '__name__', 'function')} returned {ok!r}",
            )
        if not self.answer:
            return Verdict(True, 0.0, "")  # no answer: nothing to compare (Kernel Tuner's rule)
        worst, wrong = 0.0, []
        for i in self.compared:
            expected_i, result = np.asarray(self.answer[i]).reshape(-1), np.asarray(output[i]).reshape(-1)
            nan = np.isnan(expected_i) if expected_i.dtype.kind in "fc" else np.zeros(expected_i.shape, bool)
            close = np.isclose(result, expected_i, atol=self.atol, equal_nan=bool(nan.any()))
            if expected_i.size:
                difference = np.abs(result.astype(np.float64) - expected_i.astype(np.float64))
                finite = difference[np.isfinite(difference)]
                worst = max(worst, float(finite.max()) if finite.size else math.inf)
            if not close.all():
                wrong.append(
                    f"argument {i}: {int((~close).sum())} of {close.size} elements differ (numpy.allclose, atol={self.atol:g})"
                )
        return Verdict(not wrong, worst, "; ".join(wrong))


def _answers_of_the_user() -> None:
    """The spec's reference: the answers are the user's (``KernelTunerSpec.reference``)."""


def _call_verify(verify: Callable, answer: Any, result: list, atol: float) -> Any:
    """``verify(answer, result, atol=atol)``, or without ``atol`` where the function takes none (Kernel Tuner's rule)."""
    try:
        takes_atol = "atol" in inspect.signature(verify).parameters
    except (TypeError, ValueError):
        takes_atol = True
    return verify(answer, result, atol=atol) if takes_atol else verify(answer, result)


def _replace_params(text: str, params: Mapping[str, Any]) -> str:
    """Kernel Tuner's ``replace_param_occurrences``: each word that names a parameter becomes its value."""
    return "".join(str(params[part]) if part in params else part for part in re.split(r"([a-zA-Z0-9_]+)", text))


def wrapped_source(text: str, original: Path | None, kernel: str, folder: Path) -> Path:
    """The source nvcc compiles, where Kernel Tuner's compile differs from a
    plain one: ``original`` itself when nothing differs; else a generated file
    in ``folder`` (named by its content) that puts the source (included, or
    ``text`` when the source is a string) inside ``extern "C" { }`` where it
    has none.

    Raises:
        KernelTunerArgumentError: the generated file cannot name ``original``.
    """
    extern_c = 'extern "C"' not in text and "<" not in kernel  # PyCUDA's rule (a templated name is a C++ instantiation)
    if original is not None and not extern_c:
        return original
    lines = ['// Generated by tuner.kernel_tuner: the kernel source as Kernel Tuner compiles it (in PyCUDA\'s extern "C").']
    if extern_c:
        lines.append('extern "C" {')
    if original is not None:
        if '"' in str(original) or "\n" in str(original):
            raise KernelTunerArgumentError(
                f"kernel_source: a file path must hold no double quote or newline, got {str(original)!r}"
            )
        lines.append(f"// {original.name}: sha256 {hashlib.sha256(text.encode()).hexdigest()} (a change to it is a new module)")
        lines.append(f'#include "{original}"')
    else:
        lines += ["#line 1", text]
    if extern_c:
        lines.append("}")
    content = "\n".join(lines) + "\n"
    stem = re.match(r"[A-Za-z_]\w*", kernel)
    path = folder / f"{stem.group(0) if stem else 'kernel'}-{hashlib.sha256(content.encode()).hexdigest()[:16]}.cu"
    if not path.exists():
        folder.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(f".{os.getpid()}.tmp")
        temporary.write_text(content)
        os.replace(temporary, path)
    return path


def argument_name(index: int) -> str:
    """The spec's name of kernel argument ``index`` (Kernel Tuner's arguments have none)."""
    return f"arg{index}"
