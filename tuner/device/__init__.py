"""The device: the only package that touches PyCUDA (``gpu``) and NVML
(``clocks``, ``describe``). It imports nothing else of the tuner, and PyCUDA
only when a ``Gpu`` is made, so ``import tuner`` works without CUDA.
"""
