"""Command line of the pipeline: one subcommand per stage. The Snakemake rules
call these with ``--settings`` (the JSON of exactly what Snakemake validated);
a user calls them with ``--config`` (default ``config.yaml``); each writes
under ``results/<gpu>/`` unless given ``--out``, e.g.::

    python -m tuner describe
    python -m tuner sweep reduce_ladder
    python -m tuner tune reduce_int32 --gpus 0,1
    python -m tuner best --results results/reference/nvidia-h200 --out-dir /tmp/h200-best
    python -m tuner compare results/reference/nvidia-h100-80gb-hbm3 results/reference/nvidia-h200
    python -m tuner space

(``describe`` first: the others read its ``results/<gpu>/device.json``.)

Bad settings stop with one ``config error:`` line and exit status 2 before any
work; stages that need the GPU stop the same way when PyCUDA or a device is
missing. ``sweep`` and ``tune`` are stages of their own (``tuner.stages``):
their GPU work runs in a measuring process, and when a kernel poisons the CUDA
context the faulting configuration is recorded as ``launch_error`` and a fresh
measuring process (a fresh context) carries on.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Callable

from tuner import harness
from tuner import profile as profiling
from tuner import settings as config_settings
from tuner.data.paths import GpuFolder, cubin_cache
from tuner.errors import DamagedFile, FatalDeviceError, Refusal
from tuner.families import REGISTRY, Problem
from tuner.host import OneLineParser, tolerant_console
from tuner.processes import child_command, child_env, gpu_list, write_refusal
from tuner.settings import ConfigError, Settings

# pandas and pyarrow (a noticeable part of a second to import) are imported where tables
# are written: a stage's measuring process never needs them.

# ---- settings and paths ------------------------------------------------------


def load_settings(args) -> Settings:
    """The stage's settings: the workflow's JSON, or a config file checked
    against this machine's devices and nvcc."""
    if args.settings:
        try:
            return Settings.from_stage_json(args.settings)
        except (ValueError, KeyError, TypeError, AttributeError) as error:  # JSONDecodeError is a ValueError
            if isinstance(error, ConfigError):
                raise
            text = " ".join(str(error).split())[:160]
            raise ConfigError(f"--settings: must be a stage's settings as JSON, as the workflow passes them, "
                              f"got {args.settings[:60]!r}, which fails with {type(error).__name__}: {text}") from None  # fmt: skip
    return _checked_config(args.config)


def _checked_config(path: str) -> Settings:
    """The config file at ``path``, read with its bounds and checked against
    this machine's devices, nvcc and the study storages."""
    from tuner.device.describe import probe_devices
    from tuner.measure.compile import nvcc_architectures
    from tuner.search.study.storage_spec import storage_problem

    return config_settings.load(path, device=probe_devices(), nvcc_archs=nvcc_architectures(), storage_check=storage_problem)


def _out(args, settings: Settings, default: Callable[[GpuFolder], Path]) -> Path:
    """``--out``, else ``default`` of the run's GPU folder (``tuner.data.paths``)."""
    return Path(args.out) if args.out else default(settings.run.folder)


# ---- stages -----------------------------------------------------------------


def cmd_describe(args) -> None:
    """Describe the GPU (device.json): the first stage; stops with one line when there is no GPU."""
    from tuner.data import results
    from tuner.device.gpu import require_gpu

    settings = load_settings(args)
    out = _out(args, settings, lambda folder: folder.device_json)
    device = harness.describe(require_gpu(settings.run.device_index))
    results.write_json_atomic(device, out)
    print(f"{device['name']} (sm {device['compute_capability']}, {device['sm_count']} SMs, L2 {device['l2_bytes'] >> 20} MiB,"
          f" {device['bus_width_bits']}-bit at {device['memory_clock_mhz']:.0f} MHz) -> {out}")  # fmt: skip


