"""The wheel on each supported Python (3.10 to 3.13) found on this machine:
installed with its dependencies from the package index into a fresh virtual
environment, then ``check-install``, ``tuner init --kernel``, ``check-family``
and ``snakemake -n --cores 1`` in a folder of one's own, up to where a GPU is
needed. On 3.10 Snakemake is not installed (version 8 needs 3.11), and
``init`` says so.

Slow (minutes of downloads and installs per Python) and needs the package
index: ``python -m pytest -m slow tests/test_pythons.py``. An interpreter
is looked for as ``python3.X`` on ``PATH`` and under ``~/.pyenv/versions``."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.test_wheel import dist, run  # noqa: F401, F811 - the wheel's build (a fixture) and the command runner, shared

ROOT = Path(__file__).resolve().parents[1]
SAXPY = ROOT / "examples" / "saxpy" / "saxpy.cu"
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("pythons")]


def interpreter(version: str) -> str | None:
    candidates = [shutil.which(f"python{version}")] + sorted(
        glob.glob(os.path.expanduser(f"~/.pyenv/versions/{version}.*/bin/python{version}"))
    )
    for candidate in filter(None, candidates):
        probe = subprocess.run([candidate, "-c", "import sys, venv; print(sys.version_info[:2])"], capture_output=True, text=True)
        if probe.returncode == 0 and probe.stdout.strip() == str(tuple(int(p) for p in version.split("."))):
            return candidate
    return None


@pytest.mark.parametrize("version", ["3.10", "3.11", "3.12", "3.13"])
def test_the_wheel_installs_and_runs_a_folder_of_ones_own(version, dist, tmp_path):  # noqa: F811 - the fixture
    python_x = interpreter(version)
    if python_x is None:
        pytest.skip(f"no Python {version} on this machine")
    venv = tmp_path / "env"
    assert run([python_x, "-m", "venv", venv], cwd=tmp_path).returncode == 0
    python = venv / "bin" / "python"
    (wheel,) = dist.glob("*.whl")
    proc = run([python, "-m", "pip", "install", "-q", wheel], cwd=tmp_path, timeout=1200)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}", TUNER_PROGRESS="lines")
    has_snakemake = tuple(int(p) for p in version.split(".")) >= (3, 11)

    proc = run([venv / "bin" / "tuner", "check-install"], cwd=tmp_path, env=env)
    assert proc.returncode in (0, 1) and "tuner's files: ok" in proc.stdout, proc.stdout + proc.stderr

    shutil.copy(SAXPY, tmp_path / "saxpy.cu")
    proc = run([venv / "bin" / "tuner", "init", "mine", "--kernel", "saxpy.cu"], cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "wrote mine/saxpy.py" in proc.stdout
    assert ("Snakemake" in proc.stdout + proc.stderr) or has_snakemake  # 3.10: it says the pipeline will not run
    folder = tmp_path / "mine"
    spec = folder / "saxpy.py"
    reference = '    raise NotImplementedError("saxpy.py: write saxpy_reference, what saxpy computes, in numpy")'
    text = spec.read_text()
    assert reference in text
    spec.write_text(text.replace(reference, '    return a * x.astype("float64") + y'))

    if shutil.which("nvcc"):
        proc = run([python, "-m", "tuner", "check-family", "saxpy.py"], cwd=folder, env=env)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        assert "space: saxpy-float32" in proc.stdout

    if has_snakemake:
        proc = run([python, "-m", "snakemake", "-n", "--cores", "1"], cwd=folder, env=env)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        assert "sweep_saxpy_space" in proc.stdout and "export_best" in proc.stdout
    else:
        assert run([python, "-c", "import snakemake"], cwd=folder, env=env).returncode != 0
