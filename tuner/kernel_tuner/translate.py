"""``tune_kernel``'s arguments, with Kernel Tuner's meanings, as this
project's ``KernelSpec`` and the run that measures it (``Plan``).

Everything is checked here, before any GPU work: an argument with no
counterpart, or a value Kernel Tuner itself would refuse, is one
``KernelTunerArgumentError`` line naming it. The mapping:

- the arrays in ``arguments`` are the kernel's inputs as given (their ``init``
  returns a copy of them, never random data); those with an ``answer`` (or
  every array where ``verify`` is given without one) are fetched and
  verified; the first array is the spec's output where nothing is compared;
  numpy scalars are ``Scalar`` arguments; ``cmem_args`` are ``Constant``\\ s;
- ``problem_size``, ``grid_div_x/y/z``, ``block_size_names``,
  ``restrictions``, ``defines`` and ``smem_args`` keep Kernel Tuner's rules
  (``tuner.kernel_tuner.family``); ``compiler_options`` are nvcc flags;
- ``iterations`` is the least number of timed samples per configuration
  (sampling goes on until the median is known to 0.5 %; the time is the
  median with the L2 cache flushed, where Kernel Tuner's is the mean of
  ``iterations`` hot launches);
- no ``strategy`` (or ``"brute_force"``): every feasible configuration, a
  sweep; ``"random_sample"`` and ``"bayes_opt"``: an Optuna study with
  uniform draws and a Gaussian process; Kernel Tuner's other strategies
  (and this project's strategy names): a study with the project's default
  search (or the named one), of ``strategy_options["max_fevals"]``
  configurations, or until ``time_limit`` seconds.
"""

from __future__ import annotations

import hashlib
import inspect
import math
import numbers
import weakref
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from tuner.families.base import DTYPES, MAX_ENUMERATED, Problem
from tuner.families.spec import MAX_NAME, SCALAR_FORMATS, Constant, In, InOut, Scalar
from tuner.kernel_tuner.family import (
    DEFAULT_BLOCK_NAMES,
    Geometry,
    KernelTunerArgumentError,
    KernelTunerSpec,
    KtExpression,
    KtRestriction,
    UserArray,
    argument_name,
    wrapped_source,
)
from tuner.measure.compile import CONSTEXPR_MARK, is_constexpr
from tuner.measure.timing import TimingOptions
from tuner.search.samplers.registry import DEFAULT_STRATEGY, STRATEGIES

# Kernel Tuner's strategies with a counterpart among this project's.
COUNTERPARTS = {"random_sample": "random", "bayes_opt": "gp"}
# Kernel Tuner's strategies without one: the project's default search takes their place.
WITHOUT_COUNTERPART = frozenset({
    "minimize", "basinhopping", "diff_evo", "genetic_algorithm", "greedy_mls", "ordered_greedy_mls", "greedy_ils",
    "dual_annealing", "mls", "pso", "simulated_annealing", "skopt", "firefly_algorithm", "pyatf_strategies",
    "hybrid_vndx", "adaptive_tabu_greywolf",
})  # fmt: skip
MULTI_OBJECTIVE = frozenset({"nsga2", "nsga3"})
CUDA_LANGUAGES = frozenset({"CUDA", "CUPY", "NVCUDA"})  # Kernel Tuner's backends that compile CUDA C++ as nvcc does
RANDOM_SAMPLE_FRACTION = 0.1  # Kernel Tuner's random_sample default: a tenth of the space
# Kernel Tuner's reserved parameter names (``check_tune_params_list``).
RESERVED = ("grid_size_x", "grid_size_y", "grid_size_z", "time")


@dataclass
class Plan:
    """A ``tune_kernel`` call, translated: the spec and how ``tuner.tune`` runs it.

    Attributes:
        spec: the family.
        problem: its problem (``n``: the problem size's product, or the largest array).
        sampler: the study's strategy, or None for a sweep of every configuration.
        budget: the study's configurations (None: until ``timeout_s`` or the space's end).
        timeout_s: the study's seconds (Kernel Tuner's ``time_limit``).
        space_size: feasible configurations (None where the space is too large to list).
        strategy: what runs, in words.
        notes: lines to print before the run (a strategy without a counterpart, say).
    """

    spec: KernelTunerSpec
    problem: Problem
    sampler: str | None
    budget: int | None
    timeout_s: float | None
    seed: int
    timing: TimingOptions
    device_index: int
    iterations: int
    compiler_options: list[str]
    metrics: dict[str, Any]
    tune_params: dict[str, list]
    space_size: int | None
    strategy: str
    verbose: bool
    quiet: bool
    notes: list[str] = field(default_factory=list)


