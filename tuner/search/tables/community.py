"""The auto-tuning community's brute-forced spaces as replay tables.

Kernel Tuner cache files (``{"tune_params", "objective", "cache"}``, gzipped
or not), T4 results files and T1 space descriptions (parameters and
restrictions as Python expressions) come from other tuners and from the
benchmark hub of the Auto-Tuning Association (AutoTuningAssociation/
benchmark_hub, MIT licence, DOI 10.5281/zenodo.15364124). A ``SpaceTable``
holds one of them; ``table_family`` makes a ``Family`` of its space, so any
sampler replays it through the real study loop, and ``table_measure`` looks
configurations up:

- a configuration absent from the table was excluded by the space's
  restrictions: it is infeasible, never proposed, and costs nothing;
- a configuration that failed (Kernel Tuner's error markers, a T4
  invalidity other than ``correct``) costs one evaluation and never wins;
- the objective becomes a rate to maximise, as the study's ``bandwidth_gbs``:
  a time in milliseconds as one nominal gigabyte over it (1000 / ms), so the
  ranking is the time's; a rate (our own T4 files) stays as it is.
"""

from __future__ import annotations

import collections
import itertools
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from tuner.data.results import config_key
from tuner.data.t4 import finite_number, read_json, read_t4, t4_metadata
from tuner.families.base import Family, Param, Problem
from tuner.search.tables.expressions import (
    GUARDS,
    MAX_VALUE_BITS,
    SAFE_NAMES,
    brief,
    compile_restriction,
    plain_constant,
    python_name,
    restriction_check,
    shown,
    shown_name,
    values_literal,
)

DTYPE = "table"  # a replay table's problem has no element type of ours
# Kernel Tuner's markers in place of a failed configuration's objective.
# Kernel Tuner 1.x writes them under "__error__" (no objective); earlier versions in the
# objective's place. ErrorConfig is the class of them all: a configuration that failed.
KT_FAILED = {"CompilationFailedConfig": "compile_error", "RuntimeFailedConfig": "launch_error", "ErrorConfig": "launch_error"}
KT_INVALID = "InvalidConfig"  # restrictions said no: not part of the space
# Which way the objectives Kernel Tuner knows go (True: higher is better), as its
# kernel_tuner.util.objective_default_map gives them: its cache files name the objective, not
# its direction, and Kernel Tuner reads the direction from this map.
KERNEL_TUNER_HIGHER_IS_BETTER = {
    "time": False, "energy": False, "fitness": True, "cost": False, "loss": False,
    "GFLOP/s": True, "TFLOP/s": True, "GB/s": True, "TB/s": True,
    "GFLOPS/W": True, "TFLOPS/W": True, "GFLOP/J": True, "TFLOP/J": True,
}  # fmt: skip
# A T4 file's objective, where our metadata does not say: that map, else the methodology's
# rule (autotuning_methodology.experiments: a name holding "time" is minimised, one holding
# any of these maximised, any other refused).
METHODOLOGY_HIGHER_IS_BETTER = ("score", "gflop/s", "gflops", "gb/s")


def t4_higher_is_better(objective: str) -> bool | None:
    """Whether a T4 file's ``objective`` is maximised, where its metadata does not say
    (None: the methodology's scoring would refuse it too)."""
    if objective in KERNEL_TUNER_HIGHER_IS_BETTER:
        return KERNEL_TUNER_HIGHER_IS_BETTER[objective]
    if "time" in objective.lower():
        return False
    return True if any(name in objective.lower() for name in METHODOLOGY_HIGHER_IS_BETTER) else None


@dataclass
class SpaceTable:
    """One brute-forced space: its parameters and every feasible configuration's outcome.

    Attributes:
        name: a label for reports (``convolution_milo/A100``).
        params: parameter -> values, in the file's order.
        restrictions: the T1 expressions ([] where none was read).
        entries: configuration values (in ``params`` order) -> (status, rate):
            ``ok`` with the objective as a rate to maximise, or a failure
            status with None.
        objective: the file's objective (``time``), ``minimise`` its direction.
        problem_size: the file's problem size, where it names one.
        kernel: the kernel the file names (a Kernel Tuner cache's
            ``kernel_name``), "" where it names none.
    """

    name: str
    params: dict[str, list]
    restrictions: list[str] = field(default_factory=list)
    entries: dict[tuple, tuple[str, float | None]] = field(default_factory=dict)
    objective: str = "time"
    minimise: bool = True
    problem_size: tuple[int, ...] = ()
    kernel: str = ""

    @property
    def size(self) -> int:
        return len(self.entries)

    @property
    def optimum(self) -> float:
        return max(rate for status, rate in self.entries.values() if status == "ok")

    def config(self, values: tuple) -> dict:
        return dict(zip(self.params, values))

    def key(self, cfg: Mapping) -> tuple:
        return tuple(cfg[name] for name in self.params)


