"""One untimed verification pass over every variant of some families, each
compile-time value at least once, at two sizes: what ``python -m tuner verify``
runs and compute-sanitizer watches."""

from __future__ import annotations

from tuner.families.base import Problem
from tuner.measure.compile import compile_all


def verify_families(bench, families, sizes, cache_dir) -> tuple[int, int]:
    """Verify each family's covering configurations on fresh inputs; print a
    line per failure and per problem. Returns (verified, failed) counts."""
    failures = total = 0
    for family in families:
        for dtype in family.dtypes:
            for n in sizes or family.check_sizes:
                problem = Problem(family.name, dtype, n)
                configs = family.covering_configs(problem)
                compile_all(family, configs, problem, arch=bench.gpu.arch, cache_dir=cache_dir)
                session = bench.problem(family, problem)
                for cfg in configs:
                    row = session.measure(cfg, "verify", timed=False)
                    total += 1
                    if row["status"] != "ok":
                        failures += 1
                        print(f"FAIL {family.name} {dtype} n={problem.n} {row['config_key']}: {row['status']} {row['error']}")
                print(f"{family.name:12s} {dtype:8s} n={problem.n:<10d} {len(configs):4d} configurations verified")
                del session  # frees the problem's device buffers before the next
    return total, failures
