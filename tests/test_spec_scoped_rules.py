"""A KernelSpec's restrictions as scoped rules: what a search of a sparse space
too large to list prunes by as it fixes parameters one at a time."""

from __future__ import annotations

from tuner.families.base import Problem
from tuner.families.spec import In, KernelSpec, Out

SOURCE = 'extern "C" __global__ void k(float* o, const float* a) { int i = blockIdx.x * blockDim.x + threadIdx.x; o[i] = a[i]; }'


def test_each_expression_restriction_is_a_rule_over_the_parameters_it_reads(tmp_path):
    (tmp_path / "k.cu").write_text(SOURCE)
    spec = KernelSpec(name="scoped", source=str(tmp_path / "k.cu"), kernel="k", args=[Out("o", shape="n"), In("a", shape="n")],
                      tune_params={"block_size_x": [32, 64, 128], "A": list(range(10)), "B": list(range(10))},
                      restrictions=["A + B < 3", "block_size_x > 32 and n > 0", lambda p: p["A"] != 7],
                      reference=lambda a: a, grid_div_x=["block_size_x"])  # fmt: skip
    rules = spec.scoped_rules(Problem("scoped", "float32", 1024))
    assert [sorted(rule.names) for rule in rules] == [["A", "B"], ["block_size_x"]]  # a callable names nothing: not scoped
    pair, block = rules
    assert pair.holds({"A": 1, "B": 1}) and not pair.holds({"A": 2, "B": 1})
    assert block.holds({"block_size_x": 64}) and not block.holds({"block_size_x": 32})
