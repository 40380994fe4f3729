"""The measuring harness of a stage on this process's GPU: the device.json it
checks against, the ``Bench``, the peaks it reports fractions of."""

from __future__ import annotations

import sys
from pathlib import Path

from tuner.settings import ConfigError, Settings


def device_json(given: str | None, settings: Settings) -> Path:
    """The describe stage's device.json: ``given`` (``--device``), else the run's."""
    path = Path(given) if given else settings.run.gpu_dir / "device.json"
    if not path.exists():
        raise ConfigError(f"--device: must name the device.json the describe stage wrote, got {str(path)!r}, which does not exist"
                          f" (run `python -m tuner describe` first)")  # fmt: skip
    return path


def open_bench(settings: Settings, device_json: Path | None, timing, device_index: int | None = None, energy: bool = False):
    """(the Bench on the run's GPU or ``device_index``, the device's facts);
    ``energy``: every verified row also gets its energy (tuner.measure.energy)."""
    from tuner.device.gpu import require_gpu
    from tuner.measure.bench import Bench, environment_columns

    run = settings.run
    gpu = require_gpu(run.device_index if device_index is None else device_index)
    from tuner.data.readback import read_json

    device = read_json(device_json) if device_json else describe(gpu)
    if device["name"] != gpu.name:
        raise SystemExit(f"error: {device_json} describes {device['name']!r} but this process sees {gpu.name!r}")
    device = {**device, "pci_bus_id": gpu.pci_bus_id}  # the card this process measures on
    if run.arch != "auto":
        gpu.arch = run.arch
    bench = Bench(gpu=gpu, environment=environment_columns(device, run.gpu), cache_dir=Path(run.results_dir) / ".cubin-cache",
                  timing=timing, seed=run.seed)  # fmt: skip
    if energy:
        from tuner.measure.energy import EnergyOptions

        bench.energy = EnergyOptions()
    return bench, device


def open_measuring_bench(settings: Settings, device_json: Path, timing, device_index: int, energy: bool = False):
    """The Bench of a stage's measuring process (``tuner.measure.remote``) on
    GPU ``device_index``, with the peaks; without a GPU, the line and exit
    status the command gives (``error: ...``, 2) before anything is measured."""
    from tuner.device.gpu import GpuUnavailable

    try:
        bench, _ = open_bench(settings, device_json, timing, device_index, energy=energy)
    except GpuUnavailable as error:
        print(f"error: {error}", file=sys.stderr, flush=True)
        raise SystemExit(2) from None
    load_peaks(bench, settings.run.gpu_dir / "peaks.json")
    return bench


def describe(gpu) -> dict:
    from tuner.device.describe import describe as facts

    return facts(gpu)


def load_peaks(bench, peaks_json: Path) -> None:
    from tuner.data.readback import read_json

    if peaks_json.exists():
        bench.peaks = read_json(peaks_json, numbers=("_gbs",))
