"""Verification on the device: a launch's output compared where it lies with
the problem's host reference, uploaded once per problem.

The reference is still computed on the host (numpy, in higher precision);
only the comparison moves. Downloading a 2^28-element output and comparing it
in numpy took about a second per configuration, most of a cold pipeline's
verification time; the comparison kernels (``kernels/check.cu``) take about a
millisecond and send back two numbers. The verdicts are the host's: exact
comparisons count the elements whose bits differ, tolerant ones give
||out - ref|| / ||ref|| (in double) and fail any element that is not finite.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tuner.families.base import KERNELS_DIR, DeviceOutput, Verdict, reference_norm
from tuner.measure.compile import compile_source

# Reference element type the tolerant comparison reads, per output type.
_WIDE = {np.dtype(np.float16): np.dtype(np.float32), np.dtype(np.float32): np.dtype(np.float64)}
_THREADS = 256
_BLOCKS_PER_SM = 8


@dataclass
class DeviceReference:
    buffer: object  # DeviceBuffer
    dtype: np.dtype
    size: int
    norm: float  # ||ref|| in float64, for the relative error


class DeviceChecker:
    """The comparison kernels of one GPU, loaded once per process."""

    def __init__(self, gpu, cache_dir: Path) -> None:
        self.gpu = gpu
        compiled = compile_source(KERNELS_DIR / "check.cu", "mismatches_4", defines={}, arch=gpu.arch,
                                  cache_dir=cache_dir, prefix="check")  # fmt: skip
        self._cubin = compiled.cubin
        self._functions: dict[str, object] = {}
        self._totals = gpu.alloc(16)  # two 8-byte totals, zeroed before each comparison
        self._grid = (_BLOCKS_PER_SM * gpu.sm_count, 1, 1)

    def _function(self, name: str):
        if name not in self._functions:
            self._functions[name] = self.gpu.function(self._cubin, name, "PPQP")
        return self._functions[name]

    def upload(self, reference: np.ndarray, output_dtype: np.dtype, exact: bool) -> DeviceReference:
        """The host ``reference`` on the device, in the element type the
        comparison of an output of ``output_dtype`` reads."""
        output_dtype = np.dtype(output_dtype)
        if exact:
            if reference.dtype.itemsize != output_dtype.itemsize:
                raise ValueError(f"an exact comparison needs a reference of {output_dtype}'s width, got {reference.dtype}")
            wanted = reference.dtype
        elif output_dtype in _WIDE:
            wanted = _WIDE[output_dtype]
        else:
            raise ValueError(f"no tolerant comparison on the device for outputs of {output_dtype}")
        flat = np.ascontiguousarray(reference.reshape(-1), dtype=wanted)
        norm = 0.0 if exact else reference_norm(flat)
        return DeviceReference(self.gpu.upload(flat), wanted, flat.size, norm)

    def verdict(self, output: DeviceOutput, reference: DeviceReference) -> Verdict:
        """Compare ``output`` with ``reference`` on the device (synchronising)."""
        if output.count != reference.size:
            return Verdict(False, math.inf, f"{output.count} elements against a reference of {reference.size}")
        gpu, dtype = self.gpu, np.dtype(output.dtype)
        gpu.fill_bytes(self._totals.ptr(), 0, self._totals.nbytes)
        if output.tolerance is None:
            kernel = f"mismatches_{dtype.itemsize}"
        else:
            kernel = "squared_error_f16" if dtype == np.float16 else "squared_error_f32"
        gpu.launcher(self._function(kernel), self._grid, (_THREADS, 1, 1), np.uintp(output.ptr),
                     reference.buffer.ptr(), np.uint64(output.count), self._totals.ptr())()  # fmt: skip
        if output.tolerance is None:
            wrong = int(gpu.download(self._totals, 1, np.uint64)[0])
            return Verdict(wrong == 0, float(wrong), "" if wrong == 0 else f"{wrong} of {output.count} elements differ")
        squared, not_finite = (float(v) for v in gpu.download(self._totals, 2, np.float64))
        if not_finite:
            return Verdict(False, math.inf, f"non-finite output ({int(not_finite)} elements never written?)")
        error = math.sqrt(squared) / max(reference.norm, 1e-30)
        ok = error <= output.tolerance
        return Verdict(ok, error, "" if ok else f"relative error {error:.3g} > {output.tolerance:g}")
