"""The measuring harness of a stage on this process's GPU: the device.json it
checks against, the ``Bench``, the peaks it reports fractions of."""

from __future__ import annotations

from pathlib import Path

from tuner.settings import ConfigError, Settings


def device_json(given: str | None, settings: Settings) -> Path:
    """The describe stage's device.json: ``given`` (``--device``), else the
    run's; read here, so that a damaged one stops the stage in one line
    before it starts a process or touches the GPU.

    Raises:
        ConfigError: there is none.
        DamagedFile: it is not a JSON object.
    """
    from tuner.data.readback import read_json

    path = Path(given) if given else settings.run.folder.device_json
    if not path.exists():
        raise ConfigError(f"--device: must name the device.json the describe stage wrote, got {str(path)!r}, which does not exist"
                          f" (run `python -m tuner describe` first)")  # fmt: skip
    read_json(path)
    return path


def measured_against(given: str | None, settings: Settings) -> Path:
    """``device_json``, and the run's peaks.json (where there is one) read
    too: what a measuring stage's processes read before they measure, read
    by the stage first, so that damage to either is its one line before any
    process starts."""
    path = device_json(given, settings)
    peaks = settings.run.folder.peaks_json
    if peaks.exists():
        from tuner.data.readback import read_json

        read_json(peaks, numbers=("_gbs",))
    return path


def open_bench(settings: Settings, device_json: Path | None, timing, device_index: int | None = None, energy: bool = False):
    """(the Bench on the run's GPU or ``device_index``, the device's facts);
    ``energy``: every verified row also gets its energy (tuner.measure.energy)."""
    from tuner.device.gpu import require_gpu
    from tuner.measure.bench import Bench

    run = settings.run
    gpu = require_gpu(run.device_index if device_index is None else device_index)
    from tuner.data.readback import read_json

    device = read_json(device_json) if device_json else describe(gpu)
    if device["name"] != gpu.name:
        raise SystemExit(f"error: {device_json} describes {device['name']!r} but this process sees {gpu.name!r}")
    device = {**device, "pci_bus_id": gpu.pci_bus_id}  # the card this process measures on
    if run.arch != "auto":
        gpu.arch = run.arch
    bench = Bench.open(gpu, device, run.cubin_cache, slug=run.gpu, timing=timing, seed=run.seed)
    if energy:
        from tuner.measure.energy import EnergyOptions

        bench.energy = EnergyOptions()
    return bench, device


def open_measuring_bench(settings: Settings, device_json: Path, timing, device_index: int, energy: bool = False):
    """The Bench of a stage's measuring process (``tuner.measure.remote``) on
    GPU ``device_index``, with the peaks, once no compile stage is compiling
    into its cubin cache (``tuner.measure.compile.wait_for_compile_stage``). Without a GPU, or with a damaged
    device.json or peaks.json, the refusal (``GpuUnavailable``,
    ``DamagedFile``) reaches the stage as its one line and exit status."""
    from tuner.measure.compile import wait_for_compile_stage

    bench, _ = open_bench(settings, device_json, timing, device_index, energy=energy)
    load_peaks(bench, settings.run.folder.peaks_json)
    waited = wait_for_compile_stage(settings.run.cubin_cache)  # the cache the compile stage fills
    if waited >= 0.1:
        print(f"waited {waited:.1f} s for the compile stage, which ran beside the peaks", flush=True)
    return bench


def describe(gpu) -> dict:
    from tuner.device.describe import describe as facts

    return facts(gpu)


def load_peaks(bench, peaks_json: Path) -> None:
    from tuner.data.readback import read_json

    if peaks_json.exists():
        bench.peaks = read_json(peaks_json, numbers=("_gbs",))
