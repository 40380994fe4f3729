"""Two runs compared configuration by configuration: ``tuner compare A B``.

A and B are results folders (their ``measurements.parquet``) or Parquet files
of results rows: two GPUs, drivers, commits or configs. Every verified
configuration present in both (the same family, dtype, n and configuration
key; the peaks' yardsticks too) gets the ratio ``B / A`` of its median times,
the 95 % interval of that ratio and a verdict. Pure pandas: the figure is
``tuner.report.compare_figure``.

**The interval.** Each median has its 95 % interval (``tuner.data.intervals``:
order statistics, or the quantiles of older rows); the ratio's is
``exp(log B - log A -+ sqrt(d_A^2 + d_B^2))``, the two sides' log half-widths
in quadrature (independent measurements), the lower end pairing B's lower
half-width with A's upper one.

**The verdict**, with a margin ``m`` (default 0.5 %, nvbench-compare-robust's
default both for its clear gap and for its "same centre"):

- ``SLOWER``: the whole interval lies above ``1 + m``: B is slower by more than
  the margin, 95 % sure. ``FASTER``: the whole interval lies below ``1 / (1 + m)``.
- ``SAME``: the ratio itself is within the margin and its interval within
  twice the margin: the two runs agree within ``m``, and noise could not hide a
  difference of more than ``2 m``.
- ``AMBIGUOUS``: anything else: the interval straddles a margin, or is too wide
  to say (noisy rows), or there is no 95 % interval: a row without one (older
  or foreign rows) or of fewer than 6 samples (``intervals.SHORT``: the timer's
  wall-time cap stops a slow kernel early), whose min-to-max range is not one.

Each verdict is about one configuration, against the noise within each run.
It is no guarantee over many configurations at once, and two runs differ by
more than one run's noise: two fresh runs of the same code on one H100 called
14 of 2060 configurations FASTER and 8 SLOWER, one of them by 2.2 %
(``benchmarks/results/compare-two-fresh-h100.txt``). About 1 % of the
configurations of an unchanged run can be expected to get a verdict, so a
check over thousands wants a higher ``--threshold`` or a regression that
holds on a rerun.

Like nvbench-compare-robust (SLOW/FAST only on a clear gap between the two
measurements, SAME only when their centres are close and their spread small,
UNDECIDED otherwise) a difference must clear the noise and the margin to be
called, and SAME must be shown, not assumed from a lack of evidence. The
differences: nvbench's intervals are sample spreads (min to third quartile),
ours are the medians' confidence intervals, which narrow as samples grow, so a
1 % change is called at low noise; nvbench confirms a verdict with SM-clock
adjusted cycles, where we give the clock ratio beside the verdict (rows keep
the median SM clock) but do not let it decide: for memory-bound kernels the
memory clock, not the SM clock, sets the pace.

**A regression** (exit status 1 of ``tuner compare``): a configuration whose
verdict is SLOWER and whose ratio is at least ``1 + threshold`` (default 2 %).
An AMBIGUOUS configuration never fails a check: its noise, not its kernel,
would (they are counted apart).

A configuration measured more than once on one side (by a sweep and a study)
is paired with the row of the same source on the other side where there is
one, else with the other side's row of the most samples.
"""

from __future__ import annotations

import math
import os
import stat
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from tuner.data.intervals import MARGIN, SHORT, ratio_intervals, row_intervals
from tuner.data.paths import GpuFolder
from tuner.data.readback import mode_kind, path_mode
from tuner.data.results import temporary_beside
from tuner.data.t4 import PARQUET_MAGIC, check_folder_above, file_head, file_id

KEYS = ["family", "dtype", "n", "config_key"]
PROBLEM = ["family", "dtype", "n"]
THRESHOLD = 0.02
VERDICTS = ("FASTER", "SAME", "SLOWER", "AMBIGUOUS")


def load(path: str | Path) -> pd.DataFrame:
    """The results rows of a results folder (its measurements.parquet) or a Parquet file.

    Raises:
        FileNotFoundError: neither exists at ``path``.
    """
    from tuner.data.results import read

    path = Path(path)
    if path.is_dir():
        path = GpuFolder(path).measurements
    if not path.is_file():
        raise FileNotFoundError(f"must be a results folder with measurements.parquet or a Parquet file, got {str(path)!r}")
    return read(path)