def translate(
    kernel_name: str,
    kernel_source: Any,
    problem_size: Any,
    arguments: Sequence,
    tune_params: Mapping[str, Sequence],
    grid_div_x: Any = None,
    grid_div_y: Any = None,
    grid_div_z: Any = None,
    restrictions: Any = None,
    answer: Sequence | None = None,
    atol: float = 1e-6,
    verify: Callable | None = None,
    verbose: bool = False,
    lang: str | None = None,
    device: int = 0,
    platform: int = 0,
    smem_args: Mapping | None = None,
    cmem_args: Mapping | None = None,
    texmem_args: Mapping | None = None,
    compiler: str | None = None,
    compiler_options: Sequence[str] | None = None,
    defines: Mapping | None = None,
    log: Any = None,
    iterations: int = 7,
    block_size_names: Sequence[str] | None = None,
    quiet: bool = False,
    strategy: str | None = None,
    strategy_options: Mapping | None = None,
    cache: Any = None,
    metrics: Mapping | None = None,
    simulation_mode: Any = None,
    parallel: Any = None,
    observers: Any = None,
    objective: str | None = None,
    objective_higher_is_better: bool | None = None,
    objectives: Any = None,
    seed: int | None = None,
    *,
    sources_dir: Path,
) -> Plan:
    """The ``Plan`` of a ``tune_kernel`` call (Kernel Tuner's arguments, its
    meanings; ``sources_dir``: where generated kernel sources are written).
    Its parameters before ``sources_dir`` are Kernel Tuner 1.5's ``tune_kernel``'s,
    in its order and with its defaults: ``tuner.kernel_tuner.tune_kernel`` takes
    its signature from here (``TUNE_KERNEL_SIGNATURE``).

    Raises:
        KernelTunerArgumentError: an argument with no counterpart here, or a
            value Kernel Tuner would refuse (one line naming it).
    """
    _refuse_without_counterpart(lang=lang, platform=platform, texmem_args=texmem_args, compiler=compiler, log=log, cache=cache,
                                simulation_mode=simulation_mode, parallel=parallel, observers=observers, objective=objective,
                                objective_higher_is_better=objective_higher_is_better, objectives=objectives)  # fmt: skip
    if not (isinstance(kernel_name, str) and kernel_name.strip()):
        raise KernelTunerArgumentError(f"kernel_name: must be the kernel's name, got {kernel_name!r}")
    params = _tune_params(tune_params)
    names = tuple(params)
    blocks = _block_names(block_size_names, names)
    if not isinstance(arguments, (list, tuple)):
        raise KernelTunerArgumentError(
            f"arguments: must be a list of numpy arrays and numpy scalars, got {type(arguments).__name__}"
        )
    answer = _answer(answer, arguments, verify)
    if not isinstance(atol, numbers.Real) or isinstance(atol, bool):
        raise KernelTunerArgumentError(f"atol: must be a number, got {atol!r}")
    if verify is not None and not callable(verify):
        raise KernelTunerArgumentError(f"verify: must be a function verify(answer, result, atol), got {verify!r}")
    compared = _compared(arguments, answer, verify)
    args = _arguments(arguments, compared) + _constants(cmem_args)
    flags = _compiler_options(compiler_options)
    if not isinstance(iterations, numbers.Integral) or isinstance(iterations, bool) or iterations < 1:
        raise KernelTunerArgumentError(f"iterations: must be a whole number of at least 1, got {iterations!r}")
    if not isinstance(device, numbers.Integral) or isinstance(device, bool) or device < 0:
        raise KernelTunerArgumentError(f"device: must be a CUDA device's index (0, 1, ...), got {device!r}")
    if seed is not None and (not isinstance(seed, numbers.Integral) or isinstance(seed, bool)):
        raise KernelTunerArgumentError(f"seed: must be a whole number, got {seed!r}")
    user_defines = _user_defines(defines)
    geometry = Geometry(
        problem_size=_problem_size(problem_size, names),
        divisors=tuple(
            _divisors(given, f"grid_div_{axis}", blocks[i], names)
            for i, (axis, given) in enumerate(zip("xyz", (grid_div_x, grid_div_y, grid_div_z)))
        ),  # fmt: skip
        block_names=blocks,
        params=names,
    )
    text, path = _source(kernel_source)
    for name in user_defines if user_defines is not None else names:
        if is_constexpr(name) and not name.isidentifier():
            raise KernelTunerArgumentError(f"tune_params: a {CONSTEXPR_MARK} parameter must be a C++ identifier, got {name!r}")
    source = wrapped_source(text, path, kernel_name, Path(sources_dir))
    arrays = [a for a in arguments if isinstance(a, np.ndarray) and a.ndim > 0]
    n = _problem_n(geometry, arrays)
    dtype = next((str(a.dtype) for a in arrays if str(a.dtype) in DTYPES), "float32")
    digest = _digest(kernel_name, text, problem_size, arguments, params, grid_div_x, grid_div_y, grid_div_z, restrictions, answer,
                     atol, verify, cmem_args, smem_args, blocks, flags, defines)  # fmt: skip
    stem = _identifier(kernel_name)[: MAX_NAME - 9]
    spec = KernelTunerSpec(
        name=f"{stem}_{digest[:8]}", source=source, kernel=kernel_name, args=args, tune_params=params,
        restrictions=_restrictions(restrictions, names), dtypes=(dtype,), compile_flags=flags, check_sizes=(n, n),
        shared_bytes=_shared_bytes(smem_args, names), answer=answer, verify=verify, atol=float(atol), geometry=geometry,
        user_defines=user_defines, kt_args=[argument_name(i) for i in range(len(arguments))], compared=compared,
    )  # fmt: skip
    problem = Problem(spec.name, dtype, n)
    space_size = _space_size(spec, problem)
    sampler, budget, timeout_s, described, notes = _search(strategy, strategy_options, space_size, spec)
    return Plan(spec=spec, problem=problem, sampler=sampler, budget=budget, timeout_s=timeout_s, seed=int(seed or 0),
                timing=TimingOptions(min_samples=max(2, int(iterations)), max_samples=max(2000, int(iterations))),
                device_index=int(device), iterations=int(iterations), compiler_options=list(flags), metrics=_metrics(metrics, names),
                tune_params=params, space_size=space_size, strategy=described, verbose=bool(verbose), quiet=bool(quiet),
                notes=notes)  # fmt: skip