def rate(value: float, minimise: bool) -> float:
    """An objective value as a rate to maximise (see the module's docstring)."""
    return 1000.0 / value if minimise else value


MAX_VALUES = 1_000_000  # values of all a T1 file's parameters together
MAX_PARAMETERS = 256  # of one space (a study sets each one a trial; kernel spaces have tens at most)
MAX_RESTRICTIONS = 1_000  # restrictions of one space (each runs for every configuration)
# A restriction can be short and still slow (min('x' * 9999) and 453 more):
# checking a table stops once the check is on course to take longer than this.
MAX_CHECK_SECONDS = 60.0


def read_t1(path: str | os.PathLike) -> tuple[dict[str, list], list[str]]:
    """A T1 file's parameters (name -> values) and restriction expressions.

    Raises:
        ValueError: the file breaks the rules a replay needs (one line naming it).
    """
    document = read_json(path)
    try:
        space = document["ConfigurationSpace"]
        params: dict[str, list] = {}
        count = 0
        for p in space["TuningParameters"]:
            name, values = p["Name"], p["Values"]
            if isinstance(name, str) and name in params:
                raise ValueError(f"parameter names must be distinct, got {shown(name)} twice")
            # T1 writes the values as a Python list literal in a string.
            if not isinstance(values, (str, list)):
                raise TypeError(f"Values of {shown(name)} must be a list or a string, got {type(values).__name__}")
            params[name] = values_literal(values) if isinstance(values, str) else list(values)
            count += len(params[name])
            if count > MAX_VALUES:
                raise ValueError(f"the parameters must hold at most {MAX_VALUES} values together, got {count} or more")
    except (KeyError, TypeError, ValueError, SyntaxError, MemoryError, RecursionError) as exc:
        raise ValueError(f"{path}: a T1 file must hold ConfigurationSpace.TuningParameters (Name, Values), "
                         f"got {type(exc).__name__}: {brief(str(exc))}") from None  # fmt: skip
    _check_space(path, params)
    # The conditions apart from the parameters, so that a fault in one is named as
    # where it is (a condition without its Expression is no fault of TuningParameters).
    conditions = space.get("Conditions") or []  # space: a dict, as TuningParameters was read from it
    if not isinstance(conditions, list):
        raise ValueError(f"{path}: ConfigurationSpace.Conditions must be a list, got {type(conditions).__name__}")
    restrictions = []
    for index, condition in enumerate(conditions):
        if isinstance(condition, dict) and "Expression" not in condition:
            raise ValueError(f"{path}: ConfigurationSpace.Conditions[{index}].Expression must be given (the restriction "
                             f"as a Python expression), got a condition of only {shown(sorted(condition))}")  # fmt: skip
        # A bare string is taken as the expression itself; anything else is refused as one below.
        restrictions.append(condition["Expression"] if isinstance(condition, dict) else condition)
    if len(restrictions) > MAX_RESTRICTIONS:
        raise ValueError(f"{path}: a space may have at most {MAX_RESTRICTIONS} restrictions, got {len(restrictions)}")
    # A restriction names a parameter as Python reads a name (NFKC: 'ｘ' is 'x'), beside the functions it may call.
    known = collections.Counter(python_name(name) for name in params)
    clash = sorted(n for n, count in known.items() if count > 1 or n in SAFE_NAMES or "__" in n)
    if restrictions and clash:
        raise ValueError(f"{path}: a parameter a restriction can name must not read as another's name, a function's "
                         f"or one with '__', got {shown(clash)}")  # fmt: skip
    for expression in restrictions:
        code = compile_restriction(expression, path)
        unknown = sorted({name for name in code.co_names if name not in known and name not in SAFE_NAMES | GUARDS})
        if unknown:
            raise ValueError(f"{path}: a restriction may name only parameters {shown(sorted(params))}, "
                             f"got {shown(expression)} naming {shown(unknown)}")  # fmt: skip
    return params, restrictions


