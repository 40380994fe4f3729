"""``tune_kernel``: Kernel Tuner's call, measured by this project's pipeline."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from tuner.families import REGISTRY
from tuner.kernel_tuner.family import KernelTunerSpec
from tuner.kernel_tuner.results import Results, kernel_tuner_results
from tuner.kernel_tuner.translate import TUNE_KERNEL_SIGNATURE, translate
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


def tune_kernel(*args: Any, **kwargs: Any) -> tuple[Results, dict]:
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

    try:
        call = TUNE_KERNEL_SIGNATURE.bind(*args, **kwargs)  # Kernel Tuner's arguments, by position or name
    except TypeError as error:
        raise TypeError(f"tune_kernel: {error}") from None
    kernel_name = call.arguments["kernel_name"]
    results_dir = _settings["results"]
    plan = translate(*call.args, **call.kwargs, sources_dir=results_dir / ".kernel_tuner")
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


tune_kernel.__signature__ = TUNE_KERNEL_SIGNATURE  # help() and editors show Kernel Tuner's arguments
