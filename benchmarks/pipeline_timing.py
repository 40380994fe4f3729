"""Where a cold ``snakemake --cores 1`` spends its time: one row per job.

    python benchmarks/pipeline_timing.py --results /tmp/cold [--log run.log] [-- extra snakemake args]

Runs the pipeline from an empty results folder (``results_dir`` set to
``RESULTS/results``, which holds the cubin cache too: nvcc compiles everything;
the pipeline refuses a results folder holding files it did not write, so its
log and this script's tables are kept beside it, in ``RESULTS``),
then prints each job's wall seconds from Snakemake's log (its clock has
one-second resolution) with the measuring phases the sweep and study stages
print (inputs, reference, upload, compile, load, verify, time), the profile
stage's steps (query metrics, harness under ncu, import report) and its
harness's phases, the report's steps (its figures: blog tables, waiting for
its drawings; then its counters and documents), and the whole run's wall time.
With ``--parse LOG`` it only reads a log written earlier. Writes
``RESULTS/snakemake.log``, ``RESULTS/pipeline-timing.json`` and ``.txt``.

``--against REV`` times another commit's tree first, on the same GPU and the
same cold start (its own empty results folder, cubin cache and CuPy kernel
cache), then this tree, and prints each job's seconds side by side::

    python benchmarks/pipeline_timing.py --results /tmp/cold --against c716673

The other tree is ``git archive REV`` of this checkout, under
``RESULTS/tree-<commit>``, or, on a machine without the history, a folder that
``git archive REV | tar -x -C FOLDER`` filled elsewhere (``--against FOLDER``,
its name taken for the commit); each run's folder (its results folder ``results``, its
Snakemake log ``snakemake.log`` and its CuPy kernel cache ``cupy-cache``) is
``RESULTS/<commit>`` and ``RESULTS/this``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tuner.host import OneLineParser  # noqa: E402

STAMP = re.compile(r"^\[(\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4})\]$")
STARTS = re.compile(r"^(?:local)?rule (\S+):$")
JOBID = re.compile(r"^\s+jobid: (\d+)$")
FINISHED = re.compile(r"^Finished jobid: (\d+) \(Rule: (\S+)\)$")
# Lines the stages print, keyed by the job's rule: a sweep's or study's
# measuring phases, the profile stage's steps and its harness's phases, and the report's two jobs' steps.
PHASES = re.compile(r"^(?:(?P<stage>sweep|study) (?P<name>\S+) phases|(?P<rule>profile|report|report draft) steps"
                    r"|profiled harness phases): (?P<parts>.*)$")  # fmt: skip
RULE_PREFIX = {"sweep": "sweep_", "study": "tune_"}
RULE_OF_STEPS = {"profile": "profile", "report draft": "draw_report", "report": "plot_report", None: "profile"}  # None: the profiled harness
PART = re.compile(r"^(.*) ([\d.]+) s$")


def parse(log: str) -> tuple[list[dict], dict[str, dict[str, float]]]:
    """Jobs (rule, start, end, seconds) in finishing order, and the phases
    each sweep, study or profile printed (rule -> phase -> seconds, summed
    over worker processes)."""
    now = None
    started: dict[str, tuple[str, dt.datetime]] = {}
    pending_rule = None
    jobs, phases = [], {}
    for line in log.splitlines():
        if m := STAMP.match(line):
            now = dt.datetime.strptime(m.group(1), "%a %b %d %H:%M:%S %Y")
        elif m := STARTS.match(line):
            pending_rule = (m.group(1), now)
        elif (m := JOBID.match(line)) and pending_rule:
            started[m.group(1)] = pending_rule
            pending_rule = None
        elif m := FINISHED.match(line):
            rule, start = started.pop(m.group(1), (m.group(2), now))
            jobs.append({"rule": rule, "start": start.isoformat(), "seconds": (now - start).total_seconds()})
        elif m := PHASES.match(line):
            rule = RULE_PREFIX[m["stage"]] + m["name"] if m["stage"] else RULE_OF_STEPS[m["rule"]]
            seen = phases.setdefault(rule, {})
            for part in m["parts"].split(";")[0].split(", "):  # after ";": notes, not phases
                name, seconds = PART.match(part).groups()
                seen[name] = round(seen.get(name, 0.0) + float(seconds), 2)
    return jobs, phases


def table(jobs: list[dict], phases: dict[str, dict[str, float]], wall_s: float | None) -> str:
    lines = [f"{'job':<34} {'s':>6}  phases and steps (s)"]
    for job in jobs:
        detail = phases.get(job["rule"])
        text = ", ".join(f"{k} {v:.1f}" for k, v in detail.items() if not k.endswith("(all)")) if detail else ""
        lines.append(f"{job['rule']:<34} {job['seconds']:>6.0f}  {text}")
    total = sum(job["seconds"] for job in jobs)
    lines.append(f"{'sum of jobs':<34} {total:>6.0f}")
    if wall_s is not None:
        lines.append(f"{'wall (snakemake --cores 1)':<34} {wall_s:>6.0f}")
    return "\n".join(lines)


def cold_run(tree: Path, work: Path, extra: list[str], env: dict[str, str], log: Path | None = None) -> tuple[list[str], int, float, str]:
    """``snakemake --cores 1`` of ``tree`` from an empty ``work`` (emptied first), its results folder ``work/results``
    (which holds its cubin cache): (its command, exit status, wall seconds, Snakemake's output, kept in ``log``,
    default ``work/snakemake.log``: beside the results folder, which the pipeline keeps for its own files)."""
    shutil.rmtree(work, ignore_errors=True)
    results = work / "results"
    results.mkdir(parents=True)
    log = log or work / "snakemake.log"
    command = ["snakemake", "--cores", "1", "--config", f"results_dir={results}", *extra]
    start = time.monotonic()
    with log.open("w") as out:
        code = subprocess.call(command, cwd=tree, stdout=out, stderr=subprocess.STDOUT, env=env)
    return command, code, time.monotonic() - start, log.read_text()


def resolve(rev: str) -> str | None:
    """``rev``'s commit in this checkout, as 12 hex digits, or None where it names none."""
    found = subprocess.run(["git", "rev-parse", "--verify", "--quiet", "--short=12", f"{rev}^{{commit}}"], cwd=ROOT,
                           capture_output=True, text=True)  # fmt: skip
    return found.stdout.strip() if found.returncode == 0 and found.stdout.strip() else None