# Kernel Tuner's ``tune_kernel`` signature, in one place: translate's, without where generated sources go.
TUNE_KERNEL_SIGNATURE = inspect.signature(translate).replace(
    parameters=[p for p in inspect.signature(translate).parameters.values() if p.name != "sources_dir"],
    return_annotation="tuple[Results, dict]",
)


# ---- arguments without a counterpart ---------------------------------------------


def _refuse_without_counterpart(**given: Any) -> None:
    lang = given["lang"]
    if lang is not None and not (isinstance(lang, str) and lang.upper() in CUDA_LANGUAGES):
        raise KernelTunerArgumentError(
            f"lang: this tuner compiles CUDA with nvcc; must be None, 'CUDA', 'CuPy' or 'NVCUDA', got {lang!r}"
        )
    if given["platform"] not in (0, None):
        raise KernelTunerArgumentError(
            f"platform: an OpenCL platform has no counterpart here (CUDA only), got {given['platform']!r}"
        )
    if given["compiler"] not in (None, "nvcc"):
        raise KernelTunerArgumentError(
            f"compiler: this tuner compiles with nvcc; must be None or 'nvcc', got {given['compiler']!r}"
        )
    if given["objective"] not in (None, "time"):
        raise KernelTunerArgumentError(
            f"objective: this tuner ranks by time (bandwidth); must be None or 'time', got {given['objective']!r}"
        )
    if given["objective_higher_is_better"] not in (None, False):
        raise KernelTunerArgumentError(
            "objective_higher_is_better: the time is ranked lower-is-better; must be None or False, got True"
        )
    why = {
        "texmem_args": "texture memory arguments have no counterpart here",
        "log": "Kernel Tuner's log file has no counterpart here (the rows under results/ are the record)",
        "cache": "Kernel Tuner's cache file has no counterpart here: the rows under results/ resume a run (call it again: only "
                 "what is missing is measured)",
        "simulation_mode": "a simulation from a cache file has no counterpart here",
        "parallel": "parallel runners have no counterpart here (python -m tuner tune --gpus spreads a study over GPUs)",
        "observers": "observers have no counterpart here (rows carry clocks, power and, with the profile stage, counters)",
        "objectives": "several objectives have no counterpart here",
    }  # fmt: skip
    for name, reason in why.items():
        value = given[name]
        if value is not None and value is not False and not (isinstance(value, (list, tuple, dict)) and not value):
            raise KernelTunerArgumentError(f"{name}: {reason}; remove it, got {_short(value)}")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


