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

import ast
import collections
import functools
import itertools
import math
import os
import reprlib
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import pandas as pd

from tuner.data.results import COLUMNS, PARAM_COLUMNS, config_key
from tuner.data.t4 import finite_number, read_json, read_t4, t4_metadata
from tuner.families.base import Family, Param, Problem

DTYPE = "table"  # a replay table's problem has no element type of ours
# Kernel Tuner's markers in place of a failed configuration's objective.
KT_FAILED = {"CompilationFailedConfig": "compile_error", "RuntimeFailedConfig": "launch_error"}
KT_INVALID = "InvalidConfig"  # restrictions said no: not part of the space
# What a restriction expression may call (T1 and Kernel Tuner write plain arithmetic).
SAFE_NAMES = {"min": min, "max": max, "abs": abs, "int": int, "float": float, "round": round, "len": len}


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
    """

    name: str
    params: dict[str, list]
    restrictions: list[str] = field(default_factory=list)
    entries: dict[tuple, tuple[str, float | None]] = field(default_factory=dict)
    objective: str = "time"
    minimise: bool = True
    problem_size: tuple[int, ...] = ()

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
MAX_RESTRICTIONS = 1_000  # restrictions of one space (each runs for every configuration)


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
                raise ValueError(f"parameter names must be distinct, got {_shown(name)} twice")
            # T1 writes the values as a Python list literal in a string.
            if not isinstance(values, (str, list)):
                raise TypeError(f"Values of {_shown(name)} must be a list or a string, got {type(values).__name__}")
            params[name] = _literal(values) if isinstance(values, str) else list(values)
            count += len(params[name])
            if count > MAX_VALUES:
                raise ValueError(f"the parameters must hold at most {MAX_VALUES} values together, got {count} or more")
        conditions = space.get("Conditions") or []
        if not isinstance(conditions, list):
            raise TypeError(f"Conditions must be a list, got {type(conditions).__name__}")
        restrictions = [c["Expression"] if isinstance(c, dict) else c for c in conditions]
    except (KeyError, TypeError, ValueError, SyntaxError, MemoryError, RecursionError) as exc:
        raise ValueError(f"{path}: a T1 file must hold ConfigurationSpace.TuningParameters (Name, Values), "
                         f"got {type(exc).__name__}: {_brief(str(exc))}") from None  # fmt: skip
    _check_space(path, params)
    if len(restrictions) > MAX_RESTRICTIONS:
        raise ValueError(f"{path}: a space may have at most {MAX_RESTRICTIONS} restrictions, got {len(restrictions)}")
    # A restriction names a parameter as Python reads a name (NFKC: 'ｘ' is 'x'), beside the functions it may call.
    known = collections.Counter(_python_name(name) for name in params)
    clash = sorted(n for n, count in known.items() if count > 1 or n in SAFE_NAMES or "__" in n)
    if restrictions and clash:
        raise ValueError(f"{path}: a parameter a restriction can name must not read as another's name, a function's "
                         f"or one with '__', got {_shown(clash)}")  # fmt: skip
    for expression in restrictions:
        code = _compile(expression, path)
        unknown = sorted({name for name in code.co_names if name not in known and name not in SAFE_NAMES | GUARDS})
        if unknown:
            raise ValueError(f"{path}: a restriction may name only parameters {_shown(sorted(params))}, "
                             f"got {_shown(expression)} naming {_shown(unknown)}")  # fmt: skip
    return params, restrictions


@functools.lru_cache(maxsize=4096)
def _python_name(name: str) -> str:
    """A parameter's name as Python reads it in an expression (NFKC: 'ｘ' is 'x')."""
    return unicodedata.normalize("NFKC", name)


