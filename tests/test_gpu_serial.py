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
