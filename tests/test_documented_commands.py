"""Every command the README and the command-line help show, run as written
on the shipped reference results (in a copy of the repository, so nothing
shipped is rewritten). Commands that need a GPU, or are whole pipelines or
servers, are listed in SKIPPED with the reason; a command in the docs that is
neither run here nor listed fails, as does a listed one the docs dropped."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import REFERENCE_REPORT_COMMAND, snakemake_report_captions

ROOT = Path(__file__).resolve().parents[1]
PROGRAMS = ("python", "snakemake", "pip", "compute-sanitizer", "optuna-dashboard", "nvcc")
# Where the docs speak of a results folder of one's own GPU, the shipped H200 one stands in.
PLACEHOLDER = ("results/<gpu>", "results/reference/nvidia-h200")
HELP_SOURCES = ("tuner/cli.py", "tuner/report/__main__.py", "tuner/search/tables/replay.py")

GPU = "needs an NVIDIA GPU"
SKIPPED = {
    "pip install -e '.[cuda,dashboard]' && snakemake --cores 1": f"{GPU}: the whole pipeline",
    "pip install -e '.[test]' && python -m pytest -q -n auto --dist loadgroup": "the test suite itself (.ci/run runs it on a fresh clone)",
    "python -m pytest -m gpu -q": f"{GPU}: the GPU tests",
    "compute-sanitizer --tool memcheck --target-processes application-only python -m tuner verify": f"{GPU}: the memory checker",
    "python -m tuner verify": f"{GPU}: verifies every variant on the device",
    "snakemake --cores 1 --rerun-incomplete": f"{GPU}: resumes the pipeline",
    "python benchmarks/kill_resume.py --work /tmp/kill-test": f"{GPU}: kills and resumes the pipeline",
    "snakemake --cores 1 --configfile examples/saxpy/config.yaml": f"{GPU}: the saxpy pipeline (tests/test_examples.py runs it on CPU)",
    "snakemake --cores 1 --configfile benchmarks/configs/transpose_tiles.yaml": f"{GPU}: a study beside its exhaustive sweep "
    "(benchmarks/results/transpose-tiles-h100/ holds an H100's run)",
    "optuna-dashboard results/<gpu>/optuna.log": "a web server (tests/test_dashboard.py serves a study and reads it)",
    "python -m tuner tune NAME --gpus 0,1,2,3": f"{GPU}: four of them",
    "python -m tuner tune reduce_int32 --gpus 0,1": f"{GPU}: two of them",
    "snakemake --cores 1 --configfile mine.yaml": f"{GPU}: a pipeline of one's own config",
    "python -m tuner check-config mine.yaml": "one's own config (tests/test_check_config.py checks good and broken ones "
    "this way)",
    "python benchmarks/timing_quality.py": f"{GPU}: times kernels",
    "python benchmarks/vs_nvbench.py --results results/reference/nvidia-h100-80gb-hbm3 --out /tmp/vs-nvbench.txt": f"{GPU}: "
    "times kernels with nvbench and with ours (tests/test_vs_benchmarks.py runs its help and arithmetic)",
    "python benchmarks/vs_kernel_tuner.py --dtype float32 --out /tmp/vs-kernel-tuner.txt": f"{GPU}: tunes with Kernel Tuner "
    "and with ours (tests/test_vs_benchmarks.py runs its help and arithmetic)",
    "python benchmarks/pipeline_timing.py --results /tmp/cold": f"{GPU}: the whole pipeline, timed",
    "python benchmarks/yardstick_gaps.py nvbench --out benchmarks/results/yardstick-gaps-h100": f"{GPU}: times CUB's sums "
    "one factor at a time (tests/test_yardstick_gaps.py runs its arithmetic, and the experiment where there is one)",
    "python benchmarks/yardstick_gaps.py kernel-tuner --out benchmarks/results/yardstick-gaps-h100": f"{GPU}: times the "
    "vector add one factor at a time (tests/test_yardstick_gaps.py runs its arithmetic and its dry run)",
    "python -m tuner describe": f"{GPU}: test_cli_examples_on_the_gpu runs it where there is one",
    "python -m tuner sweep reduce_ladder": f"{GPU}: test_cli_examples_on_the_gpu runs it where there is one",
    REFERENCE_REPORT_COMMAND: "tests/test_reference_results.py and tests/test_profile_report.py read what it draws (the "
    "reference_report fixture of tests/conftest.py runs it as written, its output in a temporary folder)",
    "python -m tuner best": "reads results/<gpu> of this machine's GPU; the --results form runs on the shipped results",
    "python -m tuner.report --results results/<gpu> --out results/<gpu>/report": "the report command on a folder of one's "
    "own GPU: the same command runs here on the shipped H100 folder (--out /tmp/h100-report)",
    "snakemake --cores 1": f"{GPU}: the whole pipeline",
    "python -m tuner.search.tables.replay TABLE.parquet --family reduce --dtype int32 --n 268435456": "TABLE.parquet is a placeholder; "
    "the README's form runs on the shipped measurements",
    "python -m tuner describe --config mine.yaml && python -m tuner tune reduce_int32 --config mine.yaml": f"{GPU}: a worker "
    "on another host (tests/test_postgres_study.py runs four workers against a real PostgreSQL server)",
    "python benchmarks/scaling.py --work /tmp/scaling --gpus 0,1,2,3 --budget 1536": f"{GPU}: four of them",
    "pip install -e '.[cuda,postgresql]'": "installs from the package index (CI installs the test extra, which holds the driver)",
    "pip install -e '.[cuda,postgresql,slurm]'": "installs from the package index (the slurm extra is the executor plugin)",
    "pip install 'cuda-bench[cu12]'": "installs from the package index (nvbench, for benchmarks/vs_nvbench.py on a GPU)",
    "python -m tuner.search.tables.replay CACHE.json.gz": "CACHE.json.gz is a placeholder for another tuner's table "
    "(tests/test_replay.py runs the form on a Kernel Tuner cache it writes, with a T1 file beside it)",
    "python -m tuner.search.tables.replay_study": "names the module; tests/test_postgres_study.py runs its worker and rows commands",
    "python -m pytest -q -n auto --dist loadgroup": "the test suite itself (.ci/run runs it on a fresh clone)",
    "python -m pytest -q -m slow": "the slow tests of the suite, minutes of nvcc (the default run leaves them out)",
    "python benchmarks/energy.py": f"{GPU}: measures energy on the device (tests/test_energy_benchmark.py runs it on a stand-in)",
    "python -m tuner compare A B": "A and B are placeholders; the README's forms run on the shipped results",
    "snakemake --cores 1 --configfile examples/<name>/config.yaml": f"{GPU}: an example's pipeline (tests/test_examples.py runs "
    "each on CPU)",
    "python -m tuner check-family examples/<name>/<name>.py --gpu": f"{GPU}: verifies every module on the device",
    "python -m tuner check-family examples/transpose/transpose.py": "compiles a covering subset of the example's modules, "
    "seconds of nvcc; tests/test_kernel_spec.py and tests/test_check_family.py run check-family on good and broken families",
    "python benchmarks/search.py": "50 seeds of every strategy on every shipped table, tens of minutes on a CPU "
    "(tests/test_search_bench.py runs it on a few seeds)",
    "python benchmarks/search.py --tables --hub ../shared/benchmark_hub/convolution_milo ../shared/benchmark_hub/dedispersion_milo "
    "--seeds 50 --strategies ordinal_global ordinal random adaptive_tabu_greywolf --fixed 50 100 200 --orders ascending "
    "--out /tmp/search-hub": "the benchmark hub's files lie outside the repository, and 50 seeds of four strategies take the "
    "better part of an hour on two cores (tests/test_search_bench.py runs one of its tables)",
    "python benchmarks/search.py --tables reduce_space_offset11 reduce_hard_2e24_h200 reduce_hard_2e24_h100 reduce_hard_h200 "
    "reduce_hard_h100 --no-warm --seeds 50 --strategies ordinal_global ordinal random --fractions 0.025 0.05 0.1 --orders "
    "ascending --out benchmarks/results --name search-own-default": "50 seeds on five tables, tens of minutes on two cores "
    "(tests/test_search_bench.py runs the benchmark on a few seeds)",
    "python benchmarks/search.py --tables reduce_space reduce_space_offset11 reduce_hard_h200 reduce_hard_h100 "
    "reduce_hard_2e24_h200 reduce_hard_2e24_h100 ../shared/benchmark_hub/convolution_milo ../shared/benchmark_hub/dedispersion_milo "
    "/tmp/unseen/rtx2080ti --seeds 20 --strategies ordinal ordinal_global ordinal_best ordinal_adaptive --fixed 50 100 --fractions "
    "--orders ascending --no-warm --held-out --jobs 2 --out benchmarks/results --name search-held-out-adaptive": "the benchmark "
    "hub's files and the RTX 2080 Ti's table (from autotuning-methodology's sources) lie outside the repository, and the run "
    "takes seven minutes on two cores (tests/test_search_bench.py runs --held-out on small tables)",
    "python benchmarks/space_scale.py --sizes 4 5 6 --strategies ordinal_global interactions --restricted": "builds "
    "spaces of up to 10^6 configurations, half a minute and a GB of memory (tests/test_space_scale.py runs it on small ones)",
    "python benchmarks/study_compiles.py": "two 50-trial studies with a 0.3 s nvcc stub, twenty seconds "
    "(tests/test_study_compiles.py runs it on 8 trials)",
    "snakemake --profile workflow/profiles/slurm --default-resources slurm_partition=YOURS": "needs a SLURM cluster "
    "(benchmarks/slurm_cluster.sh starts one as root; benchmarks/results/slurm-run.txt is its log)",
    "python -m build": "tests/test_wheel.py builds the sdist and the wheel (without build isolation, so without network)",
    "pip install dist/tuner-0.1.0-py3-none-any.whl": "installs into this environment; tests/test_wheel.py installs the wheel "
    "it builds into a fresh virtual environment outside the checkout and runs init, check-family, snakemake -n and tuner.tune "
    "from there",
    "python -m tuner check-install": "its exit status says whether PyCUDA can be built on the machine it runs on "
    "(tests/test_install_check.py runs it on toolkits it lays out, tests/test_wheel.py from the installed wheel)",
    "pip install 'pycuda>=2024.1'": "builds PyCUDA from source, minutes of a core and the CUDA toolkit's libraries "
    "(the cuda extra; python -m tuner check-install says whether it can build)",
    "python -m tuner check-family saxpy.py": "the skeleton's reference is the user's to write; tests/test_wheel.py writes "
    "one and runs check-family on it from the installed wheel",
    "pip wheel -w wheelhouse dist/tuner-0.1.0-py3-none-any.whl": "downloads (and builds) the dependencies from the "
    "package index into a wheelhouse for a machine without network",
    "pip install --no-index --find-links wheelhouse dist/tuner-0.1.0-py3-none-any.whl": "installs from that wheelhouse "
    "(tests/test_wheel.py installs the wheel with --no-index)",
    "pip install 'dist/tuner-0.1.0-py3-none-any.whl[cuda]'": "the wheel with the cuda extra: builds PyCUDA from source",
}


def readme_commands(text: str) -> list[str]:
    """Commands in fenced shell blocks, indented blocks and inline code."""
    lines = []
    for block in re.findall(r"^```(?:bash|sh|console)?\n(.*?)^```", text, re.S | re.M):
        lines += block.splitlines()
    lines += [line.strip() for line in text.splitlines() if line.startswith("    ") and not line.lstrip().startswith(("|", "-"))]
    lines += re.findall(r"`([^`\n]+)`", text)
    return unique(line.strip() for line in lines if line.strip().startswith(tuple(f"{p} " for p in PROGRAMS)))


def help_commands() -> list[str]:
    """The examples in the module docstrings that ``--help`` prints."""
    found = []
    for source in HELP_SOURCES:
        text = (ROOT / source).read_text()
        docstring = text[text.index('"""') + 3 : text.index('"""', text.index('"""') + 3)]
        found += [line.strip() for line in docstring.splitlines() if line.strip().startswith("python -m ")]
    return unique(found)