def _check_space(path: Any, params: Mapping[Any, Any]) -> None:
    """Parameters named by strings, each with a list of distinct plain values
    (numbers, whole ones of at most 64 bits, strings, booleans): what a study's
    categorical choices can be."""
    for name, values in params.items():
        if not isinstance(name, str) or not name:
            raise ValueError(f"{path}: a parameter's name must be a non-empty string, got {_shown(name)}")
        if not isinstance(values, list) or not values:
            raise ValueError(f"{path}: parameter {_shown(name)} must have a non-empty list of values, got {_shown(values)}")
        odd = [v for v in values if not _plain(v) or (isinstance(v, int) and v.bit_length() > MAX_VALUE_BITS)]
        if odd:
            raise ValueError(f"{path}: values of {_shown(name)} must be numbers (whole ones of at most {MAX_VALUE_BITS} "
                             f"bits), strings or booleans, got {_shown(odd[0])}")  # fmt: skip
        if len(set(values)) != len(values):  # as a dict's keys tell them apart: 1, 1.0 and True are one
            raise ValueError(f"{path}: values of {_shown(name)} must be distinct, got {_shown(values)}")


def _plain(value: Any) -> bool:
    return value is None or isinstance(value, (bool, int, str)) or (isinstance(value, float) and math.isfinite(value))


def _literal(text: str) -> list:
    """A T1 parameter's values: a list literal, a list comprehension over
    ``range`` (``[2**i for i in range(0, 6)]``, as T1 files write powers of
    two), ``range(...)`` or ``list(range(...))``, or a sum of these
    (``[1, 2, 4, 8, 16] + list(range(32, 1024 + 1, 32))``), each checked and
    guarded as a restriction is, at most ``MAX_RANGE`` values in all."""
    if len(text) > MAX_EXPRESSION:
        raise ValueError(f"Values must be at most {MAX_EXPRESSION} characters, got {len(text)}")
    try:
        values = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        values = _values_expression(text)
    if not isinstance(values, (list, tuple)):
        raise ValueError(f"Values must be a list, got {_shown(text)}")
    return list(values)


MAX_RANGE = 100_000  # values a T1 parameter's Values may hold (each range and the whole sum)
MAX_WORK = 10_000_000  # a Values comprehension's steps: its range's length times its expression's size
MAX_VALUE_BITS = 64  # of a whole number among a parameter's values
_VALUES_FORMS = "a list, a list comprehension over range(), range() or list(range()), or a sum of these"


def _whole_number(value: Any) -> Any:
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > MAX_VALUE_BITS:
        raise ValueError(f"a value must be a whole number of at most {MAX_VALUE_BITS} bits, got a {value.bit_length()}-bit one")
    return value


def _range(*bounds: Any) -> range:
    for bound in bounds:
        _whole_number(bound)
    span = range(*bounds)
    if len(span) > MAX_RANGE:
        raise ValueError(f"a range must hold at most {MAX_RANGE} values, got {len(span)}")
    return span


def _comprehension_value(value: Any) -> Any:
    """What a Values comprehension makes of each step: a number (checked as it
    is made, so that 100,000 huge ones are never built)."""
    if not isinstance(value, (int, float)):
        raise ValueError(f"a comprehension must make numbers, got {type(value).__name__}")
    return _whole_number(value)


def _values_expression(text: str) -> list:
    """``text`` as a sum of pieces (see ``_literal``), each checked before any runs."""
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, MemoryError, RecursionError) as exc:
        raise ValueError(f"Values must be {_VALUES_FORMS}, got {_shown(text)} ({getattr(exc, 'msg', 'nested too deep')})") from None
    pieces, sums = [], [tree.body]
    while sums:  # a + b + c parses as (a + b) + c
        node = sums.pop()
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            sums += [node.right, node.left]
        else:
            pieces.append(node)
    for piece in pieces:
        why = _values_piece_unsafe(piece)
        if why:
            raise ValueError(f"Values must be {_VALUES_FORMS}, got {_shown(text)} ({why})")
    names = {"__builtins__": {}, **SAFE_NAMES, **GUARDS, "range": _range, "list": list, "__value": _comprehension_value}
    values: list = []
    for piece in pieces:
        try:
            if isinstance(piece, ast.ListComp):
                span = eval(_guarded_code(piece.generators[0].iter), names)  # noqa: S307 - checked above
                size = sum(1 for part in (piece.elt, *piece.generators[0].ifs) for _ in ast.walk(part))
                if len(span) * size > MAX_WORK:
                    raise ValueError(f"a comprehension must take at most {MAX_WORK} steps, got {len(span)} values of "
                                     f"an expression of {size} parts")  # fmt: skip
                piece = ast.ListComp(ast.Call(ast.Name("__value", ast.Load()), [piece.elt], []), piece.generators)
            made = eval(_guarded_code(piece), names)  # noqa: S307 - checked above
            values += [_whole_number(value) for value in made]
        except Exception as exc:  # noqa: BLE001 - whatever the expression raises, said in one line
            raise ValueError(f"Values {_shown(text)} must evaluate, got {type(exc).__name__}: {_brief(str(exc))}") from None
        if len(values) > MAX_RANGE:
            raise ValueError(f"Values {_shown(text)} must hold at most {MAX_RANGE} values, got {len(values)} or more")
    return values


