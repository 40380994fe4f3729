"""The package as a user installs it: ``python -m build`` makes an sdist and a
wheel from this checkout; the wheel, installed into a fresh virtual
environment outside the checkout, runs in a folder of one's own
(``tuner init --kernel``, ``check-family``, ``snakemake -n --cores 1``, the
notebook call up to where it needs a GPU) without reading the checkout.

The environment gets the tuner package only from the wheel (``--no-deps``);
its dependencies are this environment's own, named in a ``.pth`` file, so the
test installs nothing from the network (the wheel's metadata lists them for a
real install, which ``pip install`` of the wheel from a wheelhouse does offline)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SAXPY = ROOT / "examples" / "saxpy" / "saxpy.cu"
pytestmark = pytest.mark.xdist_group("wheel")  # one build and one environment for the module's tests


def run(argv: list, cwd: Path, env: dict | None = None, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    for module in ("build", "hatchling"):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed (the test extra holds it): the wheel is built without build isolation")
    out = tmp_path_factory.mktemp("dist")
    proc = run([sys.executable, "-m", "build", "--no-isolation", "--outdir", out, ROOT], cwd=out)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def installed(dist, tmp_path_factory) -> tuple[Path, dict]:
    """(the environment's python, the environment for its commands): the wheel
    alone in a fresh venv, this environment's dependencies on its path, the
    checkout on neither."""
    venv = tmp_path_factory.mktemp("venv") / "env"
    assert run([sys.executable, "-m", "venv", "--without-pip", venv], cwd=venv.parent).returncode == 0
    python = venv / "bin" / "python"
    (wheel,) = dist.glob("*.whl")
    # --no-compile: each file is compiled when first imported, as CI's pip does (PIP_NO_COMPILE=false in .ci/run).
    proc = run([sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index", "--no-compile", wheel],
               cwd=venv.parent)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    # The dependencies: every folder on this interpreter's path but the standard library and the checkout
    # (site-packages, and the wheels a GPU machine puts on PYTHONPATH), after the venv's own site-packages.
    stdlib = {Path(sysconfig.get_paths()[key]).resolve() for key in ("stdlib", "platstdlib")}
    folders = [Path(p).resolve() for p in sys.path if p and Path(p).is_dir()]
    dependencies = [p for p in folders if p != ROOT and ROOT not in p.parents and p not in stdlib and p.name != "lib-dynload"]
    purelib = run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], cwd=venv).stdout.strip()
    Path(purelib, "test-dependencies.pth").write_text("".join(f"{p}\n" for p in dict.fromkeys(dependencies)))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}", TUNER_PROGRESS="lines")
    return python, env


def test_the_sdist_and_the_wheel_carry_what_the_package_reads(dist):
    (wheel,) = dist.glob("*.whl")
    (sdist,) = dist.glob("*.tar.gz")
    names = set(zipfile.ZipFile(wheel).namelist())
    for path in ("tuner/_resources/Snakefile", "tuner/_resources/config.yaml", "tuner/_resources/kernels/common.cuh",
                 "tuner/_resources/kernels/timing.cu", "tuner/_resources/workflow/rules/common.smk",
                 "tuner/_resources/workflow/schemas/config.schema.yaml", "tuner/_resources/workflow/report/figures.yaml",
                 "tuner/data/published.csv", "tuner/report/templates/report.html.j2", "tuner/resources.py"):  # fmt: skip
        assert path in names, path
    kernels = {p.name for p in (ROOT / "kernels").iterdir()}
    assert {Path(n).name for n in names if n.startswith("tuner/_resources/kernels/")} == kernels
    assert not [n for n in names if "results/" in n or n.startswith("tests/") or n.endswith(".pyc")]
    assert wheel.stat().st_size < 2 << 20  # the package and its files, not the shipped results (14 MB)
    with tarfile.open(sdist) as archive:
        members = {m.split("/", 1)[1] for m in archive.getnames() if "/" in m}
    assert {"pyproject.toml", "Snakefile", "config.yaml", "kernels/common.cuh", "tuner/resources.py"} <= members
    assert not [m for m in members if m.startswith(("results/", "benchmarks/"))]


def test_a_folder_of_ones_own_runs_from_the_installed_wheel(installed, tmp_path):
    python, env = installed
    venv = python.parent.parent
    (tmp_path / "src").mkdir()
    shutil.copy(SAXPY, tmp_path / "src" / "saxpy.cu")
    proc = run([venv / "bin" / "tuner", "init", "mine", "--kernel", "src/saxpy.cu"], cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "wrote mine/saxpy.py" in proc.stdout and "kernel saxpy: family saxpy, float32" in proc.stdout
    folder = tmp_path / "mine"
    # What the user does next: write the reference; here also two block sizes, to compile two modules.
    spec = folder / "saxpy.py"
    text = spec.read_text()
    reference = '    raise NotImplementedError("saxpy.py: write saxpy_reference, what saxpy computes, in numpy")'
    block_sizes = '"block_size_x": [256, 32, 64, 128, 512, 1024]'
    assert reference in text and block_sizes in text
    spec.write_text(text.replace(reference, '    return a * x.astype("float64") + y').replace(block_sizes, '"block_size_x": [256, 128]'))

    if shutil.which("nvcc"):
        proc = run([python, "-m", "tuner", "check-family", "saxpy.py"], cwd=folder, env=env)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        assert "space: saxpy-float32" in proc.stdout and "compile: 2 modules" in proc.stdout and "pipeline: " in proc.stdout

    proc = run([python, "-m", "snakemake", "-n", "--cores", "1"], cwd=folder, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for job in ("describe_device", "compile_variants", "sweep_saxpy_space", "tune_saxpy_search", "collect", "export_best",
                "draw_report", "plot_report"):  # fmt: skip
        assert f"rule {job}:" in proc.stdout or f"{job} " in proc.stdout, job

    # The notebook call, from the folder: everything up to the GPU (none is visible to it here). It first
    # says where the package and its files come from: the environment, not the checkout.
    call = ("import tuner, tuner.resources as r\nprint(tuner.__file__); print(r.root()); print(r.checkout_root(), flush=True)\n"
            "from tuner.families import REGISTRY, load_family_paths\nload_family_paths(['saxpy.py'])\n"
            "tuner.tune(REGISTRY['saxpy'], {'block_size_x': [256]}, n=1 << 20)\n")  # fmt: skip
    proc = run([python, "-c", call], cwd=folder, env={**env, "CUDA_VISIBLE_DEVICES": ""})
    package, resources, checkout = proc.stdout.split("\n")[:3]
    assert Path(package).is_relative_to(venv) and resources.endswith("tuner/_resources") and checkout == "None", proc.stdout
    last = proc.stderr.strip().splitlines()[-1]
    assert proc.returncode == 1 and last.startswith("tuner.device.gpu.GpuUnavailable: "), proc.stderr[-3000:]
    assert "missing" not in proc.stderr, proc.stderr[-3000:]

    proc = run([python, "-m", "tuner", "check-install"], cwd=folder, env=env)
    assert proc.returncode in (0, 1) and "tuner's files: ok: kernels/ and workflow/ of the installed package" in proc.stdout