def cmd_compile(args) -> None:
    """Compile every kernel variant the sweeps need, and each study's space where
    it is small beside its budget, in parallel; exit 1 if any fails."""
    from tuner.data import results
    from tuner.measure.compile import WHOLE_SPACE_PER_TRIAL, compile_table

    settings = load_settings(args)
    arch = _checked_arch(args.arch, device_index=settings.run.device_index) if args.arch is not None else settings.run.arch
    if arch == "auto":
        arch = _device_arch(harness.device_json(args.device, settings))
    frame, failed, searched = compile_table(settings, arch)
    for name in searched:
        print(f"study {name}: its space has more than {WHOLE_SPACE_PER_TRIAL} modules per trial of its budget (or is too large "
              f"to list): the study compiles what it measures as it searches")  # fmt: skip
    if failed:
        for line in failed[:10]:
            print(f"compile error: {line}", file=sys.stderr)
        raise SystemExit(f"error: {len(failed)} of {len(frame)} modules failed to compile for {arch}; nothing written")
    out = _out(args, settings, lambda folder: folder.compile_parquet)
    results.write_atomic(frame, out)
    print(f"compiled {len(frame)} modules for {arch} -> {out}")


def _checked_arch(arch: str, *, device_index: int | None) -> str:
    """``--arch`` held to the config's ``arch`` rule (``check_arch``): the
    form, the architectures this nvcc builds and, where ``device_index`` names
    one of this machine's GPUs, what runs on it."""
    from tuner.measure.compile import nvcc_architectures

    capability = None
    if device_index is not None:
        from tuner.device.describe import probe_devices

        capability = probe_devices().capability_of(device_index)
    return config_settings.check_arch(arch, where="--arch", capability=capability, nvcc_archs=nvcc_architectures())


def _device_arch(path: Path) -> str:
    from tuner.data.readback import damaged, read_json

    arch = read_json(path).get("arch")
    if not isinstance(arch, str):
        raise DamagedFile(damaged(path, f"its arch is {arch!r}, not an nvcc architecture"))
    return arch


def cmd_peaks(args) -> None:
    """Measure the bandwidth peaks (device copy, read stream, theoretical, CUB) every result is judged against."""
    from tuner.data import results
    from tuner.measure.peaks import measure_peaks

    settings = load_settings(args)
    out = _out(args, settings, lambda folder: folder.peaks_json)
    bench, _ = harness.open_bench(settings, harness.device_json(args.device, settings), settings.run.timing)
    peaks, rows = measure_peaks(bench)
    results.write_atomic(results.to_frame(rows), out.with_suffix(".parquet"))
    results.write_json_atomic(peaks, out)
    cub = f"{peaks['cub_reduce_gbs']:.0f}" if peaks.get("cub_reduce_gbs") else "n/a"
    print(f"peaks: copy {peaks['copy_gbs']:.0f} GB/s, read {peaks['read_gbs'] or float('nan'):.0f} GB/s, "
          f"theoretical {peaks['theoretical_gbs']:.0f} GB/s, CUB reduce {cub} GB/s -> {out}")  # fmt: skip


def cmd_sweep(args) -> None:
    """Measure every feasible configuration of one sweep (resumable: only what the store lacks)."""
    from tuner.stages import sweep

    settings = load_settings(args)
    settings.sweep(args.name)  # an unknown sweep before a missing device.json
    out = _out(args, settings, lambda folder: folder.sweep(args.name))
    sweep.run(settings, args.name, harness.measured_against(args.device, settings), out)


