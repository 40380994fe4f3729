"""The answer of a tuning run as files a program can load or include: per
family and problem, the best verified configuration of a GPU's dataset; where
a family's configurations do different work (``Family.operation_param``:
copy's ``variant``, a copy or a read-only pass), the best of each operation.

- ``best.json`` (``"format": 2``): an entry per answer, each naming its
  ``operation`` (null for a family of one), the default operation's entry
  first among a problem's; the winning parameters, launch geometry, GB/s
  (GFLOP/s where the family counts work), fractions of the peaks, and the run
  that measured it; the 95 % interval of the winner's median time, its tie set
  (every configuration whose interval overlaps the winner's) and the member
  the header exports, with the reason (``tuner.data.ties``). Format 1 (no
  ``format`` key) had one entry per problem and no ``operation``;
- ``best_configs.h``: a C++ header with the exported member's constants, one
  struct per answer in ``namespace tuner_best`` (``<family>_<dtype>_n<n>``,
  or ``<family>_<operation>_<dtype>_n<n>`` where the family has several
  operations), the other members of its tie set in a comment above it,
  guarded by compute capability: built for another GPU
  (``-DTUNER_TARGET_SM=80``), each struct holds the family's default
  parameters instead (in its own operation), and the same other members (zero
  grid and block, no bandwidth), so that one program builds for any GPU.

Yardstick rows (``source == "peaks"``) are not candidates.
"""

from __future__ import annotations

import errno
import json
import math
import re
import stat
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np
import pandas as pd

from tuner.data import ties
from tuner.data.front import with_both
from tuner.data.paths import GpuFolder
from tuner.data.results import config_params, plain_value
from tuner.families import REGISTRY


def candidate_rows(dataset: pd.DataFrame) -> np.ndarray:
    """Which rows may win: verified (status ok) and not a yardstick (source
    peaks). A row without a source (a table that keeps none) is no yardstick:
    compared as they are, its missing value would leave it out unsaid."""
    ok = dataset["status"].eq("ok").fillna(False).to_numpy(dtype=bool)
    if "source" not in dataset:
        return ok
    return ok & ~dataset["source"].eq("peaks").fillna(False).to_numpy(dtype=bool)


def best_entries(dataset: pd.DataFrame) -> list[dict]:
    """One entry per (family, dtype, n) and, where the family's configurations
    do different work, per operation (``Family.operation``, in the family's
    order: the default first): its best ok row (by GFLOP/s for families that
    count floating-point work, else by GB/s), the 95 % interval of its median
    time, its tie set and the member the header exports (``tuner.data.ties``)."""
    ok = dataset[candidate_rows(dataset)]
    ok = ok.assign(_operation=ties.operations(ok).fillna(""))  # "": the family's one operation (groupby drops None)
    candidates = {}
    for (family_name, dtype, n, operation), rows in ok.groupby(["family", "dtype", "n", "_operation"], sort=False):
        rows = _complete_if_any(rows.drop(columns="_operation"))
        by = "gflops" if rows["gflops"].notna().any() else "bandwidth_gbs"
        candidates[(family_name, dtype, int(n), operation or None)] = (rows, by)
    candidates = dict(sorted(candidates.items(), key=lambda item: _answer_order(item[0])))
    every = ties.problems(candidates)
    entries = []
    for (family_name, dtype, n, operation), problem in every.items():
        if problem.table.empty:
            continue
        family = REGISTRY.families.get(family_name)
        best = problem.winner
        choice = ties.choose(problem, every)
        chosen = problem.table[problem.table["config_key"] == choice.config_key].iloc[0]
        key = (family_name, dtype, n, operation)
        entries.append({
            "family": family_name, "operation": operation, "dtype": dtype, "n": int(n),
            "params": _params(best, family),
            "grid": _dims(best["grid"]), "block": _dims(best["block"]),
            "bandwidth_gbs": plain_value(best["bandwidth_gbs"]), "gflops": plain_value(best["gflops"]), "ranked_by": problem.by,
            "fraction_of_copy_peak": plain_value(best["fraction_of_copy_peak"]),
            "fraction_of_theoretical_peak": plain_value(best["fraction_of_theoretical_peak"]),
            "time_ms_median": plain_value(best["time_ms_median"]),
            "time_ms_interval": _interval(best), "interval": str(best["how"]),
            "run_id": plain_value(best["run_id"]),
            "source": plain_value(best["source"]), "config_key": plain_value(best["config_key"]),
            "candidates": int(len(candidates[key][0])),
            "energy_optimal": _energy_optimal(candidates[key][0], best, family),
            "tie_count": int(len(problem.ties)),
            "tie_set": [_member(row, family, problem.by) for _, row in problem.ties.iterrows()],
            "exported": {**_member(chosen, family, problem.by), "grid": _dims(chosen["grid"]),
                         "block": _dims(chosen["block"]), "rule": choice.rule},
        })  # fmt: skip
    return entries