def _guarded_code(node: ast.AST) -> Any:
    return compile(ast.fix_missing_locations(_Guarded().visit(ast.Expression(node))), "<T1 values>", "eval")


def _is_range(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "range"


def _values_piece_unsafe(piece: ast.AST) -> str | None:
    """Why one piece of a Values sum is refused, or None: a list of values, a
    comprehension of one loop over range() whose expression and condition are
    arithmetic over its variable, or range() or list(range()) of constants."""
    if isinstance(piece, ast.ListComp):
        generators = piece.generators
        if len(generators) != 1 or not isinstance(generators[0].target, ast.Name) or not _is_range(generators[0].iter) \
                or generators[0].is_async:  # fmt: skip
            return "a comprehension must have one loop over range()"
        loop = generators[0].target.id
        if "__" in loop:
            return f"name {loop!r} is not allowed"
        return _range_unsafe(generators[0].iter) or next(
            (why for part in (piece.elt, *generators[0].ifs) if (why := _arithmetic_unsafe(part, {loop}, numbers=True))), None
        )
    if isinstance(piece, ast.Call) and isinstance(piece.func, ast.Name) and piece.func.id == "list":
        if len(piece.args) != 1 or piece.keywords or not _is_range(piece.args[0]):
            return "list() must take one range()"
        return _range_unsafe(piece.args[0])
    if _is_range(piece):
        return _range_unsafe(piece)
    if isinstance(piece, ast.List):
        return next((why for element in piece.elts if (why := _arithmetic_unsafe(element, set()))), None)
    return f"{type(piece).__name__} is not one of these"


def _range_unsafe(call: ast.Call) -> str | None:
    if call.keywords or not 1 <= len(call.args) <= 3:
        return "range() must take one to three numbers"
    return next((why for bound in call.args if (why := _arithmetic_unsafe(bound, set(), numbers=True))), None)


def _arithmetic_unsafe(node: ast.AST, names: set[str], numbers: bool = False) -> str | None:
    """Why ``node`` is not arithmetic over ``names`` and constants (lists,
    tuples and sets of constants only beside 'in'), or None; ``numbers``: no
    strings either."""
    why = _unsafe(ast.Expression(node))
    if why:
        return why
    for inner in ast.walk(node):
        if isinstance(inner, ast.Name) and inner.id not in names and inner.id not in SAFE_NAMES:
            return f"name {inner.id!r} is not allowed" if not names else f"name {inner.id!r} is not one of its loop's variables"
        if isinstance(inner, (ast.List, ast.Tuple, ast.Set)) and not all(_constant(e) for e in inner.elts):
            return "a list, tuple or set beside 'in' must hold constants"
        if numbers and isinstance(inner, ast.Constant) and isinstance(inner.value, str):
            return "a comprehension or range must make numbers"
    return None


def _constant(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) or (isinstance(node, ast.UnaryOp) and isinstance(node.operand, ast.Constant))


class _Short(reprlib.Repr):
    """A value as a message shows it: short, whatever its size."""

    def __init__(self) -> None:
        super().__init__()
        self.maxstring = self.maxother = 120
        self.maxlist = self.maxtuple = self.maxset = self.maxdict = 12

    def repr_int(self, x: int, level: int) -> str:
        return f"<a {x.bit_length()}-bit integer>" if x.bit_length() > 256 else super().repr_int(x, level)


_shown = _Short().repr


def _name(name: Any) -> str:
    """A parameter's or measurement's name as a message shows it: as it is where it reads plainly."""
    return name if isinstance(name, str) and name.isidentifier() and len(name) <= 80 else _shown(name)


def _brief(message: str) -> str:
    return message if len(message) <= 500 else message[:500] + "..."


# What a restriction may be made of: comparisons, arithmetic, bitwise and
# logical operators over parameters and constants, and calls of SAFE_NAMES;
# lists, tuples and sets only to test membership in. Anything else (attributes,
# subscripts, comprehensions, lambdas) is refused before it runs.
_NODES = (ast.Expression, ast.BoolOp, ast.And, ast.Or, ast.UnaryOp, ast.Not, ast.USub, ast.UAdd, ast.Invert, ast.BinOp,
          ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow, ast.BitAnd, ast.BitOr, ast.BitXor,
          ast.LShift, ast.RShift, ast.Compare, ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.In, ast.NotIn,
          ast.Is, ast.IsNot, ast.IfExp, ast.Name, ast.Load, ast.Constant, ast.Call, ast.Tuple, ast.List, ast.Set)  # fmt: skip
MAX_EXPRESSION = 10_000  # characters of one restriction
# 9**9**9, 1 << 10**9 or 'a' * 10**9 would not finish: a restriction's powers,
# shifts, products, roundings and repeats are refused, as it runs, beyond these.
MAX_EXPONENT = 64
MAX_BITS = 1024  # of a whole number made by **, << or * (a restriction runs for every configuration)
MAX_LENGTH = 10_000  # of a string or list made by *


def _power(base: Any, exponent: Any) -> Any:
    if isinstance(exponent, (int, float)) and abs(exponent) > MAX_EXPONENT:
        raise ValueError(f"an exponent must be at most {MAX_EXPONENT}, got {exponent!r}")
    if isinstance(base, int) and isinstance(exponent, int) and base.bit_length() * abs(exponent) > MAX_BITS:
        raise ValueError(f"a power must stay under {MAX_BITS} bits, got a {base.bit_length()}-bit number ** {exponent!r}")
    return base**exponent


def _times(a: Any, b: Any) -> Any:
    sequence, count = (a, b) if isinstance(a, (str, bytes, list, tuple)) else (b, a)
    if isinstance(sequence, (str, bytes, list, tuple)) and isinstance(count, int) and len(sequence) * count > MAX_LENGTH:
        raise ValueError(f"a string or list repeated must stay under {MAX_LENGTH} items, got {len(sequence)} x {count!r}")
    if isinstance(a, int) and isinstance(b, int) and a.bit_length() + b.bit_length() > MAX_BITS:
        raise ValueError(f"a product must stay under {MAX_BITS} bits, got {a.bit_length()} and {b.bit_length()}-bit factors")
    return a * b


def _shift(a: Any, b: Any) -> Any:
    if isinstance(b, int) and b > MAX_BITS:
        raise ValueError(f"a shift must be at most {MAX_BITS} bits, got {_shown(b)}")
    if isinstance(a, int) and isinstance(b, int) and a.bit_length() + b > MAX_BITS:
        raise ValueError(f"a shift must stay under {MAX_BITS} bits, got a {a.bit_length()}-bit number << {b}")
    return a << b


def _plus(a: Any, b: Any) -> Any:
    if isinstance(a, (str, bytes, list, tuple)) and isinstance(b, (str, bytes, list, tuple)) and len(a) + len(b) > MAX_LENGTH:
        raise ValueError(f"strings or lists added must stay under {MAX_LENGTH} items, got {len(a)} + {len(b)}")
    return a + b


def _modulo(a: Any, b: Any) -> Any:
    if isinstance(a, (str, bytes)):
        raise ValueError(f"% must take numbers (string formatting is not a restriction), got {a!r}")
    return a % b


def _round(number: Any, digits: Any = None) -> Any:
    if isinstance(digits, int) and abs(digits) > MAX_EXPONENT:
        raise ValueError(f"round's digits must be at most {MAX_EXPONENT}, got {digits!r}")
    return round(number) if digits is None else round(number, digits)


# The guarded operators and calls run in place of **, *, <<, % and round
# (under names the checks refuse in a file's text).
GUARDS = {"__power": _power, "__times": _times, "__shift": _shift, "__modulo": _modulo, "__plus": _plus, "round": _round}
_GUARDED_OPS = {ast.Pow: "__power", ast.Mult: "__times", ast.LShift: "__shift", ast.Mod: "__modulo", ast.Add: "__plus"}


class _Guarded(ast.NodeTransformer):
    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        guard = _GUARDED_OPS.get(type(node.op))
        if guard is None:
            return node
        return ast.copy_location(ast.Call(ast.Name(guard, ast.Load()), [node.left, node.right], []), node)


def _compile(expression: Any, where: Any) -> Any:
    """A T1 restriction compiled, after checking it is plain arithmetic over
    names (see ``_NODES``): the file comes from elsewhere, and what it says is
    evaluated for every configuration, so it must not reach the interpreter's
    internals nor build huge numbers or strings (``GUARDS``)."""
    if not isinstance(expression, str):
        raise ValueError(f"{where}: a restriction must be a Python expression (a string), got {_shown(expression)}")
    if len(expression) > MAX_EXPRESSION:
        raise ValueError(f"{where}: a restriction must be at most {MAX_EXPRESSION} characters, got {len(expression)}")
    try:
        tree = ast.parse(expression, mode="eval")
        why = _unsafe(tree)
        if why:
            raise ValueError(f"{where}: a restriction must be plain arithmetic over parameters, got {_shown(expression)} ({why})")
        return compile(ast.fix_missing_locations(_Guarded().visit(tree)), str(where), "eval")
    except SyntaxError as exc:
        raise ValueError(f"{where}: a restriction must be a Python expression, got {_shown(expression)} ({exc.msg})") from None
    except (RecursionError, MemoryError):
        raise ValueError(f"{where}: a restriction must be plain arithmetic over parameters, got one nested too deep "
                         f"({expression[:60]!r}...)") from None  # fmt: skip


def _unsafe(tree: ast.AST) -> str | None:
    """Why a parsed restriction (or a part of a T1 value list) is refused, or None."""
    # A list, tuple or set may be either side of 'in' (a literal list of values, or a
    # tuple of them), or one inside such a one; not an operand of arithmetic ([0] * 10**4).
    members = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            for i, op in enumerate(node.ops):
                if isinstance(op, (ast.In, ast.NotIn)):
                    sides = list(operands[i : i + 2])
                    while sides:
                        side = sides.pop()
                        members.add(id(side))
                        if isinstance(side, (ast.Tuple, ast.List, ast.Set)):
                            sides += [e for e in side.elts if isinstance(e, (ast.Tuple, ast.List, ast.Set))]
    for node in ast.walk(tree):
        if not isinstance(node, _NODES):
            return f"{type(node).__name__} is not allowed"
        if isinstance(node, ast.Name) and "__" in node.id:
            return f"name {node.id!r} is not allowed"
        if isinstance(node, ast.Constant) and not _plain(node.value):
            return f"constant {node.value!r} is not allowed"
        if isinstance(node, ast.Call) and (not isinstance(node.func, ast.Name) or node.func.id not in SAFE_NAMES or node.keywords):
            return f"only {sorted(SAFE_NAMES)} may be called"
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)) and id(node) not in members:
            return "a list, tuple or set may only stand beside 'in'"
    return None