def cmd_tune(args) -> None:
    """Run one Optuna study; with --gpus (or study_gpus in the config), one search loop per GPU shares its budget."""
    from tuner.stages import tune

    started = time.time()  # the study's wall clock: its rows count from here, compiling and loading included
    settings = load_settings(args)
    gpus = [int(g) for g in args.gpus]
    if gpus:  # held to the rule of the config's study_gpus, before a worker starts
        from tuner.device.describe import probe_devices

        count = probe_devices().count
        if count is not None and max(gpus) >= count:
            among = f" (0 to {count - 1})" if count else ""
            raise ConfigError(f"--gpus: must be indices of this machine's {count} CUDA devices{among}, got {','.join(args.gpus)}")
    tune.run(settings, args.name, started=started, gpus=gpus, device=args.device, out=args.out)


def cmd_profile(args) -> None:
    """Hardware counters (Nsight Compute) of the sweeps' verified configurations (all, those the report shows, or the fastest per problem); never timed."""
    from tuner.profile import stage as profile_stage

    settings = load_settings(args)
    if not args.child:  # the sweeps' names, then what the profiled child reads: damage is the stage's one line
        for name in args.names:
            settings.sweep(name)
        harness.measured_against(args.device, settings)
    profile_stage.run(args, settings, bench=lambda s: harness.open_bench(s, harness.device_json(args.device, s), s.sweep(args.names[0]).timing)[0], child=child_command(args), env=child_env())  # fmt: skip


def cmd_collect(args) -> None:
    """Gather sweep, study and peak rows into one measurements.parquet."""
    missing = [p for p in args.inputs if not Path(p).is_file()]
    if missing:
        raise ConfigError(f"inputs: must be existing Parquet files, got {missing[0]!r}, which does not exist")
    from tuner.data import results

    frame = results.collect(args.inputs)
    results.write_atomic(frame, args.out)
    print(f"{len(frame)} rows ({int((frame.status == 'ok').sum())} ok) from {len(args.inputs)} files -> {args.out}")


def cmd_best(args) -> None:
    """Export the best configuration per family and problem: best.json and the C++ header best_configs.h."""
    from tuner.data.export import export

    # The settings, where given, load the run's plug-in families: the header's
    # fallback for other GPUs is each family's defaults. With --results, a
    # config is read only where --config names one.
    settings = None
    if args.settings or args.config or not args.results:
        args.config = args.config or "config.yaml"
        settings = load_settings(args)
    folder = Path(args.results) if args.results else settings.run.gpu_dir
    try:
        print("\n".join(export(folder, Path(args.out_dir) if args.out_dir else folder)))
    except FileNotFoundError as error:
        raise ConfigError(f"--results: {error}") from None


def cmd_compare(args) -> int:
    """Compare two runs configuration by configuration: B / A of each median time with its confidence interval and a verdict (SAME, FASTER, SLOWER, AMBIGUOUS); exit status 1 on a regression beyond --threshold."""
    from tuner.data import compare

    def draw(table, path, **kwargs):  # matplotlib is loaded only once the arguments have passed
        from tuner.report.compare_figure import draw

        return draw(table, path, **kwargs)

    try:
        table, lines = compare.run(args.a, args.b, margin=args.margin, threshold=args.threshold, figure=args.figure,
                                   out=args.table, draw=draw)  # fmt: skip
    except ValueError as error:  # one line naming the argument, the rule and the value
        raise ConfigError(str(error)) from None
    print("\n".join(lines))  # the table and the figure written (both or neither) are among them
    return 1 if len(compare.regressions(table, args.threshold)) else 0


def _load_plugins(args) -> list[str]:
    """The families of ``--family-path`` files, registered; their names."""
    from tuner.families import load_family_paths

    try:
        return load_family_paths(args.family_path or [])
    except ValueError as error:
        raise ConfigError(f"--family-path: {error}") from None


def cmd_t4(args) -> None:
    """Export one problem's rows of a results folder or Parquet file as T4 (the community's results format)."""
    from tuner.data.t4 import export_t4

    try:
        print(export_t4(args.results, args.out, args.problem, args.source))
    except (ValueError, FileNotFoundError) as error:
        raise ConfigError(f"t4: {error}") from None