def _answer_order(key: ties.AnswerKey) -> tuple:
    """best.json's order: by family, dtype and n, then operation in the
    family's order, so that a reader taking the first entry of a family,
    dtype and n gets the family's default operation (copy's copy)."""
    family, dtype, n, operation = key
    return family, dtype, n, ties.operation_order(family, operation)


def answer_key(entry: Mapping) -> ties.AnswerKey:
    """What an entry of ``best_entries`` answers: (family, dtype, n, operation)."""
    return entry["family"], entry["dtype"], entry["n"], entry.get("operation")


def _energy_optimal(rows: pd.DataFrame, fastest: pd.Series, family) -> dict | None:
    """Of the rows whose energy was measured (a finite, positive time and
    energy: ``front.with_both``), the one with the fewest joules per launch,
    beside the fastest's own energy (null where not measured); None where no
    row has energy."""
    if "energy_j" not in rows:
        return None
    measured = with_both(rows)
    if measured.empty:
        return None
    frugal = measured.loc[measured["energy_j"].idxmin()]
    return {"params": _params(frugal, family), "config_key": plain_value(frugal["config_key"]),
            "energy_j": plain_value(frugal["energy_j"]), "energy_j_err": plain_value(frugal.get("energy_j_err")),
            "time_ms_median": plain_value(frugal["time_ms_median"]), "fastest_energy_j": plain_value(fastest.get("energy_j"))}  # fmt: skip


def _interval(row: pd.Series) -> list[float] | None:
    low, high = plain_value(row["low"]), plain_value(row["high"])
    return None if low is None or high is None else [low, high]


def _member(row: pd.Series, family, by: str) -> dict[str, Any]:
    """A tie set member as best.json lists it."""
    return {
        "config_key": plain_value(row["config_key"]), "params": _params(row, family),
        by: plain_value(row[by]), "time_ms_median": plain_value(row["time_ms_median"]),
        "time_ms_interval": _interval(row), "behind_winner": plain_value(row["behind"]),
        "source": plain_value(row["source"]),
    }  # fmt: skip


def _complete_if_any(rows: pd.DataFrame) -> pd.DataFrame:
    """A reduction's answer is one that finishes on the device: rows whose
    ``finish`` is ``host`` (or unset) leave the last sum to the caller, so
    they win only where no complete one was measured."""
    if "finish" not in rows:
        return rows
    complete = rows[rows["finish"].notna() & (rows["finish"] != "host")]
    return complete if len(complete) else rows


def _params(row: pd.Series, family) -> dict[str, Any]:
    """Every parameter of the winning row, from its configuration key (the
    dataset's own record: a plug-in family's parameters need no registry), in
    the family's order where this process knows the family."""
    params = config_params(row["config_key"])
    order = [name for name in (family.param_names if family else ()) if name in params]
    names = order + [name for name in params if name not in order]
    return {name: plain_value(params[name]) for name in names if plain_value(params[name]) is not None}


def _dims(text: Any) -> list[int] | None:
    return [int(x) for x in str(text).split(",")] if isinstance(text, str) and text else None


# best.json's layout: 2 since an entry answers one operation of a problem (and names it).
FORMAT = 2


def best_json(entries: list[dict], device: Mapping) -> dict:
    return {
        "format": FORMAT,
        "gpu": device.get("name"),
        "gpu_slug": device.get("slug"),
        "compute_capability": device.get("compute_capability"),
        "problems": entries,
    }


