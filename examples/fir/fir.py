"""A 17-tap FIR filter (float32) whose taps live in constant memory."""

import numpy as np

from tuner.families import Constant, In, KernelSpec, Out, Scalar

fir = KernelSpec(
    name="fir",
    source="fir.cu",
    kernel="fir",
    args=[Out("y"), In("x", shape="n + 16"), Scalar("n", "n", "int32"), Constant("coeffs", shape=17)],
    tune_params={"block_size_x": [64, 128, 256, 512, 1024], "ITEMS": [1, 2, 4, 8]},
    grid_div_x=["block_size_x", "ITEMS"],
    reference=lambda x, coeffs: np.correlate(x.astype(np.float64), coeffs.astype(np.float64), mode="valid"),
)
