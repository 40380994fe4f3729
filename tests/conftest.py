"""GPU tests carry the `gpu` marker and skip, with the reason, where PyCUDA or a
CUDA device is missing; where one is there, they run one at a time (one xdist
group, and a lock file every worker takes around each GPU test)."""

from __future__ import annotations

import compileall
import contextlib
import fcntl
import functools
from pathlib import Path

import pytest


def pytest_configure(config):
    # The suite starts about 170 Python processes (the CLI, Snakemake's jobs,
    # study workers, report pools) that import the project. Where
    # PYTHONDONTWRITEBYTECODE is set, as on CI, no process caches what it
    # compiles, so each compiled tuner/ from source again (a tenth of the CPU
    # of the workflow and documented-command tests). Compiled once here, in the
    # controller before any worker starts (0.5 s), they read the cache instead
    # (it is git-ignored; quiet=2: a read-only checkout just goes without).
    if not hasattr(config, "workerinput"):
        root = Path(__file__).resolve().parents[1]
        for folder in ("tuner", "tests", "benchmarks"):
            compileall.compile_dir(root / folder, quiet=2)


@functools.lru_cache(maxsize=1)
def gpu_or_reason():
    from tuner.device.gpu import GpuUnavailable, require_gpu

    try:
        return require_gpu(), ""
    except GpuUnavailable as error:
        return None, str(error)


# First: pytest-xdist's worker writes each test's group into its id in this same hook, and a group
# added after it is never placed (every GPU test then ran on whichever worker was free).
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    gpu_items = [item for item in items if "gpu" in item.keywords]
    if not gpu_items:
        return
    gpu, reason = gpu_or_reason()
    for item in gpu_items:
        if gpu is None:
            item.add_marker(pytest.mark.skip(reason=reason))
        else:
            # One GPU measured by two tests at once times and meters each other's kernels (the energy and
            # timing tests fail so): under --dist loadgroup, every GPU test runs on one worker, in turn.
            item.add_marker(pytest.mark.xdist_group("gpu"))


@contextlib.contextmanager
def one_at_a_time(lock_file: Path):
    """Held by one process at a time: the others wait in ``flock`` until it is let go."""
    with open(lock_file, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@pytest.fixture(autouse=True)
def one_gpu_test_at_a_time(request, tmp_path_factory):
    """Each GPU test holds the GPU's lock: the xdist group places GPU tests on one worker only under
    --dist loadgroup and a pytest that reads the group from the test's id (below 9.2), and two pytest
    sessions on one GPU also meet here. The lock file lies in the folder that every worker's and every
    session's temporary folders share."""
    if "gpu" not in request.keywords:
        yield
        return
    with one_at_a_time(tmp_path_factory.getbasetemp().parent / "gpu-tests.lock"):
        yield


@pytest.fixture(scope="session")
def gpu():
    device, reason = gpu_or_reason()
    if device is None:
        pytest.skip(reason)
    return device


@pytest.fixture(scope="session")
def bench(gpu, tmp_path_factory):
    from tuner.device.describe import describe
    from tuner.measure.bench import Bench
    from tuner.measure.timing import TimingOptions

    return Bench.open(gpu, describe(gpu), tmp_path_factory.mktemp("cubins"), timing=TimingOptions(max_time_s=0.2))


@pytest.fixture
def measure_in_thread(monkeypatch):
    """``use(bench)``: a stage's measuring side (``sweep``, ``tune``) runs in a
    thread of the test's process (not a fresh process), on ``bench`` instead
    of a GPU."""
    from tuner import harness
    from tuner.measure import remote

    class InThread(remote.MeasuringProcess):
        def __init__(self, open_side, *args, in_thread=True):
            super().__init__(open_side, *args, in_thread=True)

    def use(bench) -> None:
        monkeypatch.setattr(harness, "open_bench", lambda *args, **kwargs: (bench, {}))
        monkeypatch.setattr(remote, "MeasuringProcess", InThread)

    return use


REFERENCE_REPORT_COMMAND = "python -m tuner.report --results results/reference/nvidia-h100-80gb-hbm3 --out /tmp/h100-report"


@pytest.fixture(scope="session")
def reference_report(tmp_path_factory):
    """(report folder, what the command printed) of the README's command that
    redraws the shipped H100 reference report, hardware counters included
    (``REFERENCE_REPORT_COMMAND``, its output under a temporary folder instead
    of /tmp). Drawing a whole report costs the better part of a minute, so the
    tests that read it share one run (and tests/test_documented_commands.py
    leaves this command to them)."""
    import os
    import shlex
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    out = tmp_path_factory.mktemp("reference-report")
    argv = shlex.split(REFERENCE_REPORT_COMMAND.replace("/tmp/h100-report", str(out)))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(root), os.environ.get("PYTHONPATH", "")) if p)}
    proc = subprocess.run([sys.executable, *argv[1:]], cwd=root, capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return out, proc.stdout + proc.stderr


@pytest.fixture(scope="session")
def synthetic_run():
    """(rows, device, peaks) of the synthetic GPU (``fixtures_report.make_dataset``,
    seed 0) plus three rows of a source that is not a sweep (the peaks), which
    no figure, table or header may count as one. Tests take a copy of the rows."""
    import pandas as pd
    from fixtures_report import make_dataset

    dataset, device, peaks = make_dataset(seed=0)
    extra = dataset[dataset["source"] == "sweep:copy_widths"].head(3).assign(source="peaks")
    return pd.concat([dataset, extra], ignore_index=True), device, peaks


@pytest.fixture(scope="session")
def synthetic_report(synthetic_run, tmp_path_factory):
    """The report of ``synthetic_run`` as ``python -m tuner.report`` builds it
    (profiles read from a folder that has none), built once for the tests that
    only read it."""
    from tuner.data.counters import read_profiles
    from tuner.report import build_report

    dataset, device, peaks = synthetic_run
    return build_report(dataset, device=device, peaks=peaks, out_dir=tmp_path_factory.mktemp("synthetic-report"),
                        profiles=read_profiles(tmp_path_factory.mktemp("no-profiles")))  # fmt: skip


def snakemake_report_captions(report_html: str) -> dict[str, str]:
    """Each figure's caption in a ``snakemake --report`` HTML file, by stem:
    Snakemake embeds every file's entry as JSON, its caption rendered to HTML."""
    import html
    import json
    import re

    entries = re.finditer(r'"name": "(\w+)\.png", [^{}]*?"caption": ("(?:[^"\\]|\\.)*")', report_html)
    return {match.group(1): html.unescape(re.sub(r"<[^>]+>", "", json.loads(match.group(2)))) for match in entries}