# ---- parameters and geometry ----------------------------------------------------


def _tune_params(tune_params: Any) -> dict[str, list]:
    if not isinstance(tune_params, Mapping) or not tune_params:
        raise KernelTunerArgumentError(
            f"tune_params: must be a non-empty dict of parameter -> list of values, got {_short(tune_params)}"
        )
    params = {}
    for name, values in tune_params.items():
        if name in RESERVED:
            raise KernelTunerArgumentError(f"tune_params: {name!r} is a name Kernel Tuner reserves ({list(RESERVED)}); rename it")
        if isinstance(values, np.ndarray):
            values = values.tolist()
        if isinstance(values, (str, bytes)) or not isinstance(values, (list, tuple, range)):
            raise KernelTunerArgumentError(f"tune_params[{name!r}]: must be a list of values, got {_short(values)}")
        params[name] = list(values)
    return params


def _block_names(given: Any, names: Sequence[str]) -> tuple[str, str, str]:
    """Kernel Tuner's ``block_size_names``: the given ones, completed with the defaults, or the default names in whatever
    case the tune parameters spell them (``BLOCK_SIZE_X``)."""
    if given is None:
        spelled = {name.lower(): name for name in names if name.lower() in DEFAULT_BLOCK_NAMES}
        return tuple(spelled.get(default, default) for default in DEFAULT_BLOCK_NAMES)
    if not isinstance(given, (list, tuple)) or len(given) > 3 or not all(isinstance(n, str) and n.isidentifier() for n in given):
        raise KernelTunerArgumentError(f"block_size_names: must be a list of at most 3 identifiers, got {_short(given)}")
    return tuple(list(given) + list(DEFAULT_BLOCK_NAMES[len(given) :]))


def _problem_size(given: Any, names: Sequence[str]) -> tuple[KtExpression, ...] | Callable:
    if callable(given):
        return given
    if isinstance(given, (str, numbers.Integral)) and not isinstance(given, bool):
        given = (given,)
    if not isinstance(given, (list, tuple)) or not 1 <= len(given) <= 3:
        raise KernelTunerArgumentError(
            f"problem_size: must be an int, a string, a function or a tuple of 1 to 3 of them, got {_short(given)}"
        )
    sizes = []
    for i, size in enumerate(given):
        if isinstance(size, bool) or not isinstance(size, (str, numbers.Integral)):
            raise KernelTunerArgumentError(
                f"problem_size[{i}]: must be an int or a string expression of the parameters, got {size!r}"
            )
        sizes.append(KtExpression(size if isinstance(size, str) else int(size), f"problem_size[{i}]", names, whole=True))
    return tuple(sizes)