def _check_space(path: Any, params: Mapping[Any, Any]) -> None:
    """At most ``MAX_PARAMETERS`` parameters named by strings, each with a
    list of distinct plain values (numbers, whole ones of at most 64 bits,
    strings, booleans): what a study's categorical choices can be."""
    if len(params) > MAX_PARAMETERS:
        raise ValueError(f"{path}: a space may have at most {MAX_PARAMETERS} parameters, got {len(params)}")
    for name, values in params.items():
        if not isinstance(name, str) or not name:
            raise ValueError(f"{path}: a parameter's name must be a non-empty string, got {shown(name)}")
        if not isinstance(values, list) or not values:
            raise ValueError(f"{path}: parameter {shown(name)} must have a non-empty list of values, got {shown(values)}")
        lone = next((text for text in (name, *values) if isinstance(text, str) and not _unicode(text)), None)
        if lone is not None:
            raise ValueError(f"{path}: the name and values of {shown(name)} must be Unicode text (JSON's \\ud800 alone is "
                             f"half of a character), got {shown(lone)}")  # fmt: skip
        odd = [v for v in values if not plain_constant(v) or (isinstance(v, int) and v.bit_length() > MAX_VALUE_BITS)]
        if odd:
            raise ValueError(f"{path}: values of {shown(name)} must be numbers (whole ones of at most {MAX_VALUE_BITS} "
                             f"bits), strings or booleans, got {shown(odd[0])}")  # fmt: skip
        if len(set(values)) != len(values):  # as a dict's keys tell them apart: 1, 1.0 and True are one
            raise ValueError(f"{path}: values of {shown(name)} must be distinct (1, 1.0 and True count as one), "
                             f"got {shown(values)}")  # fmt: skip