# Words a C++ (or CUDA host) compiler will not take as a member's name: the
# keywords up to C++20 with the alternative tokens, and the macros g++ and
# nvcc's default GNU dialect predefine as 1.
_RESERVED_WORDS = frozenset(
    """
    alignas alignof and and_eq asm auto bitand bitor bool break case catch char char8_t char16_t char32_t class
    compl concept const consteval constexpr constinit const_cast continue co_await co_return co_yield decltype
    default delete do double dynamic_cast else enum explicit export extern false float for friend goto if inline
    int long mutable namespace new noexcept not not_eq nullptr operator or or_eq private protected public register
    reinterpret_cast requires return short signed sizeof static static_assert static_cast struct switch template
    this thread_local throw true try typedef typeid typename union unsigned using virtual void volatile wchar_t
    while xor xor_eq linux unix
    """.split()
)

# The members every problem's struct may have besides its parameters.
_STRUCT_MEMBERS = ("grid", "block", "bandwidth_gbs", "energy_optimal")


def _identifier(text: str) -> str:
    """``text`` as a C++ identifier: other characters as ``_`` and runs of
    ``_`` as one (a double underscore is the compiler's), a ``p_`` before one
    that would start with a digit or an underscore (``_X`` is the compiler's
    too), a ``_`` after a keyword."""
    name = re.sub(r"_+", "_", re.sub(r"[^A-Za-z0-9_]", "_", text))
    if not name[:1].isalpha():
        name = "p_" + name.lstrip("_")
    return name + "_" if name in _RESERVED_WORDS else name


def _spellings(names: Iterable[str], taken: Iterable[str] = (), *, each: bool = False) -> list[str]:
    """An identifier per name (``_identifier``), distinct from each other and
    from ``taken``: where two would be the same, or one is taken, the later
    gets ``_2``, ``_3``, ... A name that is already its own identifier is
    served first, so ``a_b`` stays ``a_b`` and ``a-b`` becomes ``a_b_2``
    whichever comes first in the data. Equal names get equal spellings, unless
    ``each``: then every position is a thing of its own (two problems whose
    family, dtype and size join into one text)."""
    names = list(names)
    plain = [_identifier(name) for name in names]
    first = {}
    for at, name in enumerate(names):
        first.setdefault(name, at)
    slots = range(len(names)) if each else sorted(first.values())
    used, spelled = set(taken), {}
    for at in sorted(slots, key=lambda at: plain[at] != names[at]):  # a stable sort
        spelling, count = plain[at], 1
        while spelling in used:
            count += 1
            spelling = f"{plain[at].rstrip('_')}_{count}"  # class_ -> class_2, not class__2 (the compiler's)
        used.add(spelling)
        spelled[at] = spelling
    return [spelled[at] if each else spelled[first[name]] for at, name in enumerate(names)]


_INT_RANGE = {"int": (-(2**31), 2**31), "long long": (-(2**63), 2**63)}


def _literal(value: Any) -> tuple[str, str]:
    """(C++ type, literal) of a parameter value."""
    if isinstance(value, bool):
        return "bool", "true" if value else "false"
    if isinstance(value, int):
        for kind, (low, high) in _INT_RANGE.items():
            if low <= value < high:
                return kind, str(value)
        # No C++ integer holds it: the digits as text keep it whole.
    if isinstance(value, float) and math.isfinite(value):
        return "double", repr(value)
    # A ? escaped: under C++14 and before, ??/ in a literal is a trigraph for \ and
    # ??/" would end the literal early, putting the rest of the text into the code.
    text = str(value).replace("\\", "\\\\").replace('"', '\\"').replace("?", "\\?")
    # A control character (a newline above all) would end the literal: written as an octal escape.
    return "const char*", '"' + re.sub(r"[\x00-\x1f\x7f]", lambda m: f"\\{ord(m.group()):03o}", text) + '"'


def _comment(value: Any) -> str:
    """``value`` as text on one ``//`` comment line: a line break would end
    the comment and put the rest of the text into the code."""
    return re.sub(r"[\x00-\x1f\x7f\x85\u2028\u2029]", " ", str(value))