def read_kernel_tuner_cache(
    path: str | os.PathLike, t1: str | os.PathLike | None = None, name: str = "", document: Any = None
) -> SpaceTable:
    """A Kernel Tuner cache file (gzipped or not) as a ``SpaceTable``.

    Raises:
        ValueError: the file breaks the rules a replay needs (one line naming
            the file, the rule and the value).
    """
    document = read_json(path) if document is None else document  # read once where load_table did
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
    if not isinstance(objective, str):
        raise ValueError(f"{path}: objective must name the measured quantity, got {objective!r}")
    minimise = not document.get("objective_higher_is_better", False)
    table = SpaceTable(name or table_label(path), params, objective=objective, minimise=minimise,
                       problem_size=_problem_size(document.get("problem_size")))  # fmt: skip
    allowed = {n: set(values) for n, values in params.items()}  # as the entries' keys compare: 1 == 1.0
    # ... but a boolean where the parameter has none is a mistake, not a 1 or a 0.
    no_bools = {n for n, values in params.items() if not any(isinstance(v, bool) for v in values)}
    for text, record in document["cache"].items():
        if not isinstance(record, dict):
            raise ValueError(f"{path}: cache entry {_shown(text)} must be an object, got {type(record).__name__}")
        missing = [p for p in params if p not in record]
        if missing:
            raise ValueError(f"{path}: cache entry {_shown(text)} must give every parameter, missing {_shown(missing)}")
        outside = [p for p in params if not _plain(record[p]) or record[p] not in allowed[p]
                   or (p in no_bools and isinstance(record[p], bool))]  # fmt: skip
        if outside:
            p = outside[0]
            raise ValueError(f"{path}: cache entry {_shown(text)} {_name(p)} must be one of tune_params {_shown(params[p])}, "
                             f"got {_shown(record[p])}")  # fmt: skip
        value = record.get(objective)
        if value == KT_INVALID:
            continue
        key = tuple(record[p] for p in params)
        if key in table.entries:
            raise ValueError(f"{path}: cache entry {_shown(text)} must be a configuration of its own, got "
                             f"{_shown(table.config(key))} a second time")  # fmt: skip
        if isinstance(value, str):
            if value not in KT_FAILED:
                raise ValueError(f"{path}: cache entry {_shown(text)} {_name(objective)} must be a number or one of "
                                 f"{[*KT_FAILED, KT_INVALID]}, got {_shown(value)}")  # fmt: skip
            table.entries[key] = (KT_FAILED[value], None)
        elif finite_number(value) and (value > 0 or not minimise):
            if not math.isfinite(rate(float(value), minimise)):
                raise ValueError(f"{path}: cache entry {_shown(text)} {_name(objective)} must be large enough that "
                                 f"1000 / {_name(objective)} is finite, got {_shown(value)}")  # fmt: skip
            table.entries[key] = ("ok", rate(float(value), minimise))
        else:
            raise ValueError(f"{path}: cache entry {_shown(text)} {_name(objective)} must be a positive finite number, "
                             f"got {_shown(value)}")  # fmt: skip
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
    ``time``; ``time`` is minimised, what our metadata says otherwise).

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
    minimise = directions.get(objective, "min" if objective.startswith("time") else "max") == "min"
    listed = meta.get("parameters")
    order = [n for n in listed if isinstance(n, str)] if isinstance(listed, list) else []
    names = list(dict.fromkeys(order) or dict.fromkeys(k for r in results for k in r["configuration"]))
    names = [n for n in names if any(n in r["configuration"] for r in results)]
    for index, r in enumerate(results):
        odd = [n for n in names if not _plain(r["configuration"].get(n))]
        if odd:
            raise ValueError(f"{path}: results[{index}].configuration {_name(odd[0])} must be a number, a string or a "
                             f"boolean, got {_shown(r['configuration'][odd[0]])}")  # fmt: skip
    # A parameter a result leaves out (our writer leaves out empty ones) is None there.
    values: dict[str, set] = {n: set() for n in names}  # as the entries' keys tell values apart
    for r in results:
        for n in names:
            values[n].add(r["configuration"].get(n))
    params = {n: sorted(v, key=lambda x: (x is None, isinstance(x, str), x)) for n, v in values.items()}
    table = SpaceTable(name or table_label(path), params, objective=objective, minimise=minimise)
    for index, r in enumerate(results):
        key = tuple(r["configuration"].get(n) for n in names)
        if r["status"] == "infeasible":
            continue
        if key in table.entries:
            raise ValueError(f"{path}: results[{index}] must be a configuration of its own, got "
                             f"{_shown(table.config(key))} a second time")  # fmt: skip
        if r["status"] != "ok":
            table.entries[key] = (r["status"], None)
            continue
        value = r["values"].get(objective)
        if value is None or (minimise and value <= 0):
            raise ValueError(f"{path}: results[{index}] is correct, so measurement {_shown(objective)} must be a "
                             f"{'positive ' if minimise else ''}number, got {_shown(r['unread'].get(objective, value))}")  # fmt: skip
        if not math.isfinite(rate(value, minimise)):
            raise ValueError(f"{path}: results[{index}] measurement {_shown(objective)} must be large enough that "
                             f"1000 / {_name(objective)} is finite, got {_shown(value)}")  # fmt: skip
        table.entries[key] = ("ok", rate(value, minimise))
    return _with_t1(table, path, t1)


