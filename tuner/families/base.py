"""What a kernel family declares, in one place each.

A family is a CUDA source in ``kernels/`` plus the Python that knows how to run
it: its parameters and their domains, the constraints between them, the launch
geometry, the bytes it moves, how host inputs are made, the numpy reference and
the tolerance. The stages (compile, measure, sweep, tune, report) only talk to
this interface, so adding a family never touches them.
"""

from __future__ import annotations

import itertools
import json
import math
import weakref
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Iterator, Mapping, Sequence

import numpy as np

from tuner.errors import Refusal
from tuner.resources import kernels_dir

# The lessons' CUDA sources and the headers any family's source may include (tuner.resources).
KERNELS_DIR = kernels_dir()

Config = Mapping[str, Any]  # one point of a family's space: parameter name -> value

DTYPES = {
    "int8": np.int8,
    "int32": np.int32,
    "float16": np.float16,
    "float32": np.float32,
}
C_TYPES = {"int8": "signed char", "int32": "int", "float16": "__half", "float32": "float"}

# nvcc runs each of its compile steps through a shell, every argument in double
# quotes: inside them $ and ` still run commands, and \ and " escape or end the
# quoting; it also splits a -D at its commas into several defines. Text that
# reaches its command line (a define's value, a path) must hold none of them.
NVCC_UNSAFE = '$`"\\'


def nvcc_text_unfit(text: str, *, define: bool = False) -> str | None:
    """Why ``text`` cannot go on nvcc's command line (``must ..., got ...``;
    ``define``: a -D define's value, where a comma starts another), or None."""
    bad = [c for c in dict.fromkeys(text) if c in NVCC_UNSAFE or (define and c == ",") or not c.isprintable()]
    if not bad:
        return None
    banned = "$ ` \" \\" + (" ," if define else "")
    return f"must hold none of {banned} or control characters (nvcc passes it through a shell), got {text!r}"



def amount_unfit(value: Any, *, zero: bool = False) -> str | None:
    """Why ``value`` is not a finite number above 0 (``zero``: at least 0), as
    ``must be ..., got ...``, or None where it is one. A tolerance, a size,
    bytes and FLOPs are held to it: NaN compares false with every bound, so
    ``error <= nan`` failed every configuration in silence."""
    number = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))
    if number and math.isfinite(value) and (value >= 0 if zero else value > 0):
        return None
    return f"must be a finite number {'>= 0' if zero else '> 0'}, got {value!r}"


# One encoder for every key: json.dumps with options builds a new one each call,
# a large share of a key's time where a study enumerates 10^6 configurations.
_KEY_ENCODER = json.JSONEncoder(sort_keys=True, default=str)


def config_key(cfg: Mapping) -> str:
    """Canonical, order-independent text of a configuration: its identity in
    results, stores and studies."""
    return _KEY_ENCODER.encode(cfg if isinstance(cfg, dict) else dict(cfg))


