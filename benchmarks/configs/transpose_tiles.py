"""The example transpose kernel over a space that is not a grid of powers of
two: tiles of 8 to 96, rows per block of 1 to 32, restricted so a tile is a
whole number of rows and a block fits 1024 threads. The search benchmark on
the GPU runs a study over it beside the exhaustive sweep of the same space."""

from tuner.families import In, KernelSpec, Out, Scalar

transpose_tiles = KernelSpec(
    name="transpose_tiles",
    source="../../examples/transpose/transpose.cu",
    kernel="transpose",
    args=[Out("dst", shape=("n", "n")), In("src", shape=("n", "n")), Scalar("n", "n", "int32")],
    tune_params={"TILE": [8, 12, 16, 24, 32, 48, 64, 96], "block_size_y": [1, 2, 3, 4, 6, 8, 12, 16, 24, 32], "PAD": [0, 1]},
    # A block steps through its tile block_size_y rows at a time: the tile must be a whole number of steps.
    restrictions=["block_size_y <= TILE", "TILE % block_size_y == 0", "TILE * block_size_y <= 1024"],
    block=["TILE", "block_size_y"],
    problem_size=["n", "n"],
    grid_div_x=["TILE"],
    grid_div_y=["TILE"],
    reference=lambda src: src.T,
)
