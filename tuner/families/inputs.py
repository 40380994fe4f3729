"""Random host inputs and their references, computed in parallel.

A 2^28-element input takes numpy seconds to draw on one core, and a sweep
draws several per problem. These helpers split the array into fixed chunks
(so the values depend on the seed alone, not on the machine's core count),
give each chunk its own generator spawned from the caller's, and fill the
chunks on a thread pool: numpy releases the GIL while it fills.
``by_chunks`` runs any element-wise numpy work (a reference's sums) the same way.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Callable

import numpy as np

from tuner.host import usable_cpus

CHUNK = 1 << 22  # elements per chunk and generator


def _fill(rng: np.random.Generator, n: int, dtype, fill: Callable[[np.random.Generator, np.ndarray], None]) -> np.ndarray:
    out = np.empty(n, dtype=dtype)
    generators = rng.spawn(len(range(0, n, CHUNK)))  # one per chunk, whichever thread fills it
    by_chunks(n, lambda piece: fill(generators[piece.start // CHUNK], out[piece]))
    return out


def by_chunks(n: int, work: Callable[[slice], None]) -> None:
    """``work(piece)`` for consecutive slices covering ``range(n)``, on a
    thread pool; ``work`` writes its results into arrays it was given."""
    pieces = [slice(start, min(start + CHUNK, n)) for start in range(0, n, CHUNK)]
    workers = max(1, min(len(pieces), usable_cpus()))
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(work, pieces))


def add(a: np.ndarray, b: np.ndarray, dtype) -> np.ndarray:
    """``a + b`` computed and returned in ``dtype`` (a wider type than the
    inputs': no temporaries of the inputs cast), in parallel chunks."""
    out = np.empty(a.shape, dtype=dtype)

    def work(piece: slice) -> None:
        np.add(a[piece], b[piece], out=out[piece], dtype=dtype)

    by_chunks(a.size, work)
    return out


def uniform(rng: np.random.Generator, low: float, high: float, n: int, dtype=np.float32) -> np.ndarray:
    """``n`` values uniform in [low, high) of a float ``dtype``."""
    dtype = np.dtype(dtype)
    draw = dtype if dtype in (np.float32, np.float64) else np.float32

    def fill(g: np.random.Generator, view: np.ndarray) -> None:
        values = g.random(view.size, dtype=draw)
        values *= high - low
        values += low
        view[...] = values

    return _fill(rng, n, dtype, fill)


def integers(rng: np.random.Generator, low: int, high: int, n: int, dtype=np.int32) -> np.ndarray:
    """``n`` integers in [low, high) of ``dtype``."""

    def fill(g: np.random.Generator, view: np.ndarray) -> None:
        view[...] = g.integers(low, high, size=view.size, dtype=view.dtype)

    return _fill(rng, n, dtype, fill)