def measured(frame: pd.DataFrame) -> pd.DataFrame:
    """The verified rows with a median time, their interval (``low``, ``high``, ``how``) joined;
    no ends where the interval is not a 95 % one (fewer than 6 samples)."""
    ok = frame[(frame["status"] == "ok") & frame["time_ms_median"].notna()].reset_index(drop=True)  # a unique index to join on
    joined = ok.join(row_intervals(ok))
    joined.loc[joined["how"] == SHORT, ["low", "high"]] = np.nan
    return joined


def _most_samples(rows: pd.DataFrame) -> pd.DataFrame:
    order = rows.assign(_samples=pd.to_numeric(rows["samples"], errors="coerce").fillna(0))
    return order.sort_values("_samples", ascending=False, kind="stable").drop_duplicates(KEYS).drop(columns="_samples")


def pair(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    """One row per configuration in both (``measured`` rows): A's columns
    suffixed ``_a``, B's ``_b``, the keys unsuffixed."""
    columns = [*KEYS, "source", "time_ms_median", "low", "high", "how", "samples", "sm_clock_mhz"]
    a, b = a[columns], b[columns]
    same_source = a.merge(b, on=[*KEYS, "source"], suffixes=("_a", "_b"))
    same_source["source_a"] = same_source["source_b"] = same_source.pop("source")
    same_source = same_source.assign(_samples=pd.to_numeric(same_source["samples_a"], errors="coerce").fillna(0)
                                     + pd.to_numeric(same_source["samples_b"], errors="coerce").fillna(0))  # fmt: skip
    same_source = same_source.sort_values("_samples", ascending=False, kind="stable").drop_duplicates(KEYS)
    done = pd.MultiIndex.from_frame(same_source[KEYS]) if len(same_source) else pd.MultiIndex.from_tuples([], names=KEYS)

    def rest(side: pd.DataFrame) -> pd.DataFrame:
        return _most_samples(side[~pd.MultiIndex.from_frame(side[KEYS]).isin(done)])

    others = rest(a).merge(rest(b), on=KEYS, suffixes=("_a", "_b"))
    paired = pd.concat([same_source.drop(columns="_samples"), others], ignore_index=True)
    return paired.sort_values(KEYS, kind="stable").reset_index(drop=True)


def verdict(ratio: float, low: float, high: float, margin: float = MARGIN) -> str:
    """SAME, FASTER, SLOWER or AMBIGUOUS for ``ratio`` (B / A) with its 95 % interval [low, high]."""
    if not all(math.isfinite(x) and x > 0 for x in (ratio, low, high)):
        return "AMBIGUOUS"
    if low > 1 + margin:
        return "SLOWER"
    if high < 1 / (1 + margin):
        return "FASTER"
    band = math.log1p(margin)
    if abs(math.log(ratio)) <= band and math.log(high) <= 2 * band and math.log(low) >= -2 * band:
        return "SAME"
    return "AMBIGUOUS"


def compare(a: pd.DataFrame, b: pd.DataFrame, *, margin: float = MARGIN) -> pd.DataFrame:
    """Per configuration in both results tables: ``ratio`` (B / A of the median
    times), ``ratio_low``, ``ratio_high`` (its 95 % interval), ``verdict`` and
    ``clock_ratio`` (B / A of the median SM clocks, where both were read)."""
    table = pair(measured(a), measured(b))
    if table.empty:
        return table.assign(ratio=[], ratio_low=[], ratio_high=[], verdict=[], clock_ratio=[])
    ratio, low, high = ratio_intervals(*(table[c].to_numpy(dtype="float64") for c in
                                         ("time_ms_median_a", "low_a", "high_a", "time_ms_median_b", "low_b", "high_b")))  # fmt: skip
    table["ratio"], table["ratio_low"], table["ratio_high"] = ratio, low, high
    table["verdict"] = [verdict(r, lo, hi, margin) for r, lo, hi in zip(ratio, low, high)]
    clock_a = pd.to_numeric(table["sm_clock_mhz_a"], errors="coerce")
    clock_b = pd.to_numeric(table["sm_clock_mhz_b"], errors="coerce")
    table["clock_ratio"] = (clock_b / clock_a).astype("float64")
    return table


def regressions(table: pd.DataFrame, threshold: float = THRESHOLD) -> pd.DataFrame:
    """The configurations SLOWER by at least ``threshold`` (the ratio itself), worst first."""
    slower = table[(table["verdict"] == "SLOWER") & (table["ratio"] >= 1 + threshold)]
    return slower.sort_values("ratio", ascending=False)


def _geomean(values: pd.Series) -> float:
    values = values[values > 0]
    return float(np.exp(np.log(values).mean())) if len(values) else float("nan")


def by_problem(table: pd.DataFrame) -> pd.DataFrame:
    """Per problem: configurations compared, each verdict's count, and the
    geometric mean, least and greatest of the ratios."""
    rows = []
    for (family, dtype, n), group in table.groupby(PROBLEM, sort=True):
        counts = group["verdict"].value_counts()
        rows.append({"family": family, "dtype": dtype, "n": int(n), "configurations": len(group),
                     **{v: int(counts.get(v, 0)) for v in VERDICTS},
                     "geomean": _geomean(group["ratio"]), "min": group["ratio"].min(), "max": group["ratio"].max()})  # fmt: skip
    return pd.DataFrame(rows, columns=["family", "dtype", "n", "configurations", *VERDICTS, "geomean", "min", "max"])


def describe(frame: pd.DataFrame) -> str:
    """A side in a few words: its GPU(s) and commit(s)."""

    def values(column: str) -> str:
        if column not in frame or not frame[column].notna().any():
            return "?"
        return "/".join(str(v) for v in frame[column].dropna().value_counts().index[:2])

    return f"{values('gpu')} at {values('git_commit')}"


def key_differences(a: pd.DataFrame, b: pd.DataFrame) -> list[str]:
    """Per family, the parameters one side's configuration keys name and the
    other's do not (rows measured before a parameter existed): such rows never
    pair, and a reader should know why."""
    from tuner.data.results import config_params

    def names(frame: pd.DataFrame) -> dict[str, set[str]]:
        out: dict[str, set[str]] = {}
        for family, keys in frame.groupby("family")["config_key"]:
            out[family] = set().union(*(config_params(k) for k in keys.dropna().unique()))
        return out

    in_a, in_b = names(a), names(b)
    lines = []
    for family in sorted(set(in_a) & set(in_b)):
        only_a, only_b = sorted(in_a[family] - in_b[family]), sorted(in_b[family] - in_a[family])
        if only_a or only_b:
            parts = [
                f"A's keys name {', '.join(only_a)}" if only_a else "",
                f"B's keys name {', '.join(only_b)}" if only_b else "",
            ]
            lines.append(f"{family}: {'; '.join(p for p in parts if p)} (the other side's do not)")
    return lines


def winners(a: pd.DataFrame, b: pd.DataFrame) -> list[str]:
    """Is the answer stable across the two runs? Per problem in both, whether
    B's winner lies in A's tie set (``tuner.data.ties``, as ``best.json``
    gives them): a line of counts, then a line per problem where it does not."""
    from tuner.data.export import answer_key, best_entries, candidate_rows
    from tuner.data.results import to_frame
    from tuner.data.ties import operations

    # Per answer: a family whose configurations do different work (copy: copy and read) has one per operation.
    first, second = ({answer_key(e): e for e in best_entries(to_frame(side, keep_unknown=True))} for side in (a, b))
    common = sorted(first.keys() & second.keys())
    if not common:
        return []
    same = sum(first[k]["config_key"] == second[k]["config_key"] for k in common)
    rows_a = measured(a)  # a yardstick's rows (peaks) are no candidates, as in best_entries and _behind_in
    rows_a = rows_a[candidate_rows(rows_a)]
    rows_a = rows_a.assign(_operation=operations(rows_a).fillna(""))
    measured_in_a = {(*key[:3], key[3] or None): set(rows["config_key"])
                     for key, rows in rows_a.groupby([*PROBLEM, "_operation"])}  # fmt: skip
    unmeasured = [k for k in common if second[k]["config_key"] not in measured_in_a.get(k, set())]
    outside = [k for k in common if k not in unmeasured and second[k]["config_key"] not in {m["config_key"] for m in first[k]["tie_set"]}]
    judged = len(common) - len(unmeasured)
    lines = [
        f"winners: the same in {same} of {len(common)} problems; B's winner lies in A's tie set in {judged - len(outside)} "
        f"of {judged}" + (f" ({len(unmeasured)} more where A never measured B's winner)" if unmeasured else "")
    ]
    for key in outside:
        behind = _behind_in(a, key, second[key]["config_key"], first[key]["ranked_by"])
        lines.append(
            f"  not in {_answer_text(key)}: B's winner {second[key]['config_key']} (A's tie set: {first[key]['tie_count']}; "
            f"it was {behind:.2%} behind A's winner in A)"
        )
    for key in unmeasured:
        lines.append(f"  not measured in A: {_answer_text(key)}: B's winner {second[key]['config_key']}")
    return lines


def _answer_text(key: tuple) -> str:
    """``copy float32 n=1024``, with the operation where the family has several: ``copy (read) float32 n=1024``."""
    family, dtype, n, operation = key
    return f"{family}{f' ({operation})' if operation is not None else ''} {dtype} n={n}"


def _behind_in(frame: pd.DataFrame, key: tuple, config_key: str, ranked_by: str) -> float:
    """How far ``config_key`` ranked behind the winner of answer ``key``
    (family, dtype, n, operation) in ``frame``."""
    from tuner.data import ties
    from tuner.data.export import candidate_rows

    rows = measured(frame)
    rows = rows[candidate_rows(rows)]
    rows = rows[(rows["family"] == key[0]) & (rows["dtype"] == key[1]) & (rows["n"] == key[2])]
    rows = rows[(ties.operations(rows).fillna("") == (key[3] or "")).to_numpy(dtype=bool)]
    table = ties.rank(rows.drop(columns=["low", "high", "how"]), ranked_by).set_index("config_key")
    return float(table.loc[config_key, "behind"])


def summary_lines(table: pd.DataFrame, a: pd.DataFrame, b: pd.DataFrame, *, names: tuple[str, str],
                  margin: float = MARGIN, threshold: float = THRESHOLD, top: int = 10) -> list[str]:  # fmt: skip
    """What ``tuner compare`` prints: the two sides, the verdict counts, the
    per-problem table and the regressions."""
    ok_a, ok_b = (side[side["status"] == "ok"].drop_duplicates(KEYS) for side in (a, b))
    counts = table["verdict"].value_counts()
    lines = [
        f"A: {names[0]} ({describe(a)}), {len(ok_a)} verified configurations",
        f"B: {names[1]} ({describe(b)}), {len(ok_b)} verified configurations",
        f"{len(table)} configurations in both (A only {len(ok_a) - len(table)}, B only {len(ok_b) - len(table)}); "
        f"B / A of the median time, 95 % interval; margin {margin:.2%}, regression threshold {threshold:.2%}",
        "verdicts: "
        + ", ".join(f"{v} {int(counts.get(v, 0))}" for v in VERDICTS)
        + f"; B / A geometric mean {_geomean(table['ratio']):.4f}",
    ]
    unsure = int(table["ratio_low"].isna().sum()) if len(table) else 0
    if unsure:
        lines.append(f"  of which AMBIGUOUS for want of a 95 % interval (a row without one, or of fewer than 6 samples): {unsure}")
    lines += [f"  unpaired: {line}" for line in key_differences(ok_a, ok_b)]
    lines += winners(a, b)
    clocks = table["clock_ratio"].dropna()
    if len(clocks):
        lines.append(f"SM clock B / A: median {clocks.median():.3f} (shown, not used in the verdicts)")
    problems = by_problem(table)
    text = problems.assign(geomean=problems["geomean"].map("{:.4f}".format), min=problems["min"].map("{:.4f}".format),
                           max=problems["max"].map("{:.4f}".format))  # fmt: skip
    lines += ["", text.to_string(index=False), ""]
    worse = regressions(table, threshold)
    ambiguous = table[(table["verdict"] == "AMBIGUOUS") & (table["ratio"] >= 1 + threshold)]
    lines.append(f"regressions (SLOWER by {threshold:.2%} or more): {len(worse)}"
                 + (f"; AMBIGUOUS with a ratio that high: {len(ambiguous)} (noise, not counted)" if len(ambiguous) else ""))  # fmt: skip
    for _, r in worse.head(top).iterrows():
        lines.append(f"  {r['family']} {r['dtype']} n={r['n']} {r['config_key']}: {r['ratio']:.4f} "
                     f"[{r['ratio_low']:.4f}, {r['ratio_high']:.4f}]")  # fmt: skip
    if len(worse) > top:
        lines.append(f"  ... and {len(worse) - top} more")
    return lines


# Where a results folder keeps what was measured, and the files that make a folder one.
MEASURED_FOLDERS = ("sweeps", "studies", "profiles")
_FOLDER = GpuFolder(Path())
RESULTS_FOLDER_FILES = tuple(path.name for path in (_FOLDER.measurements, _FOLDER.device_json, _FOLDER.peaks_json, _FOLDER.peaks_parquet))


def side_file(path: str | Path) -> Path:
    """The file ``load`` reads for a side: a folder's measurements.parquet, else the path itself."""
    path = Path(path)
    return GpuFolder(path).measurements if path.is_dir() else path


def check_outputs(a: str, b: str, *, figure: str | None = None, out: str | None = None) -> None:
    """Refuse, before anything is read or written, a ``--table`` or ``--figure``
    that could not be written as a file, or that would write over what was
    measured: an input of A or B (by any name: a link, a hard link), a results
    folder's measurements.parquet or a file in its sweeps/, studies/ or
    profiles/, or an existing Parquet file that is no comparison table (a
    results table, with its ``status`` column, above all); and the two naming
    one file. Both are checked, so that neither is written where the other
    would fail.

    Raises:
        ValueError: one line naming the option, the rule and the value.
    """
    inputs = {"A": side_file(a), "B": side_file(b)}
    outputs = [(option, Path(path)) for option, path in (("--table", out), ("--figure", figure)) if path]
    for option, path in outputs:
        _check_output(option, path, inputs)
    if len(outputs) == 2 and _same_file(outputs[0][1], outputs[1][1]):
        raise ValueError(f"--figure: must not be the --table file (one would replace the other), got {figure!r}, the "
                         f"same file as {out!r}")  # fmt: skip


def _check_output(option: str, path: Path, inputs: dict[str, Path]) -> None:
    got = f"got {str(path)!r}"
    mode = path_mode(path, "a file to write (or none yet)")
    if mode is not None and stat.S_ISDIR(mode):
        raise ValueError(f"{option}: must name a file to write, {got}, a folder")
    if mode is not None and not stat.S_ISREG(mode):  # a rename would put the file in place of a pipe, not write to it
        raise ValueError(f"{option}: must name a file to write (or none yet), {got}, {mode_kind(mode)}")
    for side, read in inputs.items():
        if _same_file(path, read):
            raise ValueError(f"{option}: must not be an input of A or B (its measurements would be lost), {got}, "
                             f"{side}'s {str(read)!r}")  # fmt: skip
    real = Path(os.path.realpath(path))  # links followed: where the file would land
    if real.name.lower() == "measurements.parquet":
        raise ValueError(f"{option}: must not be a results folder's measurements.parquet (its measurements would be lost), {got}")
    for above in real.parents:
        if above.name in MEASURED_FOLDERS and _results_folder(above.parent):
            raise ValueError(f"{option}: must not be in a results folder's {', '.join(f'{n}/' for n in MEASURED_FOLDERS)} "
                             f"(measurements live there), {got}, in {str(above)!r}")  # fmt: skip
    if mode is None:
        check_folder_above(option, path)
        return
    what = _measured_parquet(path)
    if what:
        raise ValueError(f"{option}: must not be a Parquet file other than a comparison table (measurements would be "
                         f"lost), {got}, {what}")  # fmt: skip


def _same_file(first: Path, second: Path) -> bool:
    """Whether two paths name one file: the same place once links are followed, or the same inode (a hard link)."""
    if os.path.realpath(first) == os.path.realpath(second):
        return True
    first_id = file_id(first)
    return first_id is not None and first_id == file_id(second)


def _results_folder(folder: Path) -> bool:
    """Whether ``folder`` is a results folder: it holds one of ``RESULTS_FOLDER_FILES``, or Parquet
    tables in its sweeps/ or studies/."""
    try:
        return any(path_mode(folder / name, "a readable file") is not None for name in RESULTS_FOLDER_FILES) or any(
            any((folder / name).glob("*.parquet")) for name in ("sweeps", "studies")
        )
    except (ValueError, OSError):  # a folder that cannot be looked at: taken for one, to be safe
        return True


def _measured_parquet(path: Path) -> str | None:
    """What an existing file is where it is a Parquet file that is no comparison table
    (one this command wrote, which it may write again); None otherwise."""
    if not file_head(path).startswith(PARQUET_MAGIC):
        return None
    import pyarrow.parquet as pq

    try:
        names = set(pq.read_schema(path).names)
    except Exception as error:  # noqa: BLE001 - pyarrow's errors: it may be a damaged table of measurements
        return f"a Parquet file that does not read ({type(error).__name__})"
    if "status" in names:
        return "a results table (it has a status column)"
    if not {"ratio", "verdict"} <= names:
        return "a Parquet file with no ratio and verdict columns"
    return None


def write_outputs(table: pd.DataFrame, *, figure: str | None, out: str | None,
                  draw: Callable[[pd.DataFrame, Path], object] | None = None) -> list[str]:  # fmt: skip
    """Write the table (.csv or .parquet) and the figure (``draw(table, path)``,
    the caller's: ``tuner.report.compare_figure``), both or neither: each is
    made as a temporary file beside its place, and both are renamed into place
    only once both are made. Returns the lines saying so."""
    staged: list[tuple[Path, Path]] = []
    lines = []
    try:
        if out:
            out_path = Path(out)
            if out_path.suffix.lower() == ".csv":
                staged.append((_stage(out_path, lambda tmp: table.to_csv(tmp, index=False)), out_path))
            else:
                staged.append((_stage(out_path, lambda tmp: table.to_parquet(tmp, index=False)), out_path))
            lines.append(f"table -> {out}")
        if figure:
            if draw is None:
                raise ValueError(f"--figure: must come with a way to draw it, got {figure!r} and none")
            figure_path = Path(figure)
            staged.append((_stage(figure_path, lambda tmp: draw(table, tmp)), figure_path))
            lines.append(f"figure -> {figure_path}")
        for tmp, final in staged:
            os.replace(tmp, final)
    finally:
        for tmp, _ in staged:
            tmp.unlink(missing_ok=True)
    return lines


def _stage(path: Path, write) -> Path:
    """``write(tmp)`` to a temporary file beside ``path`` of its suffix (the figure's format); returns it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = temporary_beside(path, path.suffix)
    os.close(fd)
    try:
        write(Path(tmp))
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return Path(tmp)


def run(a: str, b: str, *, margin: float = MARGIN, threshold: float = THRESHOLD, figure: str | None = None,
        out: str | None = None, draw: Callable[..., object] | None = None) -> tuple[pd.DataFrame, list[str]]:  # fmt: skip
    """``tuner compare``: the arguments checked (the outputs too: ``check_outputs``),
    both sides read and compared, the per-configuration table written to ``out``
    (.csv or .parquet) and the figure to ``figure`` if given, both or neither.
    ``draw(table, path, names=, margin=, threshold=)`` draws the figure
    (``tuner.report.compare_figure.draw``: the caller's, as the data layer
    draws nothing). Returns (the table, the lines to print).

    Raises:
        ValueError: one line naming the bad argument, its rule and its value.
    """
    if not 0 < margin < 0.5:
        raise ValueError(f"--margin: must be a fraction above 0 and below 0.5, got {margin}")
    if not 0 < threshold < 1:
        raise ValueError(f"--threshold: must be a fraction above 0 and below 1, got {threshold}")
    if figure and Path(figure).suffix.lower() not in (".png", ".svg", ".pdf"):
        raise ValueError(f"--figure: must name a .png, .svg or .pdf file, got {figure!r}")
    if out and Path(out).suffix.lower() not in (".csv", ".parquet"):
        raise ValueError(f"--table: must name a .csv or .parquet file, got {out!r}")
    check_outputs(a, b, figure=figure, out=out)
    sides = []
    for name, path in (("A", a), ("B", b)):
        try:
            sides.append(load(path))
        except FileNotFoundError as error:
            raise ValueError(f"{name}: {error}") from None
    table = compare(*sides, margin=margin)
    if table.empty:
        raise ValueError(
            f"A, B: must share a verified configuration (family, dtype, n, config_key), got none in common between {a!r} and {b!r}"
        )
    lines = summary_lines(table, *sides, names=(a, b), margin=margin, threshold=threshold)
    drawing = None if draw is None else (lambda rows, path: draw(rows, path, names=(a, b), margin=margin, threshold=threshold))
    lines += write_outputs(table, figure=figure, out=out, draw=drawing)
    return table, lines