def unique(items) -> list[str]:
    return list(dict.fromkeys(items))


DOCS = [ROOT / "README.md", ROOT / "examples" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
README_COMMANDS = readme_commands("\n".join(path.read_text() for path in DOCS))
HELP_COMMANDS = help_commands()
DOCUMENTED = unique(README_COMMANDS + HELP_COMMANDS)
RUN = [c for c in DOCUMENTED if c not in SKIPPED]


def test_every_documented_command_is_run_or_skipped_with_a_reason():
    assert len(README_COMMANDS) >= 15 and len(HELP_COMMANDS) >= 5
    assert not [c for c in SKIPPED if c not in DOCUMENTED], "SKIPPED lists commands the docs no longer show"
    assert all(reason.strip() for reason in SKIPPED.values())
    assert len(RUN) >= 6, RUN


@pytest.fixture(scope="module")
def repository(tmp_path_factory) -> Path:
    """A copy of the tracked files (the shipped results included)."""
    copy = tmp_path_factory.mktemp("repository")
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=False)
    files = [f for f in listed.stdout.decode().split("\0") if f] if listed.returncode == 0 else []
    if not files:
        pytest.skip("not a git checkout: cannot tell the tracked files")
    for name in files:
        if (ROOT / name).is_file():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, copy / name)
    return copy