def checkout(commit: str, dest: Path) -> None:
    """``git archive`` of ``commit`` of this checkout into ``dest`` (emptied first)."""
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    archive = subprocess.run(["git", "archive", "--format=tar", commit], cwd=ROOT, capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)


def side_by_side(runs: dict[str, tuple[list[dict], float]]) -> str:
    """Each job's seconds in each run (label -> (jobs, wall)), a column per run, jobs in the first run's order."""
    labels = list(runs)
    seconds = {label: {} for label in labels}
    for label, (jobs, _) in runs.items():
        for job in jobs:
            seconds[label][job["rule"]] = seconds[label].get(job["rule"], 0.0) + job["seconds"]
    rules = list(dict.fromkeys(rule for label in labels for rule in seconds[label]))
    lines = [f"{'job':<34}" + "".join(f" {label:>12}" for label in labels)]
    for rule in rules:
        lines.append(f"{rule:<34}" + "".join(f" {seconds[label][rule]:>12.0f}" if rule in seconds[label] else f" {'-':>12}"
                                              for label in labels))  # fmt: skip
    lines.append(f"{'sum of jobs':<34}" + "".join(f" {sum(seconds[label].values()):>12.0f}" for label in labels))
    lines.append(f"{'wall (snakemake --cores 1)':<34}" + "".join(f" {runs[label][1]:>12.1f}" for label in labels))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="python benchmarks/pipeline_timing.py", description=__doc__,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", type=Path, help="folder for the run (emptied first): its results folder RESULTS/results, "
                                                     "its log and the timing tables")
    parser.add_argument("--log", type=Path, help="where to keep Snakemake's output (default: RESULTS/snakemake.log)")
    parser.add_argument("--parse", type=Path, help="only read this Snakemake output and print the table")
    parser.add_argument("--against", metavar="REV", help="also time this commit's tree, first, on the same cold start")
    parser.add_argument("extra", nargs="*", help="more snakemake arguments (after --)")
    args = parser.parse_args(argv)
    if args.parse:
        jobs, phases = parse(args.parse.read_text())
        print(table(jobs, phases, None))
        return 0
    if args.results is None:
        parser.error("--results is required unless --parse is given")
    if args.against:
        return compare(args.results, args.against, args.extra, parser)
    command, code, wall, log = cold_run(ROOT, args.results, args.extra, dict(os.environ), args.log)
    jobs, phases = parse(log)
    text = table(jobs, phases, wall)
    print(text)
    record = {"command": " ".join(command), "exit": code, "wall_s": round(wall, 1), "jobs": jobs, "phases": phases}
    (args.results / "pipeline-timing.json").write_text(json.dumps(record, indent=2))
    (args.results / "pipeline-timing.txt").write_text(text + "\n")
    return code


def compare(results: Path, rev: str, extra: list[str], parser: OneLineParser) -> int:
    """``--against REV``: REV's tree cold, then this tree cold, on this GPU; their jobs side by side. REV is a
    commit of this checkout, or a folder holding a tree (named by its commit) where there is no history."""
    given = Path(rev)
    if given.is_dir() and (given / "Snakefile").is_file():
        commit, tree = given.resolve().name, given.resolve()
    else:
        commit = resolve(rev)
        if commit is None:
            parser.refuse(f"--against: must name a commit of this checkout ({ROOT}) or a folder holding a tree with its "
                          f"Snakefile, got {rev!r}")  # fmt: skip
        tree = results / f"tree-{commit}"  # beside its run's folder, which each run empties
        checkout(commit, tree)
    runs, codes = {}, {}
    # The other tree's rows name its commit: it is no git checkout to ask.
    for label, where, env in ((commit, tree, {**os.environ, "TUNER_GIT_COMMIT": commit}), ("this", ROOT, dict(os.environ))):
        # Each run with its own empty CuPy kernel cache too: the CUB peak compiles its kernels cold in both.
        env["CUPY_CACHE_DIR"] = str(results / label / "cupy-cache")
        _, code, wall, log = cold_run(where, results / label, extra, env)
        runs[label], codes[label] = (parse(log)[0], wall), code
        print(f"{label}: exit {code}, {wall:.1f} s", flush=True)
    text = side_by_side(runs)
    print(text)
    (results / "pipeline-compare.txt").write_text(text + "\n")
    record = {label: {"exit": codes[label], "wall_s": round(wall, 1), "jobs": jobs} for label, (jobs, wall) in runs.items()}
    (results / "pipeline-compare.json").write_text(json.dumps(record, indent=2))
    return max(codes.values())


if __name__ == "__main__":
    sys.exit(main())
