"""Without a GPU: the reduction's ``finish`` parameter (who adds the block sums)
in the space, the compile recipe and the launch plan each finish enqueues."""

from __future__ import annotations

import numpy as np
import pytest

from tuner.families import REGISTRY, Problem
from tuner.families.reduce import COUNTER, SUMS, TOTAL
from tuner.measure.compile import module_key

FAMILY = REGISTRY["reduce"]
PROBLEM = Problem("reduce", "float32", (1 << 20) + 37)
SHUFFLE = {p.name: p.default for p in FAMILY.params} | {"block_size": 256, "unroll": 4, "vector_width": 4}


def test_device_finishes_are_for_the_shuffle_kernel_only():
    assert SHUFFLE["finish"] == "host"  # the lesson's kernels and old results: partial sums, host adds
    for finish in ("host", "second_pass", "last_block", "atomic"):
        assert FAMILY.violations(SHUFFLE | {"finish": finish}, PROBLEM) == []
    ladder = SHUFFLE | {"variant": "complete_template", "unroll": 8, "vector_width": 1}
    assert FAMILY.violations(ladder, PROBLEM) == []
    assert FAMILY.violations(ladder | {"finish": "atomic"}, PROBLEM) == [
        "finish applies only to variant shuffle (must be 'host' for complete_template), got 'atomic'"
    ]
    assert FAMILY.violations(SHUFFLE | {"finish": "cub"}, PROBLEM) == [
        "finish must be one of ['host', 'second_pass', 'last_block', 'atomic'], got 'cub'"
    ]


def test_finish_defines_and_shared_modules():
    finish_define = {f: FAMILY.defines(SHUFFLE | {"finish": f}, PROBLEM)["FINISH"] for f in FAMILY.param("finish").values}
    assert finish_define == {"host": "0", "second_pass": "0", "last_block": "1", "atomic": "2"}
    keys = {f: module_key(FAMILY, SHUFFLE | {"finish": f}, PROBLEM) for f in finish_define}
    assert keys["host"] == keys["second_pass"]  # the second pass relaunches the partials kernel
    assert len({keys["host"], keys["last_block"], keys["atomic"]}) == 3
    ladder = SHUFFLE | {"variant": "interleaved", "unroll": 1, "vector_width": 1}
    assert "FINISH" not in FAMILY.defines(ladder, PROBLEM)
    # Every finish is judged on the same bytes: the input read once plus one result.
    assert {FAMILY.bytes_moved(SHUFFLE | {"finish": f}, PROBLEM) for f in finish_define} == {(PROBLEM.n + 1) * 4}


class FakeBuffer:
    def __init__(self, base: int, nbytes: int) -> None:
        self.base, self.nbytes = base, nbytes

    def ptr(self, byte_offset: int = 0) -> int:
        assert 0 <= byte_offset <= self.nbytes
        return self.base + byte_offset


class FakeGpu:
    """Records what a launch plan enqueues, in order."""

    sm_count = 132

    def __init__(self) -> None:
        self.log: list[tuple] = []
        self.next_base = 1 << 20

    def alloc(self, nbytes: int) -> FakeBuffer:
        self.next_base += 1 << 32
        return FakeBuffer(self.next_base, nbytes)

    def upload(self, array: np.ndarray, pad_bytes: int = 0) -> FakeBuffer:
        return self.alloc(array.nbytes + pad_bytes)

    def copy(self, dst, src, nbytes) -> None:
        self.log.append(("copy", int(dst), int(src), nbytes))

    def fill_bytes(self, dst, value: int, nbytes: int) -> None:
        self.log.append(("fill", int(dst), value, nbytes))

    def launcher(self, function, grid, block, *args):
        return lambda: self.log.append(("launch", grid, block, tuple(int(a) for a in args)))

    def download(self, buffer, shape, dtype, byte_offset: int = 0) -> np.ndarray:
        self.log.append(("download", int(buffer.ptr(byte_offset)), shape))
        return np.zeros(shape, dtype=dtype)


@pytest.mark.parametrize("finish", ["host", "second_pass", "last_block", "atomic"])
def test_each_finish_enqueues_its_whole_reduction(finish):
    gpu = FakeGpu()
    inputs = FAMILY.make_inputs(PROBLEM, np.random.default_rng(0))
    buffers = FAMILY.allocate(PROBLEM, inputs, gpu)
    workspace = buffers.workspace
    total, counter, sums = (workspace.ptr(k * 4) for k in (TOTAL, COUNTER, SUMS))
    cfg = SHUFFLE | {"finish": finish}
    gpu.log.clear()
    launch = FAMILY.bind(cfg, PROBLEM, buffers, function=None, gpu=gpu)
    grid = launch.grid[0]
    assert grid == FAMILY.grid_size(cfg, PROBLEM, gpu.sm_count) > 1
    # Untimed set-up: the counter zeroed, the outputs poisoned.
    assert ("fill", counter, 0, 4) in gpu.log
    assert ("fill", total, 0xFF, 4) in gpu.log and ("fill", sums, 0xFF, grid * 4) in gpu.log
    gpu.log.clear()
    launch.run()
    data = int(buffers.inputs.ptr("data", 0))
    n = PROBLEM.n
    expected_run = {
        "host": [("launch", (grid, 1, 1), (256, 1, 1), (data, sums, n))],
        "second_pass": [
            ("launch", (grid, 1, 1), (256, 1, 1), (data, sums, n)),
            ("launch", (1, 1, 1), (256, 1, 1), (sums, total, grid)),
        ],
        "last_block": [("launch", (grid, 1, 1), (256, 1, 1), (data, workspace.ptr(), n))],
        "atomic": [("fill", total, 0, 4), ("launch", (grid, 1, 1), (256, 1, 1), (data, workspace.ptr(), n))],
    }[finish]
    assert gpu.log == expected_run
    gpu.log.clear()
    output = launch.fetch()
    assert gpu.log == [("download", sums, grid) if finish == "host" else ("download", total, 1)]
    assert output.shape == ((grid,) if finish == "host" else (1,))


def test_a_complete_total_verifies_like_the_partials():
    inputs = FAMILY.make_inputs(PROBLEM, np.random.default_rng(0))
    expected = FAMILY.reference(inputs, PROBLEM)
    total = np.array([inputs["data"].sum(dtype=np.float32)], dtype=np.float32)  # one float32 total, any order
    assert FAMILY.verify(total, expected, inputs).ok
    assert not FAMILY.verify(total * (1 + 1e-4), expected, inputs).ok