def cmd_space(args) -> None:
    """How many variants, compiled modules and feasible configurations each family has (a space too large to list: its combinations)."""
    from tuner.families.base import MAX_ENUMERATED
    from tuner.measure.compile import module_key

    plugins = _load_plugins(args)
    for family in [REGISTRY[name] for name in plugins] if plugins else REGISTRY:
        count = family.combinations()  # counted, not listed: a space of 10^12 answers at once
        for dtype in family.dtypes:
            if count > MAX_ENUMERATED:
                print(f"{family.name:12s} {dtype:8s} {count:,} combinations: too many to list (at most {MAX_ENUMERATED:,}), "
                      f"so its feasible configurations and modules are not counted; studies search it without a list")  # fmt: skip
                continue
            problem = Problem(family.name, dtype, args.n)
            space = family.space(problem)
            variants = {c.get("variant", family.name) for c in space} or {family.name}
            modules = {module_key(family, c, problem) for c in space}
            print(
                f"{family.name:12s} {dtype:8s} variants={len(variants):3d} default space={len(space):6d} configurations "
                f"of {count} combinations, {len(modules):4d} modules"
            )


def cmd_verify(args) -> None:
    """Verify (untimed) every variant of every family at two sizes: the pass compute-sanitizer runs over."""
    from tuner.device.gpu import require_gpu
    from tuner.measure.bench import Bench
    from tuner.measure.verify import verify_families

    _load_plugins(args)
    unknown = sorted(set(args.families or []) - set(REGISTRY.names()))
    if unknown:
        raise ConfigError(f"--families: must be among {REGISTRY.names()}, got {unknown}")
    gpu = require_gpu()
    device = harness.describe(gpu)
    bench = Bench.open(gpu, device, args.cache, seed=args.seed)
    total, failures = verify_families(
        bench, [f for f in REGISTRY if not args.families or f.name in args.families], args.sizes, args.cache
    )
    print(f"verified {total - failures}/{total} configurations")
    if failures:
        raise SystemExit(1)


def cmd_check_family(args) -> None:
    """Check a family of one's own, one line per step: load, space, launch, compile (a covering subset; --all: every module), arguments, reference, the stages on made-up rows (and with --gpu, verify the compiled modules)."""
    from tuner.check_family import FamilyDefect, check

    if not Path(args.path).is_file():
        raise ConfigError(f"path: must be the Python file declaring the family, got {args.path!r}, which is not a file")
    arch = _checked_arch(args.arch, device_index=None)  # the modules are compiled for it before any GPU is looked for
    if arch == "auto":
        raise ConfigError("--arch: must be an nvcc architecture such as sm_90 (check-family compiles before it looks for a GPU), got 'auto'")
    device = None
    if args.device:
        try:
            device = json.loads(Path(args.device).read_text())
            if not isinstance(device, dict):
                raise ValueError(f"a JSON object, got {type(device).__name__}")
        except (OSError, ValueError) as error:
            raise ConfigError(f"--device {args.device}: must be a readable device.json (python -m tuner describe), got {error}") from None
    try:
        check(Path(args.path), arch=arch, gpu=args.gpu, list_space=args.list, every=args.all, device=device)
    except FamilyDefect as defect:
        print(f"check-family: {defect}", file=sys.stderr)
        raise SystemExit(1) from None


def cmd_init(args) -> None:
    """Write a config.yaml and a Snakefile (the installed workflow as a Snakemake module) into FOLDER; with --kernel, a KernelSpec skeleton of that CUDA file and a config that sweeps and studies it."""
    from tuner.scaffold import InitRefused, init_folder, say_written

    try:
        written = init_folder(args.folder, kernel=args.kernel, lessons=args.lessons, force=args.force)
    except InitRefused as refusal:
        print(f"init: {refusal}", file=sys.stderr)
        raise SystemExit(2) from None
    say_written(written, args.folder)


