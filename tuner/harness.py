"""The measuring harness of a stage on this process's GPU: the device.json it
checks against, the ``Bench``, the peaks it reports fractions of."""

from __future__ import annotations

from pathlib import Path

from tuner.settings import ConfigError, Settings


def device_json(args, settings: Settings) -> Path:
    path = Path(args.device) if getattr(args, "device", None) else settings.run.gpu_dir / "device.json"
    if not path.exists():
        raise ConfigError(f"--device: must name the device.json the describe stage wrote, got {str(path)!r}, which does not exist"
                          f" (run `python -m tuner describe` first)")  # fmt: skip
    return path


def open_bench(settings: Settings, device_json: Path | None, timing, device_index: int | None = None):
    """(the Bench on the run's GPU or ``device_index``, the device's facts)."""
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
    return bench, device


def describe(gpu) -> dict:
    from tuner.device.describe import describe as facts

    return facts(gpu)


def load_peaks(bench, peaks_json: Path) -> None:
    from tuner.data.readback import read_json

    if peaks_json.exists():
        bench.peaks = read_json(peaks_json, numbers=("_gbs",))
