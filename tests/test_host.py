"""The CPUs a process may use (tuner.host), and the defaults that follow them:
a SLURM job or a container given 2 of a node's 64 CPUs runs 2 nvcc processes,
not 64; and a console that escapes what its encoding lacks."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tuner.host import usable_cpus


@pytest.fixture
def two_of_sixty_four(monkeypatch):
    """A process pinned to 2 CPUs of a 64-CPU node."""
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {4, 5}, raising=False)
    monkeypatch.setattr(os, "process_cpu_count", lambda: 2, raising=False)


def test_the_cpus_are_the_affinitys_not_the_nodes(two_of_sixty_four):
    assert usable_cpus() == 2


def test_without_an_affinity_the_node_counts(monkeypatch):
    monkeypatch.delattr(os, "process_cpu_count", raising=False)
    monkeypatch.delattr(os, "sched_getaffinity", raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 12)
    assert usable_cpus() == 12
    monkeypatch.setattr(os, "cpu_count", lambda: None)
    assert usable_cpus() == 1


def test_this_process_counts_at_least_one_and_no_more_than_the_node():
    assert 1 <= usable_cpus() <= (os.cpu_count() or 1)


def test_nvcc_input_and_figure_workers_default_to_the_usable_cpus(two_of_sixty_four, monkeypatch, capsys):
    from concurrent.futures import ThreadPoolExecutor

    import tuner.families.inputs as inputs
    import tuner.measure.compile as compile_module
    from tuner.measure.precompile import background_jobs
    from tuner.report.__main__ import main as report_main

    assert background_jobs() == 1  # one of the two kept for the measuring thread
    sizes = []

    class Recording(ThreadPoolExecutor):
        def __init__(self, workers, *args, **kwargs):
            sizes.append(workers)
            super().__init__(workers, *args, **kwargs)

    monkeypatch.setattr(compile_module, "ThreadPoolExecutor", Recording)
    monkeypatch.setattr(inputs, "ThreadPoolExecutor", Recording)
    with compile_module._nvcc_pool(None):
        pass
    inputs.by_chunks(10 * inputs.CHUNK, lambda piece: None)
    assert sizes == [2, 2]
    # The report's --processes default, as its help states it (nothing drawn).
    with pytest.raises(SystemExit):
        report_main(["--help"])
    assert "use, here 2)" in " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize("encoding", ["ascii", "latin-1"])
def test_a_console_whose_encoding_lacks_a_character_prints_it_escaped_instead_of_stopping(encoding):
    """A stage's line with a dash for a missing figure, after its GPU work, under a Latin-1 or ASCII locale:
    printed as an escape, the process goes on (tuner's command line, the report, the replay set this up)."""
    line = "study s: within 1 % after 12 evaluations, \u2014 (compile \u00b1 0.1 s)"
    script = f"from tuner.host import tolerant_console\ntolerant_console()\nprint({line!r})\nprint('after')\n"
    done = subprocess.run([sys.executable, "-c", script], env={**os.environ, "PYTHONIOENCODING": encoding},
                          capture_output=True)  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = done.stdout.decode(encoding).splitlines()
    assert out[0].startswith("study s: within 1 % after 12 evaluations, \\u2014") and out[1] == "after"
    # The command line sets it up before anything it prints.
    check = "import sys\nfrom tuner import cli\ntry:\n    cli.main(['--help'])\nexcept SystemExit:\n    pass\nprint(sys.stdout.errors)\n"
    done = subprocess.run([sys.executable, "-c", check], env={**os.environ, "PYTHONIOENCODING": encoding}, capture_output=True)
    assert done.stdout.decode(encoding).splitlines()[-1] == "backslashreplace"