def run(command: str, cwd: Path, tmp: Path) -> subprocess.CompletedProcess:
    command = command.replace(*PLACEHOLDER).replace("/tmp/", f"{tmp}/")
    argv = shlex.split(command)
    argv = [sys.executable, *argv[1:]] if argv[0] == "python" else [sys.executable, "-m", *argv]
    # The copy first; packages installed on the path (as on the GPU machines) stay reachable.
    path = os.pathsep.join(p for p in (str(cwd), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "PYTHONPATH": path, "TUNER_PROGRESS": "lines"}
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=400, env=env)


# The slow set runs these: redrawing a reference report through the whole workflow is a minute
# of CI, and the replay of four samplers over ten seeds is 2,560 trials (tests/test_replay.py
# runs the same command line on a small table).
SLOW = (
    "snakemake --cores 1 report",
    "python -m tuner.search.tables.replay results/reference/nvidia-h200/measurements.parquet --family reduce --dtype int32 --n 268435456",
)


@pytest.mark.parametrize("command", [pytest.param(c, marks=pytest.mark.slow) if c in SLOW else c for c in RUN])
def test_documented_command_runs_as_written(command, repository, tmp_path):
    if command.startswith("snakemake") and command.split()[-1] == "report":
        # The copied reference reports are the tracked ones, current with their inputs: stamped, the workflow
        # leaves them be (tests/test_workflow.py checks that stamps decide). Redrawing one, the H200's, shows
        # what a fresh clone does.
        stamps = repository / "results" / ".reference-reports"
        stamps.mkdir(exist_ok=True)
        for gpu in ("nvidia-h100-80gb-hbm3", "nvidia-h200"):
            (stamps / f"{gpu}.done").touch()
        if command == "snakemake --cores 1 report":
            (stamps / "nvidia-h200.done").unlink()
    proc = run(command, repository, tmp_path)
    # `tuner compare` exits 1 where it finds a regression, by design: the shipped runs hold some.
    allowed = (0, 1) if command.startswith("python -m tuner compare") else (0,)
    assert proc.returncode in allowed, f"{command}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    out = proc.stdout + proc.stderr
    if command.startswith("python -m tuner compare"):
        assert "verdicts: FASTER " in out and "configurations in both" in out, out
        assert (proc.returncode == 1) == ("regressions (SLOWER by 2.00% or more): 0" not in out), out
        if "--figure" in command:
            assert (tmp_path / "h100-vs-h200.png").read_bytes()[:4] == b"\x89PNG"
    elif command.startswith("python -m tuner.search.tables.replay"):
        assert "1536 table rows of sweep:reduce_space" in out and re.search(r"^tpe +64 ", out, re.M), out
    elif command.startswith("python -m tuner best"):
        folder = re.search(r"--out-dir /tmp/(\S+)", command).group(1)  # the commands write under /tmp, run under tmp_path
        assert (tmp_path / folder / "best_configs.h").read_text().startswith("//")
        assert ("reduce" if "h200" in folder else "saxpy") in out and "GB/s" in out
    elif command.startswith("python -m tuner.report"):
        from tuner.report import EXPECTED_FIGURES

        assert f"; {len(EXPECTED_FIGURES)} figures, 0 skipped" in out, out
    elif command.startswith("snakemake") and "--report" in command:
        captions = snakemake_report_captions((repository / "report.html").read_text())
        listed = yaml.safe_load((repository / "workflow" / "report" / "figures.yaml").read_text())
        assert len(listed) >= 12
        for figure in listed:  # each figure with its own caption, from the figure list
            assert captions[figure["stem"]].startswith(figure["caption"]), figure["stem"]
    elif command == "snakemake --cores 1 report":
        # the H200 report, the H100 one where a fresh clone's mtimes make its inputs look newer, and the target
        assert "report_reference" in out and re.search(r"\b([23]) of \1 steps \(100%\) done", out), out
        # Redrawn in its one format (report.md and PNG figures), the shipped H200 report gains no file and says the same.
        redrawn, shipped = repository / PLACEHOLDER[1] / "report", ROOT / PLACEHOLDER[1] / "report"
        assert sorted(p.name for p in redrawn.iterdir()) == sorted(p.name for p in shipped.iterdir())
        assert (redrawn / "report.md").read_text() == (shipped / "report.md").read_text()


