"""`tuner check-install`: what PyCUDA's build needs, one line each, before pip
builds it, on toolkits laid out by the test (a whole one, one behind a wrapper
nvcc, none at all)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from tuner import install_check


def fake_toolkit(root: Path, *, headers: bool = True, libraries: bool = True, here: Path | None = None) -> Path:
    """A CUDA toolkit's layout under ``root`` whose nvcc answers --version and a
    dry run as nvcc does (``here``: the bin folder its dry run names, for a wrapper)."""
    bin_dir = root / "bin"
    bin_dir.mkdir(parents=True)
    nvcc = bin_dir / "nvcc"
    nvcc.write_text(f'#!/bin/sh\ncase "$1" in\n  --version) echo "Cuda compilation tools, release 13.0, V13.0.48";;\n'
                    f'  *) echo "#$ _HERE_={here or bin_dir}";;\nesac\n')  # fmt: skip
    nvcc.chmod(nvcc.stat().st_mode | stat.S_IXUSR)
    if headers:
        (root / "include").mkdir()
        (root / "include" / "cuda.h").write_text("")
        (root / "include" / "curand.h").write_text("")
    if libraries:
        (root / "lib64" / "stubs").mkdir(parents=True)
        (root / "lib64" / "stubs" / "libcuda.so").write_text("")
        (root / "lib64" / "libcurand.so").write_text("")
    return bin_dir


def lines_with(monkeypatch, path: str) -> tuple[list[str], int]:
    monkeypatch.setenv("PATH", path)
    monkeypatch.setattr(install_check, "SYSTEM_LIBRARY_DIRS", ())
    monkeypatch.setattr(install_check, "PYCUDA_CONFIG_FILES", ())
    monkeypatch.setattr(install_check, "_installed_version", lambda module: None)  # as where PyCUDA is not installed
    lines: list[str] = []
    status = install_check.check_install(say=lines.append)
    return lines, status


def line(lines: list[str], what: str) -> str:
    (found,) = [text for text in lines if text.startswith(f"{what}: ")]
    return found


def buildable(lines: list[str]) -> bool:
    """Whether this machine's own compiler and Python headers (not the test's toolkit) allow a build."""
    return ": ok: " in line(lines, "C++ compiler") and ": ok: " in line(lines, "Python headers")


def test_a_whole_toolkit_lets_pycuda_build(tmp_path, monkeypatch):
    bin_dir = fake_toolkit(tmp_path / "cuda")
    lines, status = lines_with(monkeypatch, f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin")
    assert line(lines, "nvcc").startswith(f"nvcc: ok: {bin_dir}/nvcc, CUDA 13.0; PyCUDA's build takes CUDA_ROOT={tmp_path / 'cuda'}")
    assert line(lines, "CUDA headers") == f"CUDA headers: ok: {tmp_path / 'cuda' / 'include' / 'cuda.h'}"
    assert line(lines, "libcuda.so").endswith("lib64/stubs/libcuda.so") and ": ok: " in line(lines, "libcurand.so")
    verdict = line(lines, "PyCUDA")
    if buildable(lines):
        assert status == 0 and "pip install 'pycuda>=2024.1' builds it from source here" in verdict and "PATH=" not in verdict
    else:
        assert status == 1 and "cannot build here" in verdict


def test_a_wrapper_nvcc_names_the_toolkit_to_put_first(tmp_path, monkeypatch):
    """PyCUDA takes CUDA_ROOT from the first nvcc on PATH: a wrapper script in /usr/local/bin gives it /usr/local."""
    real = fake_toolkit(tmp_path / "cuda-13.0")
    wrapper = fake_toolkit(tmp_path / "local", headers=False, libraries=False, here=real)
    lines, status = lines_with(monkeypatch, f"{wrapper}{os.pathsep}/usr/bin{os.pathsep}/bin")
    headers = line(lines, "CUDA headers")
    assert headers.startswith(f"CUDA headers: MISSING: {tmp_path / 'local' / 'include' / 'cuda.h'} does not exist")
    assert headers.endswith(f"PATH={real}:$PATH") and "\n" not in headers
    assert status == 1 and "fix the CUDA headers line above" in line(lines, "PyCUDA")


def test_no_nvcc_stops_the_build_in_one_line(tmp_path, monkeypatch):
    empty = tmp_path / "empty"
    empty.mkdir()
    lines, status = lines_with(monkeypatch, str(empty))
    assert line(lines, "nvcc").startswith("nvcc: MISSING: not on PATH: install the CUDA toolkit")
    assert status == 1 and "conda install -c conda-forge pycuda" in line(lines, "PyCUDA")
    assert ": ok: " in line(lines, "tuner's files") and line(lines, "Python").startswith("Python: ok: ")


def test_pycudas_own_configuration_file_is_read(tmp_path, monkeypatch):
    """CUDA_ROOT, the driver library's folder and CUDA_ENABLE_CURAND as ~/.aksetup-defaults.py sets them for the build."""
    real = fake_toolkit(tmp_path / "cuda-13.0", libraries=False)
    (tmp_path / "stub").mkdir()
    (tmp_path / "stub" / "libcuda.so").write_text("")
    settings = tmp_path / "aksetup-defaults.py"
    settings.write_text(f"CUDA_ROOT = {str(real.parent)!r}\nCUDADRV_LIB_DIR = [{str(tmp_path / 'stub')!r}]\n"
                        "CUDA_ENABLE_CURAND = False\n")  # fmt: skip
    wrapper = fake_toolkit(tmp_path / "local", headers=False, libraries=False, here=real)
    monkeypatch.setenv("PATH", f"{wrapper}{os.pathsep}/usr/bin{os.pathsep}/bin")
    monkeypatch.setattr(install_check, "SYSTEM_LIBRARY_DIRS", ())
    monkeypatch.setattr(install_check, "PYCUDA_CONFIG_FILES", (tmp_path / "absent.py", settings))
    monkeypatch.setattr(install_check, "_installed_version", lambda module: None)
    lines: list[str] = []
    install_check.check_install(say=lines.append)
    assert f"CUDA_ROOT={real.parent} (set in {settings})" in line(lines, "nvcc")
    assert ": ok: " in line(lines, "CUDA headers") and line(lines, "libcuda.so") == f"libcuda.so: ok: {tmp_path / 'stub' / 'libcuda.so'}"
    assert not [text for text in lines if "curand" in text]


def test_an_installed_pycuda_is_enough(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(install_check, "_installed_version", lambda module: "2026.1")
    lines: list[str] = []
    assert install_check.check_install(say=lines.append) == 0
    assert line(lines, "PyCUDA").startswith("PyCUDA: ok: 2026.1 is installed")


@pytest.mark.parametrize("python", ["requires-python", "classifiers"])
def test_the_supported_pythons_are_stated_once(python):
    """pyproject.toml's bounds and classifiers, and the check's, say the same Pythons."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11 on

    project = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())["project"]
    (low, high) = install_check.SUPPORTED_PYTHONS
    if python == "requires-python":
        assert project["requires-python"] == f">={low[0]}.{low[1]},<{high[0]}.{high[1] + 1}"
    else:
        listed = sorted(c.rsplit(" ", 1)[1] for c in project["classifiers"] if c.startswith("Programming Language :: Python :: 3."))
        assert listed == [f"3.{minor}" for minor in range(low[1], high[1] + 1)]
