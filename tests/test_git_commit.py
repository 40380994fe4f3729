"""The commit a row names: a checkout's HEAD, marked ``-dirty`` where tracked
files differ from it (a row measured by edited code must not claim the
commit's code), untracked files aside as ``git describe --dirty`` does."""

from __future__ import annotations

import subprocess

import pytest

from tuner.measure.bench import git_commit


def _git(root, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture
def checkout(tmp_path, monkeypatch):
    monkeypatch.delenv("TUNER_GIT_COMMIT", raising=False)
    _git(tmp_path, "init", "-q")
    (tmp_path / "kernel.cu").write_text("__global__ void k() {}\n")
    _git(tmp_path, "add", "kernel.cu")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "kernel")
    return tmp_path


def test_a_clean_checkout_names_its_commit(checkout):
    assert git_commit(checkout) == _git(checkout, "rev-parse", "--short=12", "HEAD")


def test_an_edited_tracked_file_marks_the_commit_dirty(checkout):
    head = _git(checkout, "rev-parse", "--short=12", "HEAD")
    (checkout / "kernel.cu").write_text("__global__ void k() { /* tuned */ }\n")
    assert git_commit(checkout) == f"{head}-dirty"


def test_an_untracked_file_leaves_the_commit_clean(checkout):
    (checkout / "notes.txt").write_text("scratch\n")
    assert git_commit(checkout) == _git(checkout, "rev-parse", "--short=12", "HEAD")


def test_outside_a_checkout_the_commit_is_unknown(tmp_path, monkeypatch):
    monkeypatch.delenv("TUNER_GIT_COMMIT", raising=False)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    assert git_commit(tmp_path) == "unknown"


def test_the_environment_names_the_commit_when_set(checkout, monkeypatch):
    monkeypatch.setenv("TUNER_GIT_COMMIT", "abc123")
    assert git_commit(checkout) == "abc123"


def test_an_install_inside_another_projects_checkout_does_not_name_its_commit(checkout, monkeypatch):
    # tuner installed under /some/project/.venv: git, asked from the install's folder, answered with
    # the project's HEAD, which every row then claimed measured it.
    install = checkout / ".venv" / "lib" / "site-packages"
    install.mkdir(parents=True)
    assert git_commit(install) == "unknown"


def test_a_checkout_owned_by_another_user_is_still_read(checkout, monkeypatch):
    # git refuses a repository another user owns ("dubious ownership") unless it is a safe.directory.
    calls = []
    real_run = subprocess.run

    def recording(command, *args, **kwargs):
        calls.append(command)
        return real_run(command, *args, **kwargs)

    monkeypatch.setattr(subprocess, "run", recording)
    git_commit(checkout)
    assert calls and all(f"safe.directory={checkout}" in command for command in calls)
