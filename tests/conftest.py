"""GPU tests carry the `gpu` marker and skip, with the reason, where PyCUDA or a
CUDA device is missing."""

from __future__ import annotations

import functools

import pytest


@functools.lru_cache(maxsize=1)
def gpu_or_reason():
    from tuner.device.gpu import GpuUnavailable, require_gpu

    try:
        return require_gpu(), ""
    except GpuUnavailable as error:
        return None, str(error)


def pytest_collection_modifyitems(config, items):
    gpu_items = [item for item in items if "gpu" in item.keywords]
    if not gpu_items:
        return
    gpu, reason = gpu_or_reason()
    if gpu is None:
        for item in gpu_items:
            item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(scope="session")
def gpu():
    device, reason = gpu_or_reason()
    if device is None:
        pytest.skip(reason)
    return device


@pytest.fixture(scope="session")
def bench(gpu, tmp_path_factory):
    from tuner.device.describe import describe
    from tuner.measure.bench import Bench, environment_columns
    from tuner.measure.timing import TimingOptions

    device = describe(gpu)
    return Bench(
        gpu=gpu,
        environment=environment_columns(device, device["slug"]),
        cache_dir=tmp_path_factory.mktemp("cubins"),
        timing=TimingOptions(max_time_s=0.2),
    )


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