@dataclass(frozen=True)
class Param:
    """One tunable parameter.

    Attributes:
        name: column name in the results and key in configs (``block_size``).
        values: the search domain, in a natural order (a study's default space).
        doc: one line for users.
        default: value used when a sweep does not list the parameter.
        rule: which values are accepted at all (default: those in ``values``),
            with ``rule_text`` saying so in words for error messages.
    """

    name: str
    values: tuple
    doc: str
    default: Any = None
    rule: Callable[[Any], bool] | None = None
    rule_text: str = ""

    # Built once from ``values`` (``__post_init__``): ``accepts`` runs for every value a
    # space lists, and a scan of ``values`` each time made a replay table whose T1
    # parameter has 100,000 values take minutes to list (10^10 comparisons).
    _kinds: frozenset = field(default=frozenset(), init=False, repr=False, compare=False)
    _lookup: frozenset | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.default is None:
            object.__setattr__(self, "default", self.values[0])
        object.__setattr__(self, "_kinds", frozenset(type(v) for v in self.values))
        # A set answers ``in`` as the tuple does only where hashing agrees with ==
        # (1, 1.0 and True hash alike and compare equal, as in the tuple): so only for
        # values of the plain kinds; any other value (a numpy scalar, a class of one's
        # own) leaves the scan of ``values`` in place.
        if all(type(v) in _HASH_AGREES for v in self.values):
            object.__setattr__(self, "_lookup", frozenset(self.values))

    def accepts(self, value: Any) -> bool:
        # Strict about kinds: 4.0 == 4 and True == 1 in Python, but a float or
        # a bool where an integer is meant is a mistake (it would reach nvcc as -DVEC=4.0).
        if isinstance(value, (bool, float)) and type(value) not in self._kinds:
            return False
        if self.rule is None:
            return self._among_values(value)
        try:
            return bool(self.rule(value))
        except TypeError:
            return False

    def _among_values(self, value: Any) -> bool:
        """``value in self.values``, in constant time where the set answers it the
        same (a value of a plain kind against values of plain kinds; a list, say, is
        unhashable and is scanned for, as before)."""
        if self._lookup is not None and type(value) in _HASH_AGREES:
            return value in self._lookup
        return value in self.values

    def rule_description(self) -> str:
        return self.rule_text or f"one of {list(self.values)}"


# The kinds whose hash agrees with == among themselves (Python hashes equal numbers
# alike, whatever their kind): for these a set lookup is the tuple's ``in``. Exact
# types, not subclasses (a subclass may redefine == or hash).
_HASH_AGREES = frozenset({int, float, bool, str, type(None)})


@dataclass(frozen=True)
class Problem:
    """What is computed: a family, an element type and a size ``n`` (elements,
    or the matrix dimension for matmul)."""

    family: str
    dtype: str
    n: int

    @property
    def key(self) -> str:
        return f"{self.family}-{self.dtype}-n{self.n}"


@dataclass
class Launch:
    """One configuration bound to device buffers, ready to time.

    Attributes:
        run: enqueues the kernel (asynchronously, no synchronisation).
        grid, block: the launch geometry, for the results.
        restore: puts back inputs the kernel overwrites (untimed), or None.
        fetch: copies the outputs the reference is compared with to the host.
        output: where the output lies on the device, to compare it there with
            the host reference (``tuner.measure.check``) instead of fetching
            it; None: ``fetch`` and ``Family.verify`` on the host.
        shared_bytes: the dynamic shared memory ``run`` asks for per block
            (checked with the kernel's static shared memory against the
            device's limit before the launch).
    """

    run: Callable[[], None]
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    fetch: Callable[[], np.ndarray]
    restore: Callable[[], None] | None = None
    output: "DeviceOutput | None" = None
    shared_bytes: int = 0


@dataclass(frozen=True)
class DeviceOutput:
    """A launch's output on the device, and how it must match the reference.

    Attributes:
        ptr: its first element's device address.
        count: its elements, in the order of ``Family.device_reference(expected, layout)``.
        dtype: its element type.
        tolerance: None for bit-exact equality; else the largest relative
            error ||out - ref|| / ||ref|| (float16 and float32 outputs).
        layout: which arrangement of the reference it matches (a family
            whose variants lay their output out differently names each).
    """

    ptr: int
    count: int
    dtype: np.dtype
    tolerance: float | None = None
    layout: str = ""


@dataclass
class Verdict:
    ok: bool
    error: float  # the family's error measure (relative error by default)
    detail: str = ""


# The most combinations a space is listed in full for (about a second of
# constraint checks); larger spaces are counted and searched without a list of them.
MAX_ENUMERATED = 1_000_000


class SpaceTooLarge(Refusal, ValueError):
    """A space asked for as a list holds more combinations than
    ``MAX_ENUMERATED``; the message names the count."""

    exit_status = 2


@dataclass(frozen=True)
class ScopedRule:
    """A rule between parameters that reads only ``names`` (and the problem):
    ``holds(cfg)`` on a configuration holding at least those names."""

    names: frozenset[str]
    holds: Callable[[Mapping[str, Any]], bool]


