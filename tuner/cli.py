"""Command line of the pipeline: one subcommand per stage. The Snakemake rules
call these; a user can too (``python -m tuner sweep reduce_ladder``).

Stages that need the GPU stop with one line naming what is missing (PyCUDA or a
CUDA device) and exit status 2, before anything is measured.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd

from tuner import config as configuration
from tuner import results
from tuner.families import REGISTRY, Problem


def _bench(config: dict, device_json: Path | None = None):
    from tuner.gpu import require_gpu
    from tuner.measure import Bench, environment_columns

    gpu = require_gpu()
    device = json.loads(Path(device_json).read_text()) if device_json else _describe(gpu)
    if device["name"] != gpu.name:
        raise SystemExit(f"error: {device_json} describes {device['name']!r} but this process sees {gpu.name!r}")
    device = {**device, "pci_bus_id": gpu.pci_bus_id}  # the card this process measures on
    arch = config.get("arch", "auto")
    if arch != "auto":
        gpu.arch = arch
    results_dir = Path(config["results_dir"])
    bench = Bench(gpu=gpu, environment=environment_columns(device, device["slug"]), cache_dir=results_dir / ".cubin-cache",
                  timing=configuration.timing_options(config.get("timing", {})), seed=config.get("seed", 0))  # fmt: skip
    return bench, device


def _describe(gpu) -> dict:
    from tuner.device import describe

    return describe(gpu)


def _load_peaks(bench, peaks_json: Path | None) -> None:
    if peaks_json and Path(peaks_json).exists():
        bench.peaks = json.loads(Path(peaks_json).read_text())


def cmd_describe(args) -> None:
    from tuner.gpu import require_gpu

    device = _describe(require_gpu())
    results.write_json_atomic(device, args.out)
    print(f"{device['name']} (sm {device['compute_capability']}, {device['sm_count']} SMs, L2 {device['l2_bytes'] >> 20} MiB,"
          f" {device['bus_width_bits']}-bit at {device['memory_clock_mhz']:.0f} MHz) -> {args.out}")  # fmt: skip


def _all_variants(config: dict):
    """(family, problem, configs) for every sweep and study of the config."""
    for sweep in config.get("sweeps", {}).values():
        family = REGISTRY[sweep["family"]]
        for dtype in sweep["dtypes"]:
            for n in sweep["sizes"]:
                problem = Problem(family.name, dtype, n)
                yield family, problem, family.space(problem, sweep.get("params", {}))
    for study in config.get("studies", {}).values():
        family = REGISTRY[study["family"]]
        problem = Problem(family.name, study["dtype"], study["n"])
        yield family, problem, family.space(problem, study.get("params") or None)


def cmd_compile(args) -> None:
    from tuner.compile import CompileError, compile_all

    config = configuration.load(args.config)
    arch = args.arch or config.get("arch", "auto")
    if arch == "auto":
        arch = json.loads(Path(args.device).read_text())["arch"]
    cache = Path(config["results_dir"]) / ".cubin-cache"
    rows, failures = [], 0
    for family, problem, configs in _all_variants(config):
        for key, compiled in compile_all(
            family, configs, problem, arch=arch, cache_dir=cache, jobs=config.get("compile_jobs") or None
        ).items():
            if isinstance(compiled, CompileError):
                failures += 1
                rows.append(
                    {
                        "family": family.name,
                        "dtype": problem.dtype,
                        "module": key,
                        "status": "compile_error",
                        "error": str(compiled)[-2000:],
                    }
                )
            else:
                rows.append({"family": family.name, "dtype": problem.dtype, "module": key, "status": "ok", "kernel": compiled.kernel,
                             "arch": arch, "cubin_key": compiled.key, "registers": compiled.registers, "shared_bytes": compiled.shared_bytes,
                             "spill_bytes": compiled.spill_bytes, "local_bytes": compiled.local_bytes})  # fmt: skip
    frame = pd.DataFrame(rows).drop_duplicates(["family", "dtype", "module"])
    results.write_atomic(frame, args.out)
    print(f"compiled {int((frame.status == 'ok').sum())} modules for {arch}, {failures} failed -> {args.out}")


def cmd_peaks(args) -> None:
    from tuner.peaks import measure_peaks

    config = configuration.load(args.config)
    bench, _ = _bench(config, args.device)
    peaks, rows = measure_peaks(bench)
    results.write_atomic(results.to_frame(rows), Path(args.out).with_suffix(".parquet"))
    results.write_json_atomic(peaks, args.out)
    cub = f"{peaks['cub_reduce_gbs']:.0f}" if peaks.get("cub_reduce_gbs") else "n/a"
    print(f"peaks: copy {peaks['copy_gbs']:.0f} GB/s, read {peaks['read_gbs'] or float('nan'):.0f} GB/s, "
          f"theoretical {peaks['theoretical_gbs']:.0f} GB/s, CUB reduce {cub} GB/s -> {args.out}")  # fmt: skip


def cmd_sweep(args) -> None:
    from tuner.sweep import run_sweep, store_dir

    config = configuration.load(args.config)
    sweep = config["sweeps"][args.name]
    bench, device = _bench(config, args.device)
    _load_peaks(bench, args.peaks)
    gpu_dir = Path(args.out).parent.parent
    family = REGISTRY[sweep["family"]]
    problems = [Problem(family.name, d, n) for d in sweep["dtypes"] for n in sweep["sizes"]]
    if sweep.get("timing"):
        bench.timing = configuration.timing_options({**config.get("timing", {}), **sweep["timing"]})
    frame = run_sweep(args.name, family, problems, sweep.get("params", {}), store=store_dir(gpu_dir, args.name),
                      open_problem=bench.problem)  # fmt: skip
    results.write_atomic(frame, args.out)
    _print_best(frame, f"sweep {args.name}")


def cmd_tune(args) -> None:
    """Run an Optuna study; with --gpus, one worker process per GPU shares it."""
    from tuner.study import open_storage, run_study, study_rows

    config = configuration.load(args.config)
    gpu_dir = Path(args.out).parent.parent
    settings = configuration.study_settings(config, args.name, gpu_dir)
    device = json.loads(Path(args.device).read_text())
    study_name = f"{device['slug']}/{args.name}"
    if len(args.gpus) > 1:
        _run_workers(args)
        import optuna

        study = optuna.load_study(study_name=study_name, storage=open_storage(settings.storage))
    else:
        bench, device = _bench(config, args.device)
        _load_peaks(bench, args.peaks)
        study_config = config["studies"][args.name]
        if study_config.get("timing"):
            bench.timing = configuration.timing_options({**config.get("timing", {}), **study_config["timing"]})
        family = REGISTRY[settings.family]
        session = bench.problem(family, settings.problem)
        source = f"study:{args.name}"
        study = run_study(family=family, problem=settings.problem, domains=settings.params or None, storage=settings.storage,
                          study_name=study_name, measure=lambda cfg: session.measure(cfg, source),
                          budget_trials=settings.budget_trials, timeout_s=settings.timeout_s, sampler=settings.sampler,
                          seed=settings.seed + args.worker, enqueue=settings.enqueue).study  # fmt: skip
    if args.worker_only:
        return
    frame = results.to_frame(study_rows(study))
    results.write_atomic(frame, args.out)
    _print_best(frame, f"study {args.name} ({settings.sampler}, budget {settings.budget_trials})")


def _run_workers(args) -> None:
    """One `tuner tune --worker-only` process per GPU (CUDA_VISIBLE_DEVICES), all
    on the study's shared storage: they split one trial budget."""
    import os
    import subprocess

    processes = []
    for worker, gpu in enumerate(args.gpus):
        command = [sys.executable, "-m", "tuner", "tune", args.name, "--config", args.config, "--device", args.device,
                   "--out", args.out, "--worker", str(worker), "--worker-only", "--gpus", gpu]  # fmt: skip
        if args.peaks:
            command += ["--peaks", args.peaks]
        processes.append(subprocess.Popen(command, env={**os.environ, "CUDA_VISIBLE_DEVICES": gpu}))
    failed = [gpu for gpu, process in zip(args.gpus, processes) if process.wait() != 0]
    if failed:
        raise SystemExit(f"error: the study workers on GPUs {failed} failed; finished trials are kept in the study storage")


