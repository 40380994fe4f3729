"""The expressions of a T1 file, evaluated without trusting them: a
parameter's ``Values`` (a list, a comprehension over ``range``, ``range()`` or
``list(range())``, or a sum of these) and its restrictions (plain arithmetic
over the parameters). These files come from elsewhere, and a restriction runs
for every configuration of a table, so what is allowed is a short list of
nodes and calls, and what would cost too much as it runs (huge powers, shifts,
products, repeated strings or lists) stops with the expression named. Messages
show values briefly (``shown``, ``brief``): a huge integer as its size."""

from __future__ import annotations

import ast
import functools
import math
import reprlib
import unicodedata
from typing import Any, Callable, Mapping

SAFE_NAMES = {"min": min, "max": max, "abs": abs, "int": int, "float": float, "round": round, "len": len}


@functools.lru_cache(maxsize=4096)
def python_name(name: str) -> str:
    """A parameter's name as Python reads it in an expression (NFKC: 'ｘ' is 'x')."""
    return unicodedata.normalize("NFKC", name)


def plain_constant(value: Any) -> bool:
    return value is None or isinstance(value, (bool, int, str)) or (isinstance(value, float) and math.isfinite(value))


def values_literal(text: str) -> list:
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
        raise ValueError(f"Values must be a list, got {shown(text)}")
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
    """``text`` as a sum of pieces (see ``values_literal``), each checked before any runs."""
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, MemoryError, RecursionError) as exc:
        raise ValueError(f"Values must be {_VALUES_FORMS}, got {shown(text)} ({getattr(exc, 'msg', 'nested too deep')})") from None
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
            raise ValueError(f"Values must be {_VALUES_FORMS}, got {shown(text)} ({why})")
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
            raise ValueError(f"Values {shown(text)} must evaluate, got {type(exc).__name__}: {brief(str(exc))}") from None
        if len(values) > MAX_RANGE:
            raise ValueError(f"Values {shown(text)} must hold at most {MAX_RANGE} values, got {len(values)} or more")
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


shown = _Short().repr


def shown_name(name: Any) -> str:
    """A parameter's or measurement's name as a message shows it: as it is where it reads plainly."""
    return name if isinstance(name, str) and name.isidentifier() and len(name) <= 80 else shown(name)


def brief(message: str) -> str:
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
        raise ValueError(f"a shift must be at most {MAX_BITS} bits, got {shown(b)}")
    if isinstance(a, int) and isinstance(b, int) and a.bit_length() + b > MAX_BITS:
        raise ValueError(f"a shift must stay under {MAX_BITS} bits, got a {a.bit_length()}-bit number << {b}")
    return a << b


def _plus(a: Any, b: Any) -> Any:
    if isinstance(a, (str, bytes, list, tuple)) and isinstance(b, (str, bytes, list, tuple)) and len(a) + len(b) > MAX_LENGTH:
        raise ValueError(f"strings or lists added must stay under {MAX_LENGTH} items, got {len(a)} + {len(b)}")
    return a + b


def _modulo(a: Any, b: Any) -> Any:
    if isinstance(a, (str, bytes)):
        raise ValueError(f"% must take numbers (string formatting is not a restriction), got {shown(a)}")
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


def compile_restriction(expression: Any, where: Any) -> Any:
    """A T1 restriction compiled, after checking it is plain arithmetic over
    names (see ``_NODES``): the file comes from elsewhere, and what it says is
    evaluated for every configuration, so it must not reach the interpreter's
    internals nor build huge numbers or strings (``GUARDS``)."""
    if not isinstance(expression, str):
        raise ValueError(f"{where}: a restriction must be a Python expression (a string), got {shown(expression)}")
    if len(expression) > MAX_EXPRESSION:
        raise ValueError(f"{where}: a restriction must be at most {MAX_EXPRESSION} characters, got {len(expression)}")
    try:
        tree = ast.parse(expression, mode="eval")
        why = _unsafe(tree)
        if why:
            raise ValueError(f"{where}: a restriction must be plain arithmetic over parameters, got {shown(expression)} ({why})")
        return compile(ast.fix_missing_locations(_Guarded().visit(tree)), str(where), "eval")
    except SyntaxError as exc:
        raise ValueError(f"{where}: a restriction must be a Python expression, got {shown(expression)} ({exc.msg})") from None
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
        if isinstance(node, ast.Constant) and not plain_constant(node.value):
            return f"constant {node.value!r} is not allowed"
        if isinstance(node, ast.Call) and (not isinstance(node.func, ast.Name) or node.func.id not in SAFE_NAMES or node.keywords):
            return f"only {sorted(SAFE_NAMES)} may be called"
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)) and id(node) not in members:
            return "a list, tuple or set may only stand beside 'in'"
    return None


def restriction_check(restrictions: list[str], where: Any = "restriction") -> Callable[[Mapping], str | None]:
    """cfg -> the first restriction it breaks, or None."""
    compiled = [(text, compile_restriction(text, where)) for text in restrictions]
    callable_names = SAFE_NAMES | GUARDS  # made once: the check runs for every configuration of a table

    def check(cfg: Mapping) -> str | None:
        names = {python_name(k): v for k, v in cfg.items()}
        names.update(callable_names)
        for text, code in compiled:
            try:
                holds = eval(code, {"__builtins__": {}}, names)  # noqa: S307 - see compile_restriction
            except Exception as exc:  # noqa: BLE001 - whatever the expression raises, said in one line
                raise ValueError(f"{where}: restriction {shown(text)} must evaluate for {shown(dict(cfg))}, "
                                 f"got {type(exc).__name__}: {brief(str(exc))}") from None  # fmt: skip
            if not holds:
                return text
        return None

    return check
