"""y = a x + b y for float32 and int32, from a C++ template kernel whose
template arguments (the element type, the block size, the items per thread)
come from the configuration and the problem's dtype."""

from tuner.families import In, InOut, KernelSpec, Scalar

axpby = KernelSpec(
    name="axpby",
    source="axpby.cu",
    kernel="axpby<real, block_size_x, ITEMS>",  # instantiated per configuration; `real` is the dtype's C type
    type_macro="real",
    dtypes=["float32", "int32"],
    args=[InOut("y"), In("x"), Scalar("a", 3.0, "float32"), Scalar("b", -2.0, "float32"), Scalar("n", "n", "int32")],
    tune_params={"block_size_x": [128, 256, 512, 1024], "ITEMS": [1, 2, 4, 8]},
    grid_div_x=["block_size_x", "ITEMS"],
    reference=lambda x, y, a, b: a * x.astype("float64") + b * y.astype("float64"),  # exact in float for the inputs' magnitudes
)
