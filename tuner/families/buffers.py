"""Device buffers shared by the one-dimensional families (reduce, copy, ...).

Each input lives twice on the device: a pristine copy, and a working copy with
room for the largest offset. Before a configuration runs, the pristine data is
copied to ``work + offset`` (device to device, untimed), so every offset sees
the same input and kernels that write their input can be reset cheaply.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

MAX_OFFSET_ELEMENTS = 128
POISON_BYTE = 0xFF  # int -1, float NaN: an unwritten output never passes as right


@dataclass
class Inputs1D:
    gpu: object
    pristine: dict = field(default_factory=dict)  # name -> DeviceBuffer
    work: dict = field(default_factory=dict)  # name -> DeviceBuffer (padded)
    itemsize: dict = field(default_factory=dict)
    nbytes: dict = field(default_factory=dict)

    @classmethod
    def upload(cls, gpu, host: dict[str, np.ndarray]) -> "Inputs1D":
        self = cls(gpu)
        for name, array in host.items():
            self.pristine[name] = gpu.upload(array)
            self.work[name] = gpu.alloc(array.nbytes + MAX_OFFSET_ELEMENTS * array.itemsize)
            self.itemsize[name] = array.itemsize
            self.nbytes[name] = array.nbytes
        return self

    def ptr(self, name: str, offset: int) -> np.uintp:
        return self.work[name].ptr(offset * self.itemsize[name])

    def place(self, name: str, offset: int) -> None:
        """Copy the pristine input to ``work + offset``."""
        self.gpu.copy(self.ptr(name, offset), self.pristine[name].ptr(), self.nbytes[name])


def poison(gpu, buffer, nbytes: int | None = None) -> None:
    gpu.fill_bytes(buffer.ptr(), POISON_BYTE, buffer.nbytes if nbytes is None else nbytes)


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def grid_stride_blocks(n: int, elements_per_block_pass: int, blocks_per_sm: int, sm_count: int) -> int:
    """Blocks for a grid-stride kernel: enough to cover n in one pass when
    ``blocks_per_sm`` is 0, else at most ``blocks_per_sm`` per multiprocessor."""
    one_pass = ceil_div(n, elements_per_block_pass)
    return max(1, one_pass if blocks_per_sm == 0 else min(one_pass, blocks_per_sm * sm_count))