def _unicode(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: JSON can write one, no file name or Parquet column can hold it
        return False
    return True


def read_kernel_tuner_cache(
    path: str | os.PathLike, t1: str | os.PathLike | None = None, name: str = "", document: Any = None
) -> SpaceTable:
    """A Kernel Tuner cache file (gzipped or not) as a ``SpaceTable``.

    Raises:
        ValueError: the file breaks the rules a replay needs (one line naming
            the file, the rule and the value).
    """
    document = read_json(path, open_cache=True) if document is None else document  # read once where load_table did
    if not isinstance(document, dict) or not isinstance(document.get("cache"), dict) or "tune_params" not in document:
        got = sorted(document) if isinstance(document, dict) else type(document).__name__
        raise ValueError(f"{path}: a Kernel Tuner cache must hold 'tune_params' and a 'cache' object, got {got}")
    if not isinstance(document["tune_params"], dict):
        raise ValueError(
            f"{path}: tune_params must map each parameter to its values, got {type(document['tune_params']).__name__}"
        )
    params = dict(document["tune_params"])
    _check_space(path, params)
    objective = document.get("objective", "time")
    # Kernel Tuner 1.x writes a list (its objectives, the first ranking): the replay ranks by the first.
    if isinstance(objective, list) and objective and all(isinstance(o, str) for o in objective):
        objective = objective[0]
    if not isinstance(objective, str):
        raise ValueError(f"{path}: objective must name the measured quantity (or list names, the first ranking), "
                         f"got {objective!r}")  # fmt: skip
    higher = document.get("objective_higher_is_better", KERNEL_TUNER_HIGHER_IS_BETTER.get(objective))
    if higher is None:  # as Kernel Tuner, which refuses to guess
        raise ValueError(f"{path}: objective {shown(objective)} must be one whose direction Kernel Tuner knows "
                         f"{shown(list(KERNEL_TUNER_HIGHER_IS_BETTER))}, or the file must say objective_higher_is_better, "
                         "got neither")  # fmt: skip
    if not isinstance(higher, bool):
        raise ValueError(f"{path}: objective_higher_is_better must be true or false, got {shown(higher)}")
    minimise = not higher
    kernel = document.get("kernel_name")
    table = SpaceTable(name or table_label(path), params, objective=objective, minimise=minimise,
                       problem_size=_problem_size(document.get("problem_size")),
                       kernel=kernel if isinstance(kernel, str) else "")  # fmt: skip
    # As the entries' keys compare (1 == 1.0), each to the tune_params value it stands for: a key
    # is written with that one, so a configuration reads the same from the table as from its values.
    allowed = {n: {v: v for v in values} for n, values in params.items()}
    # ... but a boolean where the parameter has none is a mistake, not a 1 or a 0.
    no_bools = {n for n, values in params.items() if not any(isinstance(v, bool) for v in values)}
    for text, record in document["cache"].items():
        if not isinstance(record, dict):
            raise ValueError(f"{path}: cache entry {shown(text)} must be an object, got {type(record).__name__}")
        missing = [p for p in params if p not in record]
        if missing:
            raise ValueError(f"{path}: cache entry {shown(text)} must give every parameter, missing {shown(missing)}")
        outside = [p for p in params if not plain_constant(record[p]) or record[p] not in allowed[p]
                   or (p in no_bools and isinstance(record[p], bool))]  # fmt: skip
        if outside:
            p = outside[0]
            raise ValueError(f"{path}: cache entry {shown(text)} {shown_name(p)} must be one of tune_params {shown(params[p])}, "
                             f"got {shown(record[p])}")  # fmt: skip
        error = record.get("__error__")
        value = error if isinstance(error, str) else record.get(objective)
        if value == KT_INVALID:
            continue
        key = tuple(allowed[p][record[p]] for p in params)
        if key in table.entries:
            written = {p: record[p] for p in params}  # as this entry writes it (1.0 where another wrote 1)
            raise ValueError(f"{path}: cache entry {shown(text)} must be a configuration of its own, got "
                             f"{shown(written)} a second time")  # fmt: skip
        if isinstance(value, str):
            if value not in KT_FAILED:
                where = "__error__" if isinstance(error, str) else shown_name(objective)
                raise ValueError(f"{path}: cache entry {shown(text)} {where} must be a number or one of "
                                 f"{[*KT_FAILED, KT_INVALID]}, got {shown(value)}")  # fmt: skip
            table.entries[key] = (KT_FAILED[value], None)
        elif finite_number(value) and value > 0:  # a rate of 0 has no ratio to the optimum
            ranked = rate(float(value), minimise)
            if not math.isfinite(ranked):
                raise ValueError(f"{path}: cache entry {shown(text)} {shown_name(objective)} must be large enough that "
                                 f"1000 / {shown_name(objective)} is finite, got {shown(value)}")  # fmt: skip
            table.entries[key] = ("ok", ranked)
        else:
            raise ValueError(f"{path}: cache entry {shown(text)} {shown_name(objective)} must be a positive finite number, "
                             f"got {shown(value)}")  # fmt: skip
    return _with_t1(table, path, t1)


def _problem_size(size: Any) -> tuple[int, ...]:
    """Kernel Tuner writes a problem size as a number or a list of them; it
    only labels the table, so any other form is left out rather than refused."""
    sizes = size if isinstance(size, list) else [] if size is None else [size]
    if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in sizes):
        return ()
    return tuple(sizes)


