"""Measured, verified autotuning of memory-bound CUDA kernels.

Importing ``tuner`` never imports PyCUDA: only ``tuner.device.gpu`` does, when a GPU
is asked for, so configuration, compilation, replay and reports work anywhere.
``tuner.tune`` tunes a kernel from Python (``tuner.api``).
"""

__version__ = "0.1.0"


def tune(*args, **kwargs):
    """``tuner.api.tune``: measure a family's space (or an Optuna study of it) in this process."""
    from tuner.api import tune as tune_in_process

    return tune_in_process(*args, **kwargs)