def _divisors(given: Any, where: str, block_name: str, names: Sequence[str]) -> tuple[KtExpression, ...]:
    """Kernel Tuner's grid divisors of one dimension: None is the block's parameter (1 where it is none)."""
    if given is None:
        return (KtExpression(block_name, where, names),) if block_name in names else ()
    if callable(given) or isinstance(given, (str, numbers.Integral)):
        given = [given]
    if not isinstance(given, (list, tuple)):
        raise KernelTunerArgumentError(
            f"{where}: must be a list of parameter names, expressions or numbers, or a function, got {_short(given)}"
        )
    divisors = []
    for i, divisor in enumerate(given):
        if isinstance(divisor, (list, tuple)):
            divisors += _divisors(divisor, f"{where}[{i}]", block_name, names)
        elif divisor is None:
            divisors += _divisors(None, f"{where}[{i}]", block_name, names)
        else:
            divisors.append(KtExpression(divisor, f"{where}[{i}]", names, whole=isinstance(divisor, str)))
    return tuple(divisors)


def _restrictions(given: Any, names: Sequence[str]) -> list[KtRestriction]:
    if given is None:
        return []
    if not isinstance(given, (list, tuple)) or (isinstance(given, tuple) and len(given) in (2, 3) and callable(given[0])):
        given = [given]
    return [KtRestriction(r, f"restrictions[{i}]", names) for i, r in enumerate(given)]


def _shared_bytes(smem_args: Any, names: Sequence[str]) -> Any:
    if smem_args is None:
        return 0
    if not isinstance(smem_args, Mapping) or set(smem_args) - {"size"}:
        raise KernelTunerArgumentError(f"smem_args: only {{'size': ...}} (dynamic shared memory bytes) has a counterpart here, "
                                       f"got {_short(smem_args)}")  # fmt: skip
    return KtExpression(smem_args.get("size", 0), "smem_args['size']", names, whole=True)


def _user_defines(defines: Any) -> dict[str, Any] | None:
    if defines is None:
        return None
    if not isinstance(defines, Mapping) or not all(isinstance(k, str) and k.isidentifier() for k in defines):
        raise KernelTunerArgumentError(
            f"defines: must be a dict of identifier -> value or function of the parameters, got {_short(defines)}"
        )
    return dict(defines)


def _compiler_options(given: Any) -> tuple[str, ...]:
    if given is None:
        return ()
    if not isinstance(given, (list, tuple)) or not all(isinstance(flag, str) for flag in given):
        raise KernelTunerArgumentError(f"compiler_options: must be a list of nvcc flags, got {_short(given)}")
    return tuple(given)


def _metrics(given: Any, names: Sequence[str]) -> dict[str, Any]:
    if given is None:
        return {}
    if not isinstance(given, Mapping):
        raise KernelTunerArgumentError(
            f"metrics: must be a dict of name -> string expression or function of the result, got {_short(given)}"
        )
    known = list(names) + ["time"]
    metrics = {}
    for name, metric in given.items():
        if isinstance(metric, str):
            metrics[name] = KtExpression(metric, f"metrics[{name!r}]", known)
        elif callable(metric):
            metrics[name] = metric
        else:
            raise KernelTunerArgumentError(
                f"metrics[{name!r}]: must be a string expression or a function of the result, got {metric!r}"
            )
        known.append(name)
    return metrics


# ---- the kernel's arguments ---------------------------------------------------------


def _answer(answer: Any, arguments: Sequence, verify: Any) -> list | None:
    """Kernel Tuner's answer list, each entry as numpy (None where not compared), or None where there is none."""
    if answer is None:
        return None
    if not isinstance(answer, (list, tuple)):
        raise KernelTunerArgumentError(
            f"answer: must be a list with one entry per kernel argument (None where not compared), got {_short(answer)}"
        )
    if not answer:
        return None  # Kernel Tuner: an empty answer compares nothing
    if len(answer) != len(arguments):
        raise KernelTunerArgumentError(f"answer: must have one entry per kernel argument ({len(arguments)}), got {len(answer)}")
    answer = [None if a is None else np.asarray(a) for a in answer]
    if verify is None:  # Kernel Tuner's default verification: allclose of an array against an array of the same size
        for i, (expected, argument) in enumerate(zip(answer, arguments)):
            if expected is None:
                continue
            if not (isinstance(argument, np.ndarray) and argument.ndim > 0):
                raise KernelTunerArgumentError(
                    f"answer[{i}]: arguments[{i}] is a scalar; answers compare arrays (None for scalars)"
                )
            if expected.size != argument.size:
                raise KernelTunerArgumentError(
                    f"answer[{i}]: must have the size of arguments[{i}] ({argument.size}), got {expected.size}"
                )
            if not np.can_cast(argument.dtype, expected.dtype):
                raise KernelTunerArgumentError(f"answer[{i}]: must have a dtype {argument.dtype} casts to, got {expected.dtype}")
    return answer