@pytest.mark.gpu
def test_cli_examples_on_the_gpu(repository, tmp_path):
    """The help's GPU examples in their order: describe, then a sweep."""
    for command in ("python -m tuner describe", "python -m tuner sweep reduce_ladder"):
        assert command in HELP_COMMANDS
        proc = run(command, repository, tmp_path)
        assert proc.returncode == 0, f"{command}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    (sweep,) = (repository / "results").glob("*/sweeps/reduce_ladder.parquet")
    assert "sweep:reduce_ladder" in proc.stderr and "(100%)" in proc.stderr  # its progress lines
    assert len(pd.read_parquet(sweep)) > 0


def test_every_stage_has_help(capsys):
    """Each command's --help, in this process (the commands' module entry
    points run as subprocesses in the tests of the commands themselves)."""
    from tuner import cli
    from tuner.report.__main__ import main as report_main
    from tuner.search.tables.replay import main as replay_main

    stages = cli.build_parser()._subparsers._group_actions[0].choices  # argparse keeps them here
    for main, argv in [(cli.main, ["--help"]), *((cli.main, [stage, "--help"]) for stage in stages),
                       (report_main, ["--help"]), (replay_main, ["--help"])]:  # fmt: skip
        with pytest.raises(SystemExit) as exit_:
            main(argv)
        assert exit_.value.code == 0 and "usage:" in capsys.readouterr().out, argv