def size_text(n: int, *, tex: bool = False) -> str:
    """``2^24`` for powers of two from 1024 (``$2^{24}$`` with ``tex``), else the digits."""
    if n >= 1024 and n & (n - 1) == 0:
        power = n.bit_length() - 1
        return f"$2^{{{power}}}$" if tex else f"2^{power}"
    return f"{n:,}"


class Family(ABC):
    """A kernel family: its search space and compile recipe, and its device harness.

    Subclasses set the class attributes and implement two small contracts.

    **The space and the recipe** (pure Python: validation, the compile stage,
    searches and replays use it without a GPU):

    - ``params`` (class attribute): the tunable parameters, each with its
      values, default and acceptance rule (``Param``).
    - ``constraint_violations(cfg, problem)`` (optional): why a combination of
      accepted values cannot run (empty when it can). Called before anything
      is compiled; an infeasible configuration is never compiled or launched.
    - ``kernel_name(cfg)`` and ``defines(cfg, problem)``: the kernel (an
      ``extern "C"`` or C++ name, or a template instance such as
      ``reduce<float, 256>``: ``tuner.measure.symbols``) and the ``-D``
      values that specialise ``source``;
      ``compile_flags(cfg)`` (optional) for extra nvcc flags.
    - ``bytes_moved(cfg, problem)``: the fewest bytes the problem must move
      (GB/s is this over the median time); ``flops`` (optional, default 0)
      for compute-bound families; ``device_bytes(problem)`` (optional) when
      the buffers are not about six arrays of n elements.
    - ``operation_param`` (optional): the parameter whose values do different
      work (``operation(cfg)``); the answer is then one per operation.

    **The harness** (called by the measuring process, once per problem, then
    once per configuration):

    - ``make_inputs(problem, rng)``: fresh random host inputs, never all zeros.
    - ``reference(inputs, problem)``: the expected output, computed with numpy.
    - ``allocate(problem, inputs, gpu)``: device buffers for the problem, made
      once and shared by every configuration measured on it.
    - ``bind(cfg, problem, buffers, function, gpu)``: a ``Launch`` (run, grid,
      block, fetch, restore): ``run`` enqueues one launch without
      synchronising; ``restore`` (optional) puts back inputs the kernel
      overwrites and is never timed; outputs must be poisoned here, so an
      element the kernel never writes fails verification.
    - ``verify(output, expected, inputs)`` (optional): relative error against
      ``tolerance`` by default; override for exact checks.

    ``bind`` may assume ``cfg`` passed ``violations``; nothing else may assume a GPU.
    """

    name: ClassVar[str]
    source: ClassVar[str]  # file name in kernels/, or an absolute path (plug-in families)
    dtypes: ClassVar[tuple[str, ...]]
    params: ClassVar[tuple[Param, ...]]
    tolerance: ClassVar[float] = 1e-5
    arg_types: ClassVar[str]  # PyCUDA struct format of the kernel's arguments ("PPQ")
    # Sizes for verification passes: one not a multiple of any tile, one a power of two.
    check_sizes: ClassVar[tuple[int, int]] = ((1 << 20) + 37, 1 << 22)
    # Variants that form a lesson's ladder, in the order it climbs them (each
    # step a change to the one before): the report draws their speed-ups in this order.
    ladder: ClassVar[tuple[str, ...]] = ()
    # Where the family stands among others in a report's lists (lower first);
    # a plug-in's, by default, after the built-ins', ties by name.
    report_rank: ClassVar[int] = 1000
    # Where configurations do different work (copy's variant: a copy, or a read-only
    # pass), the parameter whose value names the operation: the run's answer (best.json,
    # the header, the report's tables) is then one per operation, since the fastest of
    # one is no answer for another. None: every configuration does the same work.
    operation_param: ClassVar[str | None] = None

    def operation(self, cfg: Config) -> str | None:
        """The operation ``cfg`` performs: its value of ``operation_param``
        (the parameter's default where ``cfg`` lacks it), or None where the
        family has one operation. Override where several values do one operation."""
        if self.operation_param is None:
            return None
        return str(cfg.get(self.operation_param, self.param(self.operation_param).default))

    def operations(self) -> tuple[str, ...]:
        """Every operation in the family's order (the default first); empty
        where the family has one operation."""
        if self.operation_param is None:
            return ()
        defaults = {p.name: p.default for p in self.params}
        values = (defaults[self.operation_param], *self.param(self.operation_param).values)
        named = (self.operation(defaults | {self.operation_param: value}) for value in values)
        return tuple(dict.fromkeys(name for name in named if name is not None))

    # ---- the space -------------------------------------------------------
    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(f"family {self.name!r} has no parameter {name!r}")

    @property
    def param_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params)

    def configs(self, domains: Mapping[str, list] | None = None) -> Iterator[dict]:
        """Every combination of the given domains (parameters not listed take
        their default), feasible or not."""
        domains = dict(domains or {})
        axes = [list(domains.get(p.name, [p.default])) for p in self.params]
        names = self.param_names
        for combo in itertools.product(*axes):
            yield dict(zip(names, combo))

    def combinations(self, domains: Mapping[str, Sequence] | None = None) -> int:
        """How many combinations ``domains`` hold, feasible or not (parameters
        not listed take their default; no domains: the family's full tuning
        space), counted without listing them."""
        if domains is None:
            return math.prod(len(p.values) for p in self.params)
        return math.prod(len(domains[p.name]) if p.name in domains else 1 for p in self.params)

    def space(self, problem: Problem, domains: Mapping[str, list] | None = None) -> list[dict]:
        """The feasible configurations of ``domains`` for ``problem``. With no
        domains, the family's full tuning space.

        Raises:
            SpaceTooLarge: the domains hold more than ``MAX_ENUMERATED``
                combinations (``listed_space`` answers None instead).
        """
        count = self.combinations(domains)
        if count > MAX_ENUMERATED:
            raise SpaceTooLarge(f"family {self.name!r}: a space of {count:,} combinations for {problem.key} is too large to list "
                                f"(at most {MAX_ENUMERATED:,}); it is counted and searched without a list of it")  # fmt: skip
        if domains is None:
            domains = {p.name: list(p.values) for p in self.params}
        checks_only_values_and_rules = type(self).violations is Family.violations
        if (
            checks_only_values_and_rules
            and problem.dtype in self.dtypes
            and all(p.accepts(v) for p in self.params for v in domains.get(p.name, [p.default]))
        ):
            # Then ``violations`` of each configuration is its rules between
            # parameters alone: each value and the dtype were checked once here,
            # not once per configuration (reduce's full space is 67,584 of them a problem).
            return [c for c in self.configs(domains) if not self.constraint_violations(c, problem)]
        return [c for c in self.configs(domains) if not self.violations(c, problem)]

    def listed_space(self, problem: Problem, domains: Mapping[str, Sequence]) -> list[dict] | None:
        """``space(problem, domains)``, or None where the product of the domains
        exceeds ``MAX_ENUMERATED``: such a space is searched without a list of
        it (no exhaustion check, no budget as a fraction, no compile ahead)."""
        if self.combinations(domains) > MAX_ENUMERATED:
            return None
        return self.space(problem, {name: list(values) for name, values in domains.items()})

    def covering_configs(self, problem: Problem) -> list[dict]:
        """For every variant and every value of every parameter's domain, the
        feasible configuration nearest the defaults that has it: a covering set
        for verification passes, far smaller than the full product."""
        defaults = {p.name: p.default for p in self.params}
        # Each default joins its domain: some variants only run with a default
        # outside it (reduce's ladder needs grid_blocks_per_sm 0).
        space = self.space(problem, {p.name: list(dict.fromkeys([p.default, *p.values])) for p in self.params})
        by_variant: dict[Any, list[dict]] = {}
        for cfg in space:
            by_variant.setdefault(cfg.get("variant"), []).append(cfg)
        chosen: dict[str, dict] = {}
        for configs in by_variant.values():
            distance = [sum(cfg[k] != v for k, v in defaults.items()) for cfg in configs]
            for param in self.params:
                for value in param.values:
                    candidates = [(d, i) for i, (cfg, d) in enumerate(zip(configs, distance)) if cfg[param.name] == value]
                    if candidates:
                        best = configs[min(candidates)[1]]
                        chosen.setdefault(config_key(best), best)
        return list(chosen.values())

    def violations(self, cfg: Config, problem: Problem) -> list[str]:
        """Why ``cfg`` cannot run ``problem`` (empty when it can). Checked before
        anything is compiled or launched."""
        reasons = [
            f"{p.name} must be {p.rule_description()}, got {cfg[p.name]!r}" for p in self.params if not p.accepts(cfg[p.name])
        ]
        if problem.dtype not in self.dtypes:
            reasons.append(f"dtype {problem.dtype!r} is not one of {list(self.dtypes)}")
        return reasons + self.constraint_violations(cfg, problem)

    def constraint_violations(self, cfg: Config, problem: Problem) -> list[str]:
        """Family-specific rules between parameters; override to add some."""
        return []

    def scoped_rules(self, problem: Problem) -> Sequence["ScopedRule"]:
        """The rules of ``constraint_violations`` that read only some
        parameters, each with the names it reads (optional; default none).
        A search of a space too large to list (``MAX_ENUMERATED``) fixes
        parameters one at a time and passes over a value as soon as a rule
        over the fixed ones fails, so it finds the feasible points of a
        sparse product (a few dozen of millions) without walking it; each
        configuration found is still checked whole (``violations``)."""
        return ()

    # ---- compiling -------------------------------------------------------
    @abstractmethod
    def kernel_name(self, cfg: Config) -> str:
        """The kernel that ``cfg`` runs, as its source names it (``extern "C"``,
        C++, or a template instance ``name<args>``, which the compile instantiates)."""

    @abstractmethod
    def defines(self, cfg: Config, problem: Problem) -> dict[str, str]:
        """The -D defines that select and specialise the kernel. Parameters that
        are run-time arguments (offset, grid size) stay out, so that their
        configurations share one compiled module."""

    def compile_flags(self, cfg: Config) -> tuple[str, ...]:
        """Extra nvcc flags (e.g. ``-Xptxas -dlcm=cg``)."""
        return ()

    # ---- running ---------------------------------------------------------
    @abstractmethod
    def bytes_moved(self, cfg: Config, problem: Problem) -> int:
        """The fewest bytes the computation must move through device memory
        (inputs read once plus outputs written once); GB/s is this over time."""

    def flops(self, cfg: Config, problem: Problem) -> int:
        return 0

    @property
    def compute_bound(self) -> bool:
        """Judged by GFLOP/s, not by bandwidth: the family counts its
        floating-point work (it overrides ``flops``), and a share of a
        bandwidth peak says nothing of it."""
        return type(self).flops is not Family.flops

    def size_text(self, n: int, *, tex: bool = False) -> str:
        """A problem's size as the report writes it (``2^24``; ``tex``: as a
        matplotlib label's math)."""
        return size_text(n, tex=tex)

    def problem_text(self, dtype: str, n: int, *, tex: bool = False) -> str:
        """A problem as the report names it: ``int32, n = 2^24``."""
        return f"{dtype}, n = {self.size_text(n, tex=tex)}"

    def device_bytes(self, problem: Problem) -> int:
        """Device memory ``problem``'s buffers take, an upper estimate: by
        default every 1-D family keeps its inputs twice (pristine and working)
        plus outputs, under six arrays of n elements (a family comparing
        its outputs on the device adds its reference). Sizes that cannot fit
        are refused before any work."""
        return 6 * problem.n * np.dtype(DTYPES[problem.dtype]).itemsize

    def max_size(self, dtype: str, memory_bytes: int) -> int:
        """The largest n whose ``device_bytes`` fit in ``memory_bytes``."""
        low, high = 0, 1
        while self.device_bytes(Problem(self.name, dtype, high)) <= memory_bytes:
            low, high = high, high * 2
        while high - low > 1:
            mid = (low + high) // 2
            low, high = (mid, high) if self.device_bytes(Problem(self.name, dtype, mid)) <= memory_bytes else (low, mid)
        return low

    @abstractmethod
    def make_inputs(self, problem: Problem, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """Fresh random host inputs (never all zeros)."""

    @abstractmethod
    def reference(self, inputs: dict[str, np.ndarray], problem: Problem) -> np.ndarray:
        """The expected result, computed with numpy in higher precision."""

    @abstractmethod
    def bind(self, cfg: Config, problem: Problem, workspace: Any, function: Any, device: Any) -> Launch:
        """Bind ``cfg`` to the device buffers in ``workspace`` (made once per
        problem by ``allocate``) and the loaded kernel ``function``."""

    @abstractmethod
    def allocate(self, problem: Problem, inputs: dict[str, np.ndarray], gpu: Any) -> Any:
        """Device buffers for ``problem``, shared by every configuration."""

    def verify(self, output: np.ndarray, expected: np.ndarray, inputs: dict[str, np.ndarray]) -> Verdict:
        """Relative error against ``tolerance`` by default; override for exact checks."""
        return relative_error_verdict(output, expected, self.tolerance)

    def device_reference(self, expected: np.ndarray, layout: str) -> np.ndarray:
        """The reference arranged as a ``DeviceOutput`` of ``layout`` lies in
        memory (by default the reference itself, flattened)."""
        return expected.reshape(-1)


def relative_error_verdict(output: np.ndarray, expected: np.ndarray, tolerance: float) -> Verdict:
    """||out - ref|| / ||ref|| against ``tolerance``; NaN or a shape mismatch fails.

    Computed in float64 over chunks (no full-size temporaries), and ||ref||
    once per reference array: a 2^28-element output verifies in a fraction of
    the time a whole-array float64 copy would take."""
    output, expected = np.asarray(output), np.asarray(expected)
    if output.shape != expected.shape:
        return Verdict(False, float("inf"), f"shape {output.shape} != {expected.shape}")
    out, ref = output.reshape(-1), expected.reshape(-1)
    squared = 0.0
    for start in range(0, out.size, VERIFY_CHUNK):
        chunk = out[start : start + VERIFY_CHUNK].astype(np.float64)
        if not np.isfinite(chunk).all():
            return Verdict(False, float("inf"), "non-finite output (an element was never written?)")
        chunk -= ref[start : start + VERIFY_CHUNK]
        squared += float(np.dot(chunk, chunk))
    error = float(np.sqrt(squared) / max(reference_norm(ref), 1e-30))
    ok = error <= tolerance
    return Verdict(ok, error, "" if ok else f"relative error {error:.3g} > {tolerance:g}")


VERIFY_CHUNK = 1 << 22
_NORMS: dict[tuple, tuple[weakref.ref, float]] = {}


def reference_norm(ref: np.ndarray) -> float:
    """||ref|| in float64, remembered while the array behind ``ref`` lives
    (a problem's reference is checked against every configuration)."""
    owner = ref
    while isinstance(owner.base, np.ndarray):
        owner = owner.base
    key = (id(owner), ref.__array_interface__["data"][0], ref.shape, ref.strides, ref.dtype.str)
    known = _NORMS.get(key)
    if known is not None and known[0]() is owner:
        return known[1]
    squared = 0.0
    for start in range(0, ref.size, VERIFY_CHUNK):
        chunk = ref[start : start + VERIFY_CHUNK].astype(np.float64)
        squared += float(np.dot(chunk, chunk))
    norm = float(np.sqrt(squared))
    _NORMS[key] = (weakref.ref(owner), norm)
    return norm


@dataclass
class Registry:
    families: dict[str, Family] = field(default_factory=dict)

    def add(self, family: Family) -> Family:
        self.families[family.name] = family
        return family

    def __getitem__(self, name: str) -> Family:
        if name not in self.families:
            raise KeyError(f"unknown family {name!r}; known families: {sorted(self.families)}")
        return self.families[name]

    def __iter__(self):
        return iter(self.families.values())

    def names(self) -> list[str]:
        return sorted(self.families)