def header_text(entries: list[dict], device: Mapping) -> str:
    """``best_configs.h``: the tuned constants per problem for this GPU's compute
    capability, the family defaults for any other."""
    sm = str(device.get("compute_capability", "0.0")).replace(".", "")  # "9.0" (export checks the form) -> 90
    lines = [
        f"// Tuned launch configurations measured on {_comment(device.get('name'))} "
        f"(compute capability {_comment(device.get('compute_capability'))}).",
        "// Generated by `python -m tuner best` from the run's measurements.parquet; do not edit.",
        "// Built for another GPU (-DTUNER_TARGET_SM=<major><minor>), each struct holds the family's defaults instead.",
        "#pragma once",
        "",
        "namespace tuner_best {",
        "",
        f"#if !defined(TUNER_TARGET_SM) || TUNER_TARGET_SM == {sm}",
        "constexpr bool tuned = true;",
    ]
    # Names come from the data (a family's, a configuration key's): two may
    # spell the same identifier, so each struct's name is made distinct here.
    names = _spellings([_plain_struct_name(entry) for entry in entries], taken=("tuned",), each=True)
    # The defaults' struct has the tuned one's members: a family parameter the measured configurations
    # lack (one added since they were measured) is in neither, so code using either builds for every GPU.
    defaults, unloaded = [], set()
    for entry in entries:
        family = REGISTRY.families.get(entry["family"])
        exported = (entry.get("exported") or entry)["params"]
        known = {p.name: p.default for p in family.params} if family else {}
        if family is not None and family.operation_param in exported:
            # Another GPU's struct of an operation keeps to that operation: the read's defaults still read.
            known[family.operation_param] = exported[family.operation_param]
        defaults.append({key: known.get(key, value) for key, value in exported.items()})
        if family is None:  # a plug-in not loaded here: its defaults are unknown, the tuned values stand in
            unloaded.add(entry["family"])
    # One spelling per parameter name for both structs of a problem (and its
    # energy_optimal), so that a program using one builds against the other.
    members = [_member_spellings(entry, default, name) for entry, default, name in zip(entries, defaults, names)]
    for entry, name, spelled in zip(entries, names, members):
        exported = (entry.get("exported") or entry)["params"]
        lines += _struct(entry, exported, tuned=True, name=name, spelled=spelled)
    lines += ["#else", "constexpr bool tuned = false;"]
    for entry, default, name, spelled in zip(entries, defaults, names, members):
        lines += _struct(entry, default, tuned=False, name=name, spelled=spelled, unloaded=entry["family"] in unloaded)
    lines += ["#endif", "", "}  // namespace tuner_best", ""]
    return "\n".join(lines)


def _plain_struct_name(entry: Mapping) -> str:
    operation = f"_{entry['operation']}" if entry.get("operation") is not None else ""
    return f"{entry['family']}{operation}_{entry['dtype']}_n{entry['n']}"


def _member_spellings(entry: Mapping, defaults: Mapping, struct_name: str) -> dict[str, str]:
    """Parameter name -> member name, for every parameter of the problem's
    structs: none may be one of the struct's own members, nor the struct's
    name (nor energy_optimal's: a member may not share its class's name)."""
    names = [*(entry.get("exported") or entry)["params"], *defaults, *((entry.get("energy_optimal") or {}).get("params") or ())]
    names = list(dict.fromkeys(names))
    return dict(zip(names, _spellings(names, taken=(*_STRUCT_MEMBERS, struct_name))))


def _spelling_comment(entry: Mapping, name: str, spelled: Mapping[str, str]) -> list[str]:
    """Where a name is spelled otherwise in C++, the original beside it (best.json keeps the originals)."""
    lines = []
    if name != _plain_struct_name(entry):
        operation = f", operation {_quoted(entry['operation'])}" if entry.get("operation") is not None else ""
        lines.append(f"// {name}: family {_quoted(entry['family'])}{operation}, dtype {_quoted(entry['dtype'])}, n={entry['n']}")
    renamed = [f"{_quoted(key)} as {member}" for key, member in spelled.items() if key != member]
    if renamed:
        lines.append(f"// Parameters spelled otherwise in C++ (a keyword, a leading digit, a clash): {', '.join(renamed)}")
    return lines


def _quoted(text: Any) -> str:
    # JSON's quoting: one line, ASCII, and where the name ends is plain to see.
    return json.dumps(str(text))