def test_cli_sweep_writes_under_results_gpu(tmp_path, monkeypatch, capsys, measure_in_thread):
    """``python -m tuner sweep NAME`` by hand needs no --out: once its measuring
    process is done, the sweep's rows go to results/<gpu>/sweeps/NAME.parquet."""
    from types import SimpleNamespace

    import yaml

    from tuner import cli
    from tuner.data import results
    from tuner.families import REGISTRY
    from tuner.progress import Phases
    from tuner.stages.sweep_store import RowStore, store_dir

    config = {"results_dir": str(tmp_path / "results"), "gpu": "test-gpu",
              "sweeps": {"one": {"family": "copy", "dtypes": ["float32"], "sizes": [1 << 20], "params": {"vector_width": [1, 4]}}}}  # fmt: skip
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    monkeypatch.chdir(tmp_path)
    gpu_dir = tmp_path / "results" / "test-gpu"
    gpu_dir.mkdir(parents=True)
    (gpu_dir / "device.json").write_text('{"name": "test"}')
    family = REGISTRY["copy"]
    settings = cli.load_settings(cli.build_parser().parse_args(["sweep", "one"]))
    store = RowStore(store_dir(gpu_dir, "one"))
    for problem in settings.sweep("one").problems():  # what the measuring child would have stored
        for cfg in family.space(problem, settings.sweep("one").domains()):
            store.append({"family": "copy", "dtype": problem.dtype, "n": problem.n, "config_key": results.config_key(cfg),
                          "status": "ok", "bandwidth_gbs": 1.0, "source": "sweep:one", **cfg})  # fmt: skip

    class NothingToMeasure:  # the store holds every configuration: no problem is placed on the GPU
        gpu, cache_dir, phases = SimpleNamespace(arch="sm_90"), tmp_path / "cubins", Phases()

        def problem(self, family, problem):
            raise AssertionError(f"{problem} placed on the GPU, though its store is complete")

    measure_in_thread(NothingToMeasure())
    assert cli.main(["sweep", "one"]) == 0
    assert len(results.read(gpu_dir / "sweeps" / "one.parquet")) == 2
    assert "2 feasible configurations, 2 already measured" in capsys.readouterr().out


@pytest.mark.xdist_group("grouping_check")
def test_the_test_command_keeps_each_group_on_one_worker(request):
    """The README's test command (--dist loadgroup) runs the tests of one
    xdist_group in one worker, so a fixture they share (a whole report) is
    built once. pytest-xdist marks the group in the test's id, which pytest 9.2
    no longer reads (the test extra bounds pytest below it): then every group
    is split and each worker builds the shared reports itself."""
    if not hasattr(request.config, "workerinput") or not request.config.getvalue("loadgroup"):
        pytest.skip("run by pytest-xdist with --dist loadgroup only")
    assert request.node.nodeid.endswith("@grouping_check"), request.node.nodeid