def cmd_check_install(args) -> int:
    """What this machine lacks for the cuda extra (nvcc, cuda.h, libcuda, libcurand, a C++ compiler, Python.h) and for GPU stages (a driver), one line each, before pip builds PyCUDA."""
    from tuner.install_check import check_install

    return check_install()


def cmd_check_config(args) -> None:
    """Check a config file as the pipeline reads it (its size, nesting, bytes, YAML and every rule), before Snakemake's --configfile reads it."""
    settings = _checked_config(args.file)
    print(f"{args.file}: ok: {len(settings.sweeps)} sweeps, {len(settings.studies)} studies, results in {settings.run.gpu_dir}")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="tuner", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True, metavar="STAGE")

    def stage(name, func, *, settings=True, out_default=None):
        p = sub.add_parser(name, help=func.__doc__, description=func.__doc__)
        if settings:
            p.add_argument("--config", default="config.yaml", help="config file to read and check (default: config.yaml)")
            p.add_argument("--settings", help="the stage's settings as JSON, as the workflow passes them (instead of --config)")
            p.add_argument("--out", help=f"output file (default: results/<gpu>/{out_default})")
        p.set_defaults(func=func)
        return p

    def needs_device(p):
        p.add_argument("--device", help="device.json from the describe stage (default: results/<gpu>/device.json)")

    def measuring_child(p):
        p.add_argument("--child", action="store_true", help="measure in this process (how the stage runs its measuring child)")

    stage("describe", cmd_describe, out_default="device.json")
    p = stage("compile", cmd_compile, out_default="compile.parquet")
    needs_device(p)
    p.add_argument("--arch", help="nvcc architecture, e.g. sm_90 (default: the config's, else the device's)")
    needs_device(stage("peaks", cmd_peaks, out_default="peaks.json"))
    p = stage("sweep", cmd_sweep, out_default="sweeps/<name>.parquet")
    p.add_argument("name", help="a sweep of the config's sweeps")
    needs_device(p)
    p = stage("tune", cmd_tune, out_default="studies/<name>.parquet")
    p.add_argument("name", help="a study of the config's studies")
    needs_device(p)
    p.add_argument("--gpus", type=gpu_list, default=[], help="e.g. 0,1,2,3: one search loop per GPU, sharing one budget")
    profiling.arguments(stage("profile", cmd_profile, out_default="profiles/<name>.parquet"), needs_device, measuring_child)
    p = stage("collect", cmd_collect, settings=False)
    p.add_argument("inputs", nargs="*", help="Parquet files of sweeps, studies and peaks")
    p.add_argument("--out", required=True, help="the measurements.parquet to write")
    p = stage("verify", cmd_verify, settings=False)
    p.add_argument("--family-path", action="append", help="a Python file declaring families of one's own (repeatable)")
    p.add_argument("--families", nargs="*", help=f"families to verify (default: all of {REGISTRY.names()} and the --family-path ones)")
    p.add_argument("--sizes", type=_positive_int, nargs="+", help="problem sizes (default: each family's check_sizes)")
    p.add_argument("--cache", default=str(cubin_cache("results")), help="cubin cache folder")
    p.add_argument("--seed", type=int, default=1, help="seed of the random inputs")
    p = stage("best", cmd_best, out_default="best.json")
    # Without --results, config.yaml names the folder; with it, a config is read where named: its plug-in families.
    p.set_defaults(config=None)
    p.add_argument("--results", help="a results folder (default: the config's results/<gpu>; a --config then loads "
                                     "the run's plug-in families, whose defaults the header gives other GPUs)")  # fmt: skip
    p.add_argument("--out-dir", help="where best.json and best_configs.h go (default: the results folder)")
    p = stage("compare", cmd_compare, settings=False)
    p.add_argument("a", metavar="A", help="the baseline: a results folder (its measurements.parquet) or a Parquet file of rows")
    p.add_argument("b", metavar="B", help="the run compared with it, the same way")
    p.add_argument("--margin", type=float, default=0.005, help="within it SAME, beyond it (95 %% sure) FASTER or SLOWER (default 0.005)")
    p.add_argument("--threshold", type=float, default=0.02, help="exit status 1 when one is SLOWER by this or more (default 0.02)")
    p.add_argument("--figure", help="draw every ratio with its interval to this .png, .svg or .pdf")
    p.add_argument("--table", help="write the per-configuration table to this .csv or .parquet")

    p = stage("t4", cmd_t4, settings=False)
    p.add_argument("results", help="a results Parquet file (measurements.parquet, sweeps/*.parquet) or a results folder "
                                   "(its measurements.parquet, else its sweeps/, studies/ and peaks.parquet; never profiles/)")  # fmt: skip
    p.add_argument("--out", required=True, help="the T4 file to write (.json, or .json.gz gzipped); an earlier export "
                                                "is replaced, the input or any Parquet file never")  # fmt: skip
    p.add_argument("--problem", help="family-dtype-nN, where the results hold several problems")
    p.add_argument("--source", help="the rows' source, e.g. sweep:reduce_space (default: the problem's largest)")
    p = stage("space", cmd_space, settings=False)
    p.add_argument("--n", type=_positive_int, default=1 << 28, help="problem size the spaces are counted for (default: 2^28)")
    p.add_argument("--family-path", action="append", help="a Python file declaring families of one's own: count those (repeatable)")
    p = stage("check-family", cmd_check_family, settings=False)
    p.add_argument("path", help="the Python file declaring the family (a KernelSpec or a Family subclass)")
    p.add_argument("--arch", default="sm_90", help="nvcc architecture to compile for (default: sm_90)")
    p.add_argument("--gpu", action="store_true", help="also verify every module on this machine's GPU")
    p.add_argument("--list", action="store_true", help="print every configuration of the space, with why it is infeasible")
    p.add_argument("--all", action="store_true", help="compile every feasible configuration, not a covering subset")
    p.add_argument("--device", help="a device.json whose limits and SM count to check against (default: CUDA's limits)")
    p = stage("init", cmd_init, settings=False)
    p.add_argument("folder", nargs="?", default=".", metavar="FOLDER", help="the folder to write into (default: this one)")
    p.add_argument("--kernel", metavar="FILE.cu", help="a CUDA file whose kernels the folder tunes: writes their KernelSpec skeleton")
    p.add_argument("--lessons", action="store_true", help="also run the lessons' sweeps and studies (always, without --kernel)")
    p.add_argument("--force", action="store_true", help="replace config.yaml, Snakefile or the skeleton where they exist")
    stage("check-install", cmd_check_install, settings=False)
    p = stage("check-config", cmd_check_config, settings=False)
    p.add_argument("file", help="the config file to check, e.g. one to give Snakemake's --configfile")
    return parser


def main(argv: list[str] | None = None) -> int:
    tolerant_console()
    args = build_parser().parse_args(argv)
    try:
        status = args.func(args)
    except Refusal as error:  # a config error, a damaged file, no GPU, ...: its one line, never a traceback
        line = " ".join(error.line().split())
        print(line, file=sys.stderr)
        write_refusal(line, error.exit_status)  # for the stage that started this one, if any
        return error.exit_status
    except OSError as error:
        if error.filename is None:
            raise  # not about a path the user gave: a bug or the system, with its traceback
        # An output under a file, a folder not writable, a full disk: the path and the reason.
        print(f"error: {error.filename}: {error.strerror or error}", file=sys.stderr)
        return 1
    except FatalDeviceError as error:  # a stage measuring in this process (peaks, verify, the profiled harness)
        print(f"error: {error}", file=sys.stderr)
        return 1
    return status or 0  # a stage's own exit status (compare: 1 on a regression), else 0


if __name__ == "__main__":
    sys.exit(main())