def _struct(entry: dict, params: Mapping, *, tuned: bool, name: str, spelled: Mapping[str, str],
            unloaded: bool = False) -> list[str]:  # fmt: skip
    body = [
        f"    static constexpr {kind} {spelled[key]} = {text};"
        for key, (kind, text) in ((k, _literal(v)) for k, v in params.items())
    ]
    # The defaults' struct has the tuned one's members, so that a program using
    # them builds for any GPU: zero launch geometry (not tuned: the program's own).
    exported = entry.get("exported") or entry
    for axis in ("grid", "block"):
        if exported.get(axis):
            values = ", ".join(map(str, exported[axis])) if tuned else "0, 0, 0"
            note = "" if tuned else "  // not tuned for this GPU: the program's own"
            body.append(f"    static constexpr unsigned {axis}[3] = {{{values}}};{note}")
    if exported.get("bandwidth_gbs") is not None:
        text = f"{exported['bandwidth_gbs']:.1f};  // measured" if tuned else "0.0;  // not measured on this GPU"
        body.append(f"    static constexpr double bandwidth_gbs = {text}")
    frugal = entry.get("energy_optimal")
    body += _energy_struct(frugal if tuned or not frugal else {"params": params}, spelled)
    comment = [*_operation_comment(entry), *_tie_comment(entry), *_spelling_comment(entry, name, spelled)] if tuned else []
    if unloaded:
        comment.append(f"// Family {_quoted(entry['family'])} was not loaded for this export (its defaults are unknown): "
                       "the tuned values stand in. Give its config (--config) to export its defaults.")  # fmt: skip
    return ["", *comment, f"struct {name} {{", *body, "};"]


def _energy_struct(frugal: Mapping | None, spelled: Mapping[str, str]) -> list[str]:
    """The configuration with the fewest joules per launch, as a nested struct
    beside the fastest one (where energy was measured; for another GPU, the
    defaults again)."""
    if not frugal:
        return []
    measured = f"  // {frugal['energy_j'] * 1e3:.1f} mJ per launch, measured" if "energy_j" in frugal else ""
    lines = [f"    struct energy_optimal {{{measured}"]
    lines += [f"        static constexpr {kind} {spelled[key]} = {text};"
              for key, (kind, text) in ((k, _literal(v)) for k, v in frugal["params"].items())]  # fmt: skip
    return lines + ["    };"]


def _operation_comment(entry: Mapping) -> list[str]:
    """Where the family's configurations do different work, which operation this struct answers."""
    if entry.get("operation") is None:
        return []
    return [f"// Operation {_quoted(entry['operation'])} of family {_quoted(entry['family'])}: chosen among the "
            "configurations that do this work; each operation has its own struct."]  # fmt: skip


def _tie_comment(entry: dict) -> list[str]:
    """The struct's comment: the tie set's size, why this member, and the other
    members (any of them is as good an answer on this GPU as far as the run could tell)."""
    members = entry.get("tie_set") or []
    if len(members) < 2:
        return []
    by = entry["ranked_by"]
    unit = "GFLOP/s" if by == "gflops" else "GB/s"
    chosen = entry["exported"]["config_key"]
    lines = [f"// {len(members)} configurations tie (95 % intervals of the median time overlap the winner's);",
             f"// exported: {entry['exported']['rule']}. The others:"]  # fmt: skip
    for member in members:
        if member["config_key"] != chosen:
            winner = " (the winner)" if member["config_key"] == entry["config_key"] else ""
            lines.append(f"//   {_params_text(member['params'])}: {member[by]:.1f} {unit}{winner}")
    return lines


def _params_text(params: Mapping) -> str:
    return _comment(", ".join(f"{k}={v}" for k, v in params.items()))


