"""One BLAS thread while a search loop chooses.

The project's sampler fits a small ridge model on every ask (matrices of tens
to a few hundred columns). OpenBLAS, as numpy loads it, runs such products on
one thread per core, and on a large host waking them costs more than the
arithmetic: on a 64-core host with four H100s, a 300-trial study of the
reduction space asked in 25 ms (20 ms of CPU) with numpy's default of 64
threads and in 4.1 ms with one, and measured 34 instead of 110 trials a
second (``benchmarks/results/scaling-4gpus-h100.txt``). Each GPU's search
loop, a process of its own, woke its own 64.

The setting is the process's, and a limit set from the thread that asks ahead
did not take (OpenBLAS 0.3.31, as numpy 2 ships it), so a search loop sets it
in the thread that runs it, for its whole run. The tune stage measures in a process of its
own, whose host references keep every thread; ``tuner.tune`` measures in the
loop's process, with one. threadpoolctl finds the BLAS numpy loaded
(OpenBLAS, MKL, BLIS) and restores its setting on the way out.
"""

from __future__ import annotations

import contextlib
import functools
from typing import Iterator


@functools.cache
def _controller():
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()  # scans the loaded libraries once (about 1.5 ms)


@contextlib.contextmanager
def one_blas_thread() -> Iterator[None]:
    """Within the block, the BLAS libraries numpy loaded use one thread."""
    with _controller().limit(limits=1, user_api="blas"):
        yield