def read_t4_table(
    path: str | os.PathLike,
    t1: str | os.PathLike | None = None,
    name: str = "",
    objective: str | None = None,
    document: Any = None,
) -> SpaceTable:
    """A T4 results file as a ``SpaceTable``, ranked by ``objective`` (default:
    the one our metadata names, else the results' first objective, else
    ``time``). Its direction: what our metadata says, else ``t4_higher_is_better``.

    Parameters and values: from ``t1`` where given, else from the results
    (each parameter's values sorted).

    Raises:
        ValueError: the file breaks the rules a replay needs (one line naming it).
    """
    document = read_json(path) if document is None else document
    results = read_t4(path, document)
    meta = t4_metadata(path, document).get("tuner")
    meta = meta if isinstance(meta, dict) else {}
    directions = meta.get("objectives") if isinstance(meta.get("objectives"), dict) else {}
    if objective is None:
        ranked_by = meta.get("ranked_by")
        objective = ranked_by if isinstance(ranked_by, str) else next(iter(_first_objectives(document)), "time")
    direction = directions.get(objective)
    if direction not in ("min", "max"):
        higher = t4_higher_is_better(objective)
        if higher is None:
            raise ValueError(f"{path}: objective {shown(objective)} must be one whose direction is known (Kernel Tuner's "
                             f"{shown(list(KERNEL_TUNER_HIGHER_IS_BETTER))}, or a name holding 'time' or one of "
                             f"{shown(list(METHODOLOGY_HIGHER_IS_BETTER))}, as the methodology's scoring reads them), got "
                             "none")  # fmt: skip
        direction = "max" if higher else "min"
    minimise = direction == "min"
    listed = meta.get("parameters")
    order = [n for n in listed if isinstance(n, str)] if isinstance(listed, list) else []
    names = list(dict.fromkeys(order) or dict.fromkeys(k for r in results for k in r["configuration"]))
    names = [n for n in names if any(n in r["configuration"] for r in results)]
    for index, r in enumerate(results):
        odd = [n for n in names if not plain_constant(r["configuration"].get(n))]
        if odd:
            raise ValueError(f"{path}: results[{index}].configuration {shown_name(odd[0])} must be a number, a string or a "
                             f"boolean, got {shown(r['configuration'][odd[0]])}")  # fmt: skip
    # A parameter a result leaves out (our writer leaves out empty ones) is None there.
    # Its values as the entries' keys tell them apart: 1 and 1.0 are one value, written
    # as its first result writes it, and every result's key takes that one (as a cache's
    # keys compare with its tune_params; a T1 file's values replace them in _with_t1).
    # True is 1 too, but a boolean beside numbers is a mistake in the file, not a 1:
    # read as one value, a parameter of true, 2, 3 and 4 became [True, 2, 3, 4].
    values: dict[str, dict] = {n: {} for n in names}  # value -> the one the table keeps
    kinds: dict[str, dict[bool, tuple[Any, int]]] = {n: {} for n in names}  # boolean or not -> first (value, result)
    for index, r in enumerate(results):
        for n in names:
            value = r["configuration"].get(n)
            if isinstance(value, (int, float)):  # booleans too
                kinds[n].setdefault(isinstance(value, bool), (value, index))
                if len(kinds[n]) == 2:
                    (a, i), (b, j) = sorted(kinds[n].values(), key=lambda seen: seen[1])
                    raise ValueError(f"{path}: values of {shown(n)} must be all booleans or all numbers (Python counts "
                                     f"true as 1), got {shown(a)} in results[{i}] and {shown(b)} in results[{j}]")  # fmt: skip
            values[n].setdefault(value, value)
    params = {n: sorted(v.values(), key=lambda x: (x is None, isinstance(x, str), x)) for n, v in values.items()}
    _check_space(path, params)
    table = SpaceTable(name or table_label(path), params, objective=objective, minimise=minimise)
    for index, r in enumerate(results):
        key = tuple(values[n][r["configuration"].get(n)] for n in names)
        if r["status"] == "infeasible":
            continue
        if key in table.entries:
            written = {n: r["configuration"].get(n) for n in names}  # as this result writes it (1 where another wrote 1.0)
            raise ValueError(f"{path}: results[{index}] must be a configuration of its own, got {shown(written)} a second "
                             "time")  # fmt: skip
        if r["status"] != "ok":
            table.entries[key] = (r["status"], None)
            continue
        if objective in r["repeated"]:  # which one was measured? The last would win, and might be the optimum.
            raise ValueError(f"{path}: results[{index}] is correct, so measurement {shown(objective)} must be given once, "
                             f"got it {len(r['repeated'][objective])} times: {shown(r['repeated'][objective])}")  # fmt: skip
        value = r["values"].get(objective)
        if value is None or value <= 0:  # a rate of 0 has no ratio to the optimum
            raise ValueError(f"{path}: results[{index}] is correct, so measurement {shown(objective)} must be a "
                             f"positive number, got {shown(r['unread'].get(objective, value))}")  # fmt: skip
        ranked = rate(value, minimise)
        if not math.isfinite(ranked):
            raise ValueError(f"{path}: results[{index}] measurement {shown(objective)} must be large enough that "
                             f"1000 / {shown_name(objective)} is finite, got {shown(value)}")  # fmt: skip
        table.entries[key] = ("ok", ranked)
    return _with_t1(table, path, t1)


def _first_objectives(document: Mapping) -> list[str]:
    for result in document.get("results", [])[:1]:
        objectives = result.get("objectives")
        return [o for o in objectives if isinstance(o, str)] if isinstance(objectives, list) else []
    return []