def _compared(arguments: Sequence, answer: list | None, verify: Any) -> list[int]:
    """The kernel arguments fetched for verification: those with an answer, or every array for a verify without one."""
    if answer:
        return [
            i for i, a in enumerate(answer) if a is not None and isinstance(arguments[i], np.ndarray) and arguments[i].ndim > 0
        ]
    if verify is not None:
        return [i for i, a in enumerate(arguments) if isinstance(a, np.ndarray) and a.ndim > 0]
    return []


def _arguments(arguments: Sequence, compared: Sequence[int]) -> list:
    first_array = next((i for i, a in enumerate(arguments) if isinstance(a, np.ndarray) and a.ndim > 0), None)
    if first_array is None:
        raise KernelTunerArgumentError("arguments: must hold at least one numpy array (the kernel's output), got none")
    outputs = set(compared) or {first_array}  # the spec's output: compared arrays, or the first (nothing compared)
    args = []
    for i, value in enumerate(arguments):
        name = argument_name(i)
        if isinstance(value, np.ndarray) and value.ndim > 0:
            dtype = _dtype(value, f"arguments[{i}]")
            if value.size == 0:
                raise KernelTunerArgumentError(
                    f"arguments[{i}]: an array must hold at least one element, got shape {value.shape}"
                )
            make = InOut if i in outputs else In
            args.append(make(name, shape=tuple(int(s) for s in value.shape), dtype=dtype, init=UserArray(value)))
        elif isinstance(value, (np.generic, np.ndarray)):
            scalar = np.asarray(value)[()]
            args.append(Scalar(name, scalar.item(), _dtype(np.asarray(scalar), f"arguments[{i}]")))
        else:
            raise KernelTunerArgumentError(f"arguments[{i}]: must be a numpy array or a numpy scalar (numpy.int32(...), numpy.float32(...)), "
                                           f"got {type(value).__name__} {_short(value)}")  # fmt: skip
    return args


def _constants(cmem_args: Any) -> list:
    if cmem_args is None:
        return []
    if not isinstance(cmem_args, Mapping):
        raise KernelTunerArgumentError(
            f"cmem_args: must be a dict of __constant__ symbol -> numpy array, got {_short(cmem_args)}"
        )
    constants = []
    for name, value in cmem_args.items():
        if not (isinstance(name, str) and name.isidentifier()):
            raise KernelTunerArgumentError(
                f"cmem_args: keys must be the kernel's __constant__ symbols (identifiers), got {name!r}"
            )
        if not isinstance(value, np.ndarray) or value.size == 0:
            raise KernelTunerArgumentError(f"cmem_args[{name!r}]: must be a non-empty numpy array, got {_short(value)}")
        constants.append(
            Constant(name, tuple(int(s) for s in value.shape), _dtype(value, f"cmem_args[{name!r}]"), init=UserArray(value))
        )
    return constants


def _dtype(array: np.ndarray, where: str) -> str:
    dtype = str(array.dtype)
    if dtype not in SCALAR_FORMATS:
        raise KernelTunerArgumentError(f"{where}: dtype must be one of {sorted(SCALAR_FORMATS)}, got {dtype}")
    return dtype


def _source(kernel_source: Any) -> tuple[str, Path | None]:
    """The kernel's text and its file (None for a string of code), as Kernel Tuner reads ``kernel_source``."""
    if isinstance(kernel_source, (list, tuple)):
        if len(kernel_source) != 1:
            raise KernelTunerArgumentError(f"kernel_source: a list of several files has no counterpart here (tune the .cu file "
                                           f"that #includes the others), got {_short(kernel_source)}")  # fmt: skip
        kernel_source = kernel_source[0]
    if isinstance(kernel_source, Path) or (isinstance(kernel_source, str) and looks_like_a_filename(kernel_source)):
        path = Path(kernel_source).resolve()  # relative to the working directory, as Kernel Tuner opens it
        if not path.is_file():
            raise KernelTunerArgumentError(f"kernel_source: must be an existing file or a string of code, got {str(path)!r}")
        return path.read_text(), path
    if isinstance(kernel_source, str):
        return kernel_source, None
    raise KernelTunerArgumentError(f"kernel_source: must be a file name or a string of CUDA code (a code generator has no "
                                   f"counterpart here), got {type(kernel_source).__name__}")  # fmt: skip