def cmd_collect(args) -> None:
    frames = [results.read(p) for p in args.inputs]
    frame = results.to_frame(pd.concat(frames, ignore_index=True)) if frames else results.to_frame([])
    results.write_atomic(frame, args.out)
    print(f"{len(frame)} rows ({int((frame.status == 'ok').sum())} ok) from {len(args.inputs)} files -> {args.out}")


def cmd_space(args) -> None:
    """How many variants, compiled modules and feasible configurations each family has."""
    from tuner.compile import module_key

    for family in REGISTRY:
        for dtype in family.dtypes:
            problem = Problem(family.name, dtype, args.n)
            space = family.space(problem)
            variants = sorted(
                {c.get("variant", family.name) for c in family.configs({"variant": list(family.param("variant").values)})}
            )
            modules = {module_key(family, c, problem) for c in space}
            print(
                f"{family.name:12s} {dtype:8s} variants={len(variants):3d} default space={len(space):6d} configurations, {len(modules):4d} modules"
            )


def cmd_verify(args) -> None:
    """Verify (untimed) every variant of every family, each compile-time value at
    least once, at two sizes: the pass compute-sanitizer runs over."""
    from tuner.compile import compile_all
    from tuner.gpu import require_gpu
    from tuner.measure import Bench, environment_columns
    from tuner.timing import TimingOptions

    gpu = require_gpu()
    device = _describe(gpu)
    bench = Bench(gpu=gpu, environment=environment_columns(device, device["slug"]), cache_dir=Path(args.cache),
                  timing=TimingOptions(), seed=args.seed)  # fmt: skip
    failures = total = 0
    for family in REGISTRY:
        if args.families and family.name not in args.families:
            continue
        for dtype in family.dtypes:
            for n in args.sizes or family.check_sizes:
                problem = Problem(family.name, dtype, n)
                configs = family.covering_configs(problem)
                compile_all(family, configs, problem, arch=gpu.arch, cache_dir=args.cache)
                session = bench.problem(family, problem)
                for cfg in configs:
                    row = session.measure(cfg, "verify", timed=False)
                    total += 1
                    if row["status"] != "ok":
                        failures += 1
                        print(f"FAIL {family.name} {dtype} n={problem.n} {row['config_key']}: {row['status']} {row['error']}")
                print(f"{family.name:12s} {dtype:8s} n={problem.n:<10d} {len(configs):4d} configurations verified")
                del session
    print(f"verified {total - failures}/{total} configurations")
    if failures:
        raise SystemExit(1)


