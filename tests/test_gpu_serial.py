"""GPU tests take turns across processes (tests/conftest.py's lock), whatever
pytest-xdist does with their group."""

from __future__ import annotations

import multiprocessing

from conftest import one_at_a_time


def hold_until_told(lock_file, holding, release) -> None:
    with one_at_a_time(lock_file):
        holding.set()
        release.wait(60)


def try_to_take(lock_file, taken) -> None:
    with one_at_a_time(lock_file):
        taken.set()


def test_a_second_process_waits_for_the_lock_until_the_first_lets_go(tmp_path):
    context = multiprocessing.get_context("spawn")
    lock_file = tmp_path / "gpu-tests.lock"
    holding, release, taken = context.Event(), context.Event(), context.Event()
    first = context.Process(target=hold_until_told, args=(lock_file, holding, release))
    first.start()
    try:
        assert holding.wait(60)
        second = context.Process(target=try_to_take, args=(lock_file, taken))
        second.start()
        assert not taken.wait(1.0)  # the first holds it: the second waits
        release.set()
        assert taken.wait(60)  # let go: the second takes it
        second.join(60)
        assert second.exitcode == 0
    finally:
        release.set()
        first.join(60)
    assert first.exitcode == 0


def test_where_there_is_a_gpu_its_tests_are_one_xdist_group(tmp_path):
    """The project's collection hook, with a GPU made to seem present, in a session of two workers:
    every GPU test carries the group in its id (what --dist loadgroup places by), the others none."""
    import subprocess
    import sys
    from pathlib import Path

    tests = Path(__file__).resolve().parent
    (tmp_path / "conftest.py").write_text(f"""
import importlib.util
spec = importlib.util.spec_from_file_location("project_conftest", {str(tests / "conftest.py")!r})
project = importlib.util.module_from_spec(spec)
spec.loader.exec_module(project)
project.gpu_or_reason = lambda: (object(), "")
pytest_collection_modifyitems = project.pytest_collection_modifyitems
def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a GPU")
""")
    (tmp_path / "test_some.py").write_text(
        "import pytest\n\n@pytest.mark.gpu\ndef test_one():\n    pass\n\n@pytest.mark.gpu\ndef test_two():\n    pass\n\n"
        "def test_other():\n    pass\n"
    )
    (tmp_path / "pytest.ini").write_text("[pytest]\n")  # this folder is the session's root, not the project
    proc = subprocess.run([sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", "-n", "2", "--dist", "loadgroup"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "test_some.py::test_one@gpu" in proc.stdout and "test_some.py::test_two@gpu" in proc.stdout, proc.stdout
    assert "test_some.py::test_other@" not in proc.stdout and "test_some.py::test_other" in proc.stdout, proc.stdout