def looks_like_a_filename(text: str) -> bool:
    """Kernel Tuner's test of a string ``kernel_source``: short, no code's characters or words, a ``.c``-like suffix."""
    if len(text) > 250 or any(c in text for c in "();{}\\"):
        return False
    if any(word in text for word in ("__global__ ", "__kernel ", "void ", "float ")):
        return False
    return any(suffix in text for suffix in (".c", ".opencl", ".F", ".jl"))


def _problem_n(geometry: Geometry, arrays: Sequence[np.ndarray]) -> int:
    """The problem's ``n`` in rows: the problem size's product where it is numbers, else the largest array's elements."""
    sizes = geometry.problem_size
    if not callable(sizes) and all(isinstance(s.value, numbers.Integral) for s in sizes):
        return max(1, math.prod(int(s.value) for s in sizes))
    return max(int(a.size) for a in arrays)


def _identifier(kernel_name: str) -> str:
    head = "".join(c if c.isalnum() or c == "_" else " " for c in kernel_name).split()
    word = head[0] if head else "kernel"
    return word if word.isidentifier() and word.isascii() else "kernel"


def _digest(*parts: Any) -> str:
    """A hash of everything the measurements depend on: the family's name carries it, so a call with other
    arguments is another family (its own rows), and the same call again resumes its own."""
    digest = hashlib.sha256()
    _feed(digest, parts)
    return digest.hexdigest()


def _feed(digest: Any, value: Any) -> None:
    if isinstance(value, np.ndarray):
        digest.update(f"ndarray {value.dtype} {value.shape} crc32 {array_crc(value)}".encode())
    elif isinstance(value, Mapping):
        digest.update(b"{")
        for key, item in value.items():
            _feed(digest, key)
            _feed(digest, item)
        digest.update(b"}")
    elif isinstance(value, (list, tuple, range)):
        digest.update(b"[")
        for item in value:
            _feed(digest, item)
        digest.update(b"]")
    elif callable(value) and not isinstance(value, type):
        try:
            text = inspect.getsource(value)
        except (OSError, TypeError):
            text = getattr(value, "__qualname__", repr(value))
        digest.update(f"callable {text}".encode())
    else:
        digest.update(f"{type(value).__name__} {value!r}".encode())


