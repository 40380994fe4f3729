"""What a line of a claims file and a claim's row must hold to be read
(``tuner.search.study.claims``): a line that decodes but is not an operation
record, or a row that is not a results row, is skipped with one warning line
rather than stopping every worker that reads the claims. It knows records and
rows, not stores: the claims import it, not the other way round."""

from __future__ import annotations

import json
import sys
from typing import Any

# The fields each operation record carries (besides "s", "k", "op" and "t"), and
# their types; a measured record may carry "marks" too (older ledgers have none).
_OP_FIELDS: dict[str, dict[str, type]] = {
    "claim": {"trial": int, "owner": str, "worker": str},
    "measured": {"row": str},
    "done": {},
    "release": {},
    "owner": {"owner": str, "worker": str},
    "beat": {},
}


def record_problem(record: Any) -> str | None:
    """Why a decoded line of a claims file is not an operation record, or None."""
    if not isinstance(record, dict):
        return f"a JSON {type(record).__name__}, not a claims record (an object)"
    if record.get("op") not in _OP_FIELDS:
        return f"a record whose op is {record.get('op')!r}, not one of {list(_OP_FIELDS)}"
    wanted = {"s": str, "k": str, "t": (int, float), **_OP_FIELDS[record["op"]]}
    missing = [name for name in wanted if name not in record]
    if missing:
        return f"a {record['op']} record without {missing}"
    for name, kind in wanted.items():
        if not isinstance(record[name], kind) or isinstance(record[name], bool):
            return f"a {record['op']} record whose {name} is {str(record[name])[:80]!r}"
    marks = record.get("marks", {})
    if not isinstance(marks, dict) or not all(isinstance(v, str) for v in marks.values()):
        return f"a {record['op']} record whose marks are {str(marks)[:80]!r}, not names and texts"
    return None  # a row is the caller's text; ``claim_row`` reads it


def row_problem(text: str) -> str | None:
    """Why a claim's row (JSON text) is not a results row, or None."""
    try:
        row = json.loads(text)
    except ValueError as error:
        return f"a row that is not JSON ({error})"
    if not isinstance(row, dict):
        return f"a row that is not a results row (an object): {text[:80]!r}"
    return None


def warn_on_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
