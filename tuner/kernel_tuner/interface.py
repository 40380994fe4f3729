"""``tune_kernel``: Kernel Tuner's call, measured by this project's pipeline."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from tuner.families import REGISTRY
from tuner.kernel_tuner.family import KernelTunerSpec
from tuner.kernel_tuner.results import Results, kernel_tuner_results
from tuner.kernel_tuner.translate import translate
from tuner.kernel_tuner.util import get_config_string
from tuner.search.samplers.registry import DEFAULT_STRATEGY

# Where tune_kernel writes (``configure``): the results folder, as ``tuner.tune``'s ``results``.
_settings: dict[str, Any] = {"results": Path("results")}
_last: dict[str, Path] = {}


def configure(*, results: str | Path | None = None) -> None:
    """Where ``tune_kernel`` writes its rows (default ``results`` in the
    working directory; a GPU's rows land in ``<results>/<gpu>/``, generated
    kernel sources in ``<results>/.kernel_tuner/``)."""
    if results is not None:
        _settings["results"] = Path(results)


def last_results_folder() -> Path | None:
    """The GPU folder the last ``tune_kernel`` call of this process wrote to."""
    return _last.get("folder")


def tune_kernel(
    kernel_name: str,
    kernel_source: Any,
    problem_size: Any,
    arguments: Sequence,
    tune_params: Mapping[str, Sequence],
    grid_div_x: Any = None,
    grid_div_y: Any = None,
    grid_div_z: Any = None,
    restrictions: Any = None,
    answer: Sequence | None = None,
    atol: float = 1e-6,
    verify: Callable | None = None,
    verbose: bool = False,
    lang: str | None = None,
    device: int = 0,
    platform: int = 0,
    smem_args: Mapping | None = None,
    cmem_args: Mapping | None = None,
    texmem_args: Mapping | None = None,
    compiler: str | None = None,
    compiler_options: Sequence[str] | None = None,
    defines: Mapping | None = None,
    log: Any = None,
    iterations: int = 7,
    block_size_names: Sequence[str] | None = None,
    quiet: bool = False,
    strategy: str | None = None,
    strategy_options: Mapping | None = None,
    cache: Any = None,
    metrics: Mapping | None = None,
    simulation_mode: Any = None,
    parallel: Any = None,
    observers: Any = None,
    objective: str | None = None,
    objective_higher_is_better: bool | None = None,
    objectives: Any = None,
    seed: int | None = None,
) -> tuple[Results, dict]:
    """Tune ``kernel_name`` as Kernel Tuner's ``tune_kernel`` does, with its
    arguments and their meanings (``tuner.kernel_tuner.translate`` says how
    each maps), through this pipeline: nvcc into the cubin cache, the
    verification against ``answer`` (or ``verify``), the timer, the durable
    rows (a call made again measures only what is missing) and the search.

    Returns:
        ``(results, env)`` in Kernel Tuner's shape (``tuner.kernel_tuner.results``).

    Raises:
        KernelTunerArgumentError: an argument with no counterpart, or a value
            Kernel Tuner would refuse: one line naming it, before any GPU work.
        tuner.device.gpu.GpuUnavailable: no PyCUDA or no CUDA device.
    """
    from tuner import api

    results_dir = _settings["results"]
    plan = translate(
        kernel_name, kernel_source, problem_size, arguments, tune_params, sources_dir=results_dir / ".kernel_tuner",
        grid_div_x=grid_div_x, grid_div_y=grid_div_y, grid_div_z=grid_div_z, restrictions=restrictions, answer=answer,
        atol=atol, verify=verify, verbose=verbose, lang=lang, device=device, platform=platform, smem_args=smem_args,
        cmem_args=cmem_args, texmem_args=texmem_args, compiler=compiler, compiler_options=compiler_options, defines=defines,
        log=log, iterations=iterations, block_size_names=block_size_names, quiet=quiet, strategy=strategy,
        strategy_options=strategy_options, cache=cache, metrics=metrics, simulation_mode=simulation_mode, parallel=parallel,
        observers=observers, objective=objective, objective_higher_is_better=objective_higher_is_better,
        objectives=objectives, seed=seed,
    )  # fmt: skip
    known = REGISTRY.families.get(plan.spec.name)
    if isinstance(known, KernelTunerSpec):  # this call made before in this process: its family, with this call's data
        known.take_data_of(plan.spec)
        plan.spec = known
    say = (lambda line: None) if plan.quiet else print
    for note in plan.notes:
        say(f"tune_kernel: {note}")
    say(f"tune_kernel: {kernel_name} as family {plan.spec.name} ({plan.problem.key}): {plan.strategy}")
    started = time.perf_counter()
    try:
        tuned = api.tune(plan.spec, n=plan.problem.n, dtype=plan.problem.dtype, budget=plan.budget, timeout_s=plan.timeout_s,
                         sampler=plan.sampler or DEFAULT_STRATEGY, seed=plan.seed, name=plan.spec.name, results=results_dir,
                         device_index=plan.device_index, timing=plan.timing)  # fmt: skip
    finally:
        plan.spec.release_data()
    wall = time.perf_counter() - started
    _last["folder"] = Path(tuned.folder)
    results, env = kernel_tuner_results(tuned.rows, plan, Path(tuned.folder), wall)
    keys = [*plan.tune_params, "time", *plan.metrics]
    if plan.verbose:
        for result in results:
            say(get_config_string(result, keys + ["__error__"]))
    wrong = sum(1 for r in results if str(r.get("__error__")) == "WrongResultConfig")
    if wrong:
        say(f"tune_kernel: {wrong} configurations gave wrong results (Kernel Tuner would have stopped at the first); "
            f"they carry __error__ and the reason")  # fmt: skip
    if env["best_config"] is not None:
        say(f"best performing configuration: {get_config_string(env['best_config'], keys)} (tie set of {len(env['tie_set'])})")
    else:
        say("no results to report")
    return results, env