def _print_best(frame: pd.DataFrame, what: str) -> None:
    ok = frame[frame.status == "ok"]
    counts = frame.status.value_counts().to_dict()
    if ok.empty:
        print(f"{what}: no verified configuration; statuses {counts}")
        return
    best = ok.loc[ok.bandwidth_gbs.idxmax()]
    print(f"{what}: {len(frame)} rows {counts}; best {best.bandwidth_gbs:.0f} GB/s "
          f"({best['fraction_of_copy_peak'] or float('nan'):.3f} of copy peak) {best['dtype']} n={best['n']} {best['config_key']}")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tuner", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    def add(name, func, *arguments):
        p = sub.add_parser(name, help=func.__doc__)
        for flags, kwargs in arguments:
            p.add_argument(*flags, **kwargs)
        p.set_defaults(func=func)
        return p

    cfg = (["--config"], {"default": "config.yaml"})
    out = (["--out"], {"required": True})
    dev = (["--device"], {"help": "device.json from the describe stage"})
    peaks = (["--peaks"], {"help": "peaks.json from the peaks stage"})
    add("describe", cmd_describe, out)
    add("compile", cmd_compile, cfg, out, dev, (["--arch"], {"help": "e.g. sm_90; default: config, then the device"}))
    add("peaks", cmd_peaks, cfg, out, dev)
    add("sweep", cmd_sweep, (["name"], {}), cfg, out, dev, peaks)
    add(
        "tune",
        cmd_tune,
        (["name"], {}),
        cfg,
        out,
        dev,
        peaks,
        (["--worker"], {"type": int, "default": 0, "help": "worker number (seed offset) when several GPUs share one study"}),
        (["--worker-only"], {"action": "store_true", "help": "measure trials, write no output (a worker of --gpus)"}),
        (
            ["--gpus"],
            {"type": lambda text: [g for g in text.split(",") if g], "default": [], "help": "e.g. 0,1,2,3: one worker per GPU"},
        ),
    )
    add("collect", cmd_collect, (["inputs"], {"nargs": "*"}), out)
    add(
        "verify",
        cmd_verify,
        (["--families"], {"nargs": "*"}),
        (["--sizes"], {"type": int, "nargs": "+", "help": "default: each family's check_sizes"}),
        (["--cache"], {"default": "results/.cubin-cache"}),
        (["--seed"], {"type": int, "default": 1}),
    )
    add("space", cmd_space, (["--n"], {"type": int, "default": 1 << 28}))
    args = parser.parse_args(argv)
    from tuner.gpu import GpuUnavailable

    try:
        args.func(args)
    except GpuUnavailable as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except configuration.ConfigError as error:
        print(f"config error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
