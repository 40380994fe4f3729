"""Measured, verified autotuning of memory-bound CUDA kernels.

Importing ``tuner`` never imports PyCUDA: only ``tuner.device.gpu`` does, when a GPU
is asked for, so configuration, compilation, replay and reports work anywhere.
"""

__version__ = "0.1.0"