def load_table(path: str | os.PathLike, t1: str | os.PathLike | None = None, name: str = "") -> SpaceTable:
    """A Kernel Tuner cache or a T4 file (told apart by content) as a
    ``SpaceTable``; ``t1``: the space's T1 file, by default the one beside it
    (``t1_beside``) where there is one."""
    path = Path(path)
    if t1 is None:
        t1 = t1_beside(path)
    document = read_json(path, open_cache=True)  # a T4 file never ends in a comma: only a cache is closed
    if isinstance(document, dict) and "cache" in document:
        return read_kernel_tuner_cache(path, t1, name, document=document)
    if isinstance(document, dict) and "results" in document:
        return read_t4_table(path, t1, name, document=document)
    got = sorted(document) if isinstance(document, dict) else type(document).__name__
    raise ValueError(f"{path}: a replay table must be a Kernel Tuner cache ('cache') or a T4 file ('results'), got {got}")


def t1_beside(path: Path) -> Path | None:
    """The T1 file in ``path``'s folder (``T1.json``, ``t1.json``, ``T1.json.gz``: the
    name a folder of tables skips as its T1), or None.

    Raises:
        ValueError: the folder holds more than one (one line naming them).
    """
    try:
        found = sorted(f for f in path.parent.iterdir() if (table_stem(f.name) or "").lower() == "t1" and f.is_file())
    except OSError:  # a folder that cannot be listed: the table's own read says what is wrong
        return None
    if len(found) > 1:
        raise ValueError(f"{path}: the folder must hold at most one T1 file beside it, got {shown([f.name for f in found])}")
    return found[0] if found else None


def table_stem(name: str) -> str | None:
    """A table file's name without its ``.json`` or ``.json.gz``, or None where it has neither."""
    for suffix in (".json.gz", ".json"):
        if name.lower().endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return None


def table_label(path: str | os.PathLike) -> str:
    """A table's name from its file: ``FOLDER/STEM`` (``convolution_milo/A100``)."""
    path = Path(path)
    stem = table_stem(path.name) or path.name
    folder = path.resolve().parent.name
    return f"{folder}/{stem}" if folder else stem


def _with_t1(table: SpaceTable, path: Any, t1: str | os.PathLike | None) -> SpaceTable:
    """Checks the table against its T1 space: the same parameters and values,
    and no configuration its restrictions exclude; the T1 order of values wins."""
    if t1 is not None:
        params, restrictions = read_t1(t1)
        if set(params) != set(table.params):
            raise ValueError(f"{path}: parameters must be those of {t1} {shown(sorted(params))}, got {shown(sorted(table.params))}")
        t1_value = {}
        for n, values in params.items():
            # The T1 value each table value is, as the entries' keys compare (1 is 1.0);
            # but a boolean is no number here either (true for a T1 1, or 1 for a T1 True).
            t1_value[n] = {v: v for v in values}
            outside = sorted({v for v in table.params[n] if v not in t1_value[n]
                              or isinstance(v, bool) != isinstance(t1_value[n][v], bool)}, key=str)  # fmt: skip
            if outside:
                raise ValueError(f"{path}: values of {shown(n)} must be of {t1} {shown(values)}, got {shown(outside)}")
        order = list(params)
        place = {n: i for i, n in enumerate(table.params)}
        position = [place[n] for n in order]
        # Keys in T1's order, and written as T1 writes each value (1.0 where it says 1.0), as the parameters are.
        table.entries = {tuple(t1_value[n][k[i]] for n, i in zip(order, position)): v for k, v in table.entries.items()}
        table.params, table.restrictions = params, restrictions
    if not any(status == "ok" for status, _ in table.entries.values()):
        raise ValueError(f"{path}: a replay table must hold a correct configuration, got none of {table.size}")
    check = restriction_check(table.restrictions, path)
    started = time.perf_counter()
    for done, key in enumerate(table.entries, 1):
        broken = check(table.config(key))
        if broken:
            raise ValueError(f"{path}: configuration {shown(table.config(key))} must pass the restriction {shown(broken)}")
        spent = time.perf_counter() - started
        if spent > 1.0 and spent / done * table.size > MAX_CHECK_SECONDS:
            raise ValueError(f"{t1 or path}: the restrictions must take at most {MAX_CHECK_SECONDS:.0f} s to check over the "
                             f"table's {table.size} configurations, got {1000 * spent / done:.1f} ms a configuration "
                             f"({spent / done * table.size:.0f} s)")  # fmt: skip
    return table


