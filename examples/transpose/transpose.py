"""A tiled matrix transpose (n x n, float32): a 2-D kernel of one's own."""

from tuner.families import In, KernelSpec, Out, Scalar

transpose = KernelSpec(
    name="transpose",
    source="transpose.cu",
    kernel="transpose",
    args=[Out("dst", shape=("n", "n")), In("src", shape=("n", "n")), Scalar("n", "n", "int32")],
    tune_params={"TILE": [16, 32, 64], "block_size_y": [1, 2, 4, 8, 16, 32], "PAD": [0, 1]},
    restrictions=["block_size_y <= TILE", "TILE * block_size_y <= 1024"],
    block=["TILE", "block_size_y"],
    problem_size=["n", "n"],
    grid_div_x=["TILE"],
    grid_div_y=["TILE"],
    reference=lambda src: src.T,
)