def array_crc(array: np.ndarray) -> int:
    """CRC-32 of an array's bytes (zlib's, about 1 GB/s), remembered while the
    array lives with the same address, size and 64-bit sum of its bytes (about
    5 GB/s, and any one changed element changes it): a script that passes one
    array of gigabytes to several calls (Kernel Tuner's reduction example)
    has it read whole once."""
    array = np.ascontiguousarray(array)
    data = memoryview(array.reshape(-1)).cast("B")
    words = np.frombuffer(data, dtype=np.uint64, count=len(data) // 8)
    probe = (array.__array_interface__["data"][0], array.nbytes, array.dtype.str, array.shape,
             int(words.sum(dtype=np.uint64)), bytes(data[len(words) * 8 :]))  # fmt: skip
    known = _CRCS.get(id(array))
    if known is not None and known[0]() is array and known[1] == probe:
        return known[2]
    crc = zlib.crc32(data)
    _CRCS[id(array)] = (weakref.ref(array), probe, crc)
    return crc


_CRCS: dict[int, tuple] = {}


# ---- the search -----------------------------------------------------------------------


def _space_size(spec: KernelTunerSpec, problem: Problem) -> int | None:
    product = math.prod(len(p.values) for p in spec.params)
    if product > MAX_ENUMERATED:
        return None
    size = len(spec.space(problem))
    if size == 0:
        raise KernelTunerArgumentError(
            f"restrictions: must leave at least one configuration of the {product} of tune_params, left none"
        )
    return size


def _search(strategy: Any, options: Any, space_size: int | None, spec: KernelTunerSpec) -> tuple:
    """(sampler or None for a sweep, budget, timeout_s, description, notes) of ``strategy`` and ``strategy_options``."""
    options = dict(options or {})
    if options and not isinstance(options, dict):
        raise KernelTunerArgumentError(f"strategy_options: must be a dict, got {_short(options)}")
    name = strategy or "brute_force"
    if not isinstance(name, str):
        raise KernelTunerArgumentError(
            f"strategy: a strategy object has no counterpart here; name one of Kernel Tuner's, got {_short(strategy)}"
        )
    notes = []
    if name == "brute_force":
        if options:
            raise KernelTunerArgumentError(
                f"strategy_options: brute_force measures every configuration and takes none, got {sorted(options)}"
            )
        return None, None, None, f"every configuration ({space_size}), as brute_force", notes
    if name in MULTI_OBJECTIVE:
        raise KernelTunerArgumentError(f"strategy: {name!r} searches several objectives, which have no counterpart here")
    if name in COUNTERPARTS:
        sampler = COUNTERPARTS[name]
    elif name in WITHOUT_COUNTERPART:
        sampler = DEFAULT_STRATEGY
        notes.append(
            f"strategy {name!r} has no counterpart here: the project's default search ({DEFAULT_STRATEGY}) takes its place"
        )
    elif name in STRATEGIES:
        sampler = name
    else:
        raise KernelTunerArgumentError(f"strategy: must be one of Kernel Tuner's ({sorted({'brute_force', *COUNTERPARTS, *WITHOUT_COUNTERPART})}) "
                                       f"or of this project's ({sorted(STRATEGIES)}), got {name!r}")  # fmt: skip
    allowed = {"max_fevals", "time_limit"} | ({"fraction"} if name == "random_sample" else set())
    extra = sorted(set(options) - allowed)
    if extra:
        raise KernelTunerArgumentError(f"strategy_options[{extra[0]!r}]: has no counterpart in this project's {sampler} search "
                                       f"(it takes {sorted(allowed)}); remove it")  # fmt: skip
    budget, timeout_s = options.get("max_fevals"), options.get("time_limit")
    if budget is not None and (not isinstance(budget, numbers.Integral) or isinstance(budget, bool) or budget < 1):
        raise KernelTunerArgumentError(f"strategy_options['max_fevals']: must be a whole number of at least 1, got {budget!r}")
    if timeout_s is not None and (not isinstance(timeout_s, numbers.Real) or isinstance(timeout_s, bool) or timeout_s <= 0):
        raise KernelTunerArgumentError(f"strategy_options['time_limit']: must be seconds above 0, got {timeout_s!r}")
    if name == "random_sample" and budget is None and timeout_s is None:
        fraction = options.get("fraction", RANDOM_SAMPLE_FRACTION)
        if not isinstance(fraction, numbers.Real) or not 0 < fraction <= 1:
            raise KernelTunerArgumentError(f"strategy_options['fraction']: must be in (0, 1], got {fraction!r}")
        if space_size is not None:
            budget = max(1, math.ceil(space_size * fraction))
    if budget is None and timeout_s is None and space_size is None:
        product = math.prod(len(p.values) for p in spec.params)
        raise KernelTunerArgumentError(f"strategy_options: max_fevals or time_limit must bound a search of {product} combinations "
                                       f"(too many to list), got neither")  # fmt: skip
    if budget is None:
        budget = space_size  # Kernel Tuner: the search space's size where no max_fevals is given (None: too large to list)
    if budget is not None and space_size is not None:
        budget = min(int(budget), space_size)
    bound = " and ".join(
        part for part in (f"{budget} configurations" if budget else "", f"{timeout_s:g} s" if timeout_s else "") if part
    )
    return (
        sampler,
        (int(budget) if budget else None),
        (float(timeout_s) if timeout_s else None),
        f"an Optuna study of {bound} ({sampler})",
        notes,
    )