class TableFamily(Family):
    """The space of a ``SpaceTable`` as a family: its parameters, and the
    table's configurations as the only feasible ones. Nothing to compile or
    launch: a replay measures by look-up."""

    dtypes = (DTYPE,)
    arg_types = ""

    def __init__(self, table: SpaceTable) -> None:
        self.name = table.name
        self.source = ""
        self.params = tuple(Param(n, tuple(v), f"{n} of {table.name}") for n, v in table.params.items())
        self._table = table

    def constraint_violations(self, cfg: Mapping, problem: Problem) -> list[str]:
        if self._table.key(cfg) not in self._table.entries:
            return [f"not in table {self._table.name}: its space's restrictions exclude it"]
        return []

    def space(self, problem: Problem, domains: Mapping[str, list] | None = None) -> list[dict]:
        """What ``Family.space`` lists, in its order (the product of the
        domains, each configuration once per way the domains give it), read
        from the table rather than by testing every combination: a T1 space's
        product can be many times the configurations its restrictions leave
        (the hub's published hotspot T1 file: 4.44 million combinations, 82,984 left)."""
        if problem.dtype not in self.dtypes:
            return []
        if domains is None:
            domains = {p.name: list(p.values) for p in self.params}
        axes = [list(domains.get(p.name, [p.default])) for p in self.params]
        # Where each value stands in its axis; a value the parameter does not accept
        # (a float or a bool for an integer) is left out, as Family.violations would.
        positions: list[dict[Any, list[int]]] = []
        for param, axis in zip(self.params, axes):
            where: dict[Any, list[int]] = {}
            for i, value in enumerate(axis):
                if param.accepts(value):
                    where.setdefault(value, []).append(i)  # as the keys compare: 1 is 1.0
            positions.append(where)
        listed = []
        for key in self._table.entries:
            places = [where.get(value) for where, value in zip(positions, key)]
            if None not in places:
                listed += itertools.product(*places)
        listed.sort()
        names = self.param_names
        return [{name: axis[i] for name, axis, i in zip(names, axes, place)} for place in listed]

    def listed_space(self, problem: Problem, domains: Mapping[str, Sequence]) -> list[dict] | None:
        """A table is listed whatever its product: every configuration is in it."""
        return self.space(problem, {name: list(values) for name, values in domains.items()})

    def _no_device(self, *args: Any) -> Any:
        raise NotImplementedError(f"{self.name} is a replay table's space: it is measured by look-up, not on a GPU")

    kernel_name = defines = bytes_moved = make_inputs = reference = bind = allocate = _no_device


def table_family(table: SpaceTable) -> Family:
    return TableFamily(table)


def table_problem(table: SpaceTable) -> Problem:
    return Problem(table.name, DTYPE, math.prod(table.problem_size) if table.problem_size else 0)


def table_measure(table: SpaceTable) -> Callable[[dict], dict]:
    """A ``measure`` for ``run_study``: the table's outcome of ``cfg`` as a
    results row (status, and the rate as ``bandwidth_gbs`` when ok)."""

    def measure(cfg: dict) -> dict:
        status, value = table.entries.get(table.key(cfg), ("launch_error", None))
        if status == "ok":
            row = {"status": "ok", "bandwidth_gbs": value}
            if table.minimise and table.objective == "time":
                row["time_ms_median"] = 1000.0 / value
            return row
        return {"status": status, "error": f"{status} in table {table.name}"}

    return measure


def table_unfit(table: SpaceTable) -> str | None:
    """Why no search can be judged on ``table`` (the benchmark, a replay), or None: a
    correct configuration's objective it cannot read as a positive rate (its
    scores take 1000 / rate as a time), or nothing to search (fewer than two
    correct configurations of different objective)."""
    ok = [(key, value) for key, (status, value) in table.entries.items() if status == "ok"]
    bad = next(((key, value) for key, value in ok if not value > 0), None)
    if bad is not None:  # only a higher-is-better objective can be (a time <= 0 is refused when read)
        return (f"a higher-is-better objective is scored as a rate, so {table.objective} must be positive in every correct "
                f"configuration, got {shown(bad[1])} at {shown(table.config(bad[0]))}")  # fmt: skip
    if len({value for _, value in ok}) < 2:
        value = 1000.0 / ok[0][1] if table.minimise else ok[0][1]
        return (f"a table must hold correct configurations of different {table.objective} (something to search), got "
                f"{len(ok)} correct, all of {table.objective} {value:g}")  # fmt: skip
    return None


def table_key(table: SpaceTable, cfg: Mapping) -> str:
    """The study's key of a table configuration."""
    return config_key({n: cfg[n] for n in table.params})