def _first_objectives(document: Mapping) -> list[str]:
    for result in document.get("results", [])[:1]:
        objectives = result.get("objectives")
        return [o for o in objectives if isinstance(o, str)] if isinstance(objectives, list) else []
    return []


def load_table(path: str | os.PathLike, t1: str | os.PathLike | None = None, name: str = "") -> SpaceTable:
    """A Kernel Tuner cache or a T4 file (told apart by content) as a
    ``SpaceTable``; ``t1``: the space's T1 file, by default ``T1.json`` beside it
    where there is one."""
    path = Path(path)
    if t1 is None and (path.parent / "T1.json").is_file():
        t1 = path.parent / "T1.json"
    document = read_json(path)
    if isinstance(document, dict) and "cache" in document:
        return read_kernel_tuner_cache(path, t1, name, document=document)
    if isinstance(document, dict) and "results" in document:
        return read_t4_table(path, t1, name, document=document)
    got = sorted(document) if isinstance(document, dict) else type(document).__name__
    raise ValueError(f"{path}: a replay table must be a Kernel Tuner cache ('cache') or a T4 file ('results'), got {got}")


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
            raise ValueError(f"{path}: parameters must be those of {t1} {_shown(sorted(params))}, got {_shown(sorted(table.params))}")
        for n, values in params.items():
            allowed = set(values)  # as the entries' keys compare: 1 is 1.0
            outside = sorted({v for v in table.params[n] if v not in allowed}, key=str)
            if outside:
                raise ValueError(f"{path}: values of {_shown(n)} must be of {t1} {_shown(values)}, got {_shown(outside)}")
        order = list(params)
        place = {n: i for i, n in enumerate(table.params)}
        position = [place[n] for n in order]
        table.entries = {tuple(k[i] for i in position): v for k, v in table.entries.items()}
        table.params, table.restrictions = params, restrictions
    if not any(status == "ok" for status, _ in table.entries.values()):
        raise ValueError(f"{path}: a replay table must hold a correct configuration, got none of {table.size}")
    check = restriction_check(table.restrictions, path)
    for key in table.entries:
        broken = check(table.config(key))
        if broken:
            raise ValueError(f"{path}: configuration {_shown(table.config(key))} must pass the restriction {_shown(broken)}")
    return table


