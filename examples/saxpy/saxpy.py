"""SAXPY (y = a x + y, float32), a kernel of one's own declared for the tuner."""

from tuner.families import In, InOut, KernelSpec, Scalar

saxpy = KernelSpec(
    name="saxpy",
    source="saxpy.cu",
    kernel="saxpy",
    args=[Scalar("a", 2.5, "float32"), In("x"), InOut("y"), Scalar("n", "n", "uint64")],
    tune_params={"block_size_x": [64, 128, 256, 512, 1024], "VEC": [1, 2, 4], "CACHE_HINT": [0, 1, 2],
                 "blocks_per_sm": [0, 2, 4, 8, 16]},
    runtime_params=["blocks_per_sm"],  # a launch value, not a -D define: one module serves every grid
    grid=["ceil_div(n, block_size_x * VEC) if blocks_per_sm == 0"
          " else min(ceil_div(n, block_size_x * VEC), blocks_per_sm * sm_count)"],
    reference=lambda a, x, y: a * x.astype("float64") + y,
    tolerance=1e-6,
)
