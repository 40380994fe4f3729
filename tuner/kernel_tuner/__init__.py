"""Kernel Tuner scripts, run by this project's pipeline with one line changed.

A Kernel Tuner script changes its import of ``kernel_tuner`` and nothing else::

    import kernel_tuner                        ->  from tuner import kernel_tuner
    from kernel_tuner import tune_kernel       ->  from tuner.kernel_tuner import tune_kernel
    from kernel_tuner.util import ...          ->  from tuner.kernel_tuner.util import ...
    from kernel_tuner.file_utils import ...    ->  from tuner.kernel_tuner.file_utils import ...

``tune_kernel`` takes Kernel Tuner's arguments with Kernel Tuner's meanings
and makes them a ``KernelSpec`` (``translate``), which ``tuner.tune``
measures: compiled into the cubin cache, verified against the ``answer``,
timed with the L2 cache flushed, its rows durable under ``results/`` (a call
made again measures only what is missing), searched by a sweep or an Optuna
study. It returns ``(results, env)`` in Kernel Tuner's shape. An argument
without a counterpart here is one ``KernelTunerArgumentError`` line naming
it, before any GPU work. ``configure(results=...)`` says where rows go.
"""

from __future__ import annotations

from tuner.kernel_tuner.family import KernelTunerArgumentError
from tuner.kernel_tuner.interface import configure, last_results_folder, tune_kernel
from tuner.kernel_tuner.translate import Plan, translate

__all__ = ["KernelTunerArgumentError", "Plan", "configure", "last_results_folder", "translate", "tune_kernel"]