def export(folder: Path, out: Path) -> list[str]:
    """Write ``best.json`` and ``best_configs.h`` of the results ``folder`` into
    ``out``; returns a line per problem for the terminal.

    Raises:
        FileNotFoundError: ``folder`` lacks measurements.parquet or device.json.
        DamagedFile: one of them cannot be read (one line: which, why, the remedy).
    """
    from tuner.data.readback import damaged, read_json
    from tuner.data.results import read, write_json_atomic, write_text_atomic
    from tuner.errors import DamagedFile

    files = GpuFolder(folder)
    missing = [path.name for path in (files.measurements, files.device_json) if not path.is_file()]
    if missing:
        raise FileNotFoundError(
            f"must be a results folder with measurements.parquet and device.json, got {str(folder)!r}, which lacks {missing}"
        )
    device = read_json(files.device_json)
    capability = device.get("compute_capability")
    if not isinstance(capability, str) or not re.fullmatch(r"\d{1,2}\.\d", capability):
        # It goes into the header's #if as <major><minor>.
        raise DamagedFile(damaged(files.device_json, f"compute_capability is {str(capability)[:40]!r}, not <major>.<minor>"))
    measurements = files.measurements
    try:
        # Without needs, read gives a file lacking a column one of nulls: every row no configuration, or none
        # of them verified or of any problem, and best.json and the header were written empty.
        needs = ("config_key", "family", "dtype", "n", "status")
        dataset = read(measurements, needs=needs)
    except ValueError as error:  # read's only ValueError for a file: a column of needs lacking
        lacking = str(error).rsplit("lacks ", 1)[-1]
        raise DamagedFile(damaged(measurements, f"must have the columns {list(needs)}, lacks {lacking}")) from None
    _check_geometry(measurements, dataset)
    entries = best_entries(dataset)
    # Both files or neither: both are made and both places checked before either is written.
    document, header = best_json(entries, device), header_text(entries, device)
    answer = GpuFolder(out)
    for path in (answer.best_json, answer.best_header):
        _check_destination(path)
    write_json_atomic(document, answer.best_json)
    write_text_atomic(header, answer.best_header)
    lines = []
    for e in entries:
        lines += summary_lines(e)
    return lines + [f"{len(entries)} answers -> {out / 'best.json'}, {out / 'best_configs.h'}"]


_WHOLE_NUMBERS = re.compile(r"(\d+),(\d+),(\d+)", re.ASCII)  # ASCII: int() would take other scripts' digits


def _check_geometry(path: Path, dataset: pd.DataFrame) -> None:
    """The grid and block of every candidate row (status ok, not a yardstick)
    are three whole numbers that fit 32 bits: the header holds them as
    ``unsigned[3]`` (a larger one does not compile, other text is no number).

    Raises:
        DamagedFile: one line naming the file, the row and its configuration, and the value.
    """
    from tuner.data.readback import damaged
    from tuner.errors import DamagedFile

    candidate = candidate_rows(dataset)
    for column in ("grid", "block"):
        for at, (ok, text, key) in enumerate(zip(candidate, dataset[column], dataset["config_key"])):
            if not ok or not isinstance(text, str) or not text:
                continue  # no geometry: the header leaves it out (_dims)
            whole = _WHOLE_NUMBERS.fullmatch(text)
            if whole is None or any(int(number) >= 2**32 for number in whole.groups()):
                raise DamagedFile(damaged(path, f"{column} is {text[:80]!r} in row {at + 1} (configuration {str(key)[:120]!r}), "
                                                "but must be three whole numbers x,y,z, each below 2^32"))  # fmt: skip


def _check_destination(path: Path) -> None:
    """``path`` is absent or a regular file, which the rename of a temporary
    file replaces: over a directory the rename fails, over a pipe or a device
    it would put the file in its place, not write to it.

    Raises:
        FileExistsError: ``path`` is something else (the CLI's one line: the path and why).
    """
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISREG(mode):
        kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
        why = f"must be a regular file to replace, or absent, but is {kind}; nothing written"
        raise FileExistsError(errno.EEXIST, why, str(path))


_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISLNK, "a symbolic link"),
          (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))  # fmt: skip


def summary_lines(entry: dict) -> list[str]:
    """The terminal lines of one problem: the winner, the interval of its figure
    (from that of its median time), its tie set's size and, where the header
    exports another member, that member."""
    by = entry["ranked_by"]
    unit = "GFLOP/s" if by == "gflops" else "GB/s"
    value = entry[by]
    interval = entry.get("time_ms_interval")
    if interval and value is not None:
        # A figure is work over time: its interval is the time's, reversed.
        low, high = value * entry["time_ms_median"] / interval[1], value * entry["time_ms_median"] / interval[0]
        figure = f"{value:.0f} {unit} [{low:.0f}, {high:.0f}]"
    else:
        figure = f"{value:.0f} {unit}" if value is not None else "—"
    ties = entry.get("tie_count", 1)
    what = entry["family"] + (f" ({entry['operation']})" if entry.get("operation") is not None else "")
    line = f"{what:12s} {entry['dtype']:8s} n={entry['n']:<10d} {figure:>24s}  {ties:3d} tied  {entry['params']}"
    exported = entry.get("exported")
    if exported and exported["config_key"] != entry["config_key"]:
        return [line, f"{'':36s} header exports {exported['params']} ({exported[by]:.0f} {unit}): {exported['rule']}"]
    return [line]