def restriction_check(restrictions: list[str], where: Any = "restriction") -> Callable[[Mapping], str | None]:
    """cfg -> the first restriction it breaks, or None."""
    compiled = [(text, _compile(text, where)) for text in restrictions]

    def check(cfg: Mapping) -> str | None:
        names = {_python_name(k): v for k, v in cfg.items()} | SAFE_NAMES | GUARDS
        for text, code in compiled:
            try:
                holds = eval(code, {"__builtins__": {}}, names)  # noqa: S307 - see _compile
            except Exception as exc:  # noqa: BLE001 - whatever the expression raises, said in one line
                raise ValueError(f"{where}: restriction {_shown(text)} must evaluate for {_shown(dict(cfg))}, "
                                 f"got {type(exc).__name__}: {_brief(str(exc))}") from None  # fmt: skip
            if not holds:
                return text
        return None

    return check


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
        (the hub's hotspot: 8.9 million combinations, 82,984 left)."""
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


def table_rows(table: SpaceTable) -> pd.DataFrame:
    """The table as results rows (its parameters, ``status`` and the rate as
    ``bandwidth_gbs``), for what replays a results table
    (``tuner.search.replay``)."""
    clash = sorted(set(table.params) & (set(COLUMNS) - set(PARAM_COLUMNS)))
    if clash:
        raise ValueError(f"{table.name}: a replayed table's parameters must not be named as results columns, got {clash}")
    gaps = next((table.config(key) for key in table.entries if None in key), None)
    if gaps is not None:
        raise ValueError(f"{table.name}: a replayed table's configurations must give every parameter a value, got {gaps}")
    measure = table_measure(table)
    rows = pd.DataFrame([table.config(key) | measure(table.config(key)) for key in table.entries])
    return rows.astype({name: object for name in table.params})  # values as the file gives them, not as floats


def table_key(table: SpaceTable, cfg: Mapping) -> str:
    """The study's key of a table configuration."""
    return config_key({n: cfg[n] for n in table.params})
