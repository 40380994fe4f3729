"""Feasible configurations of spaces too large to list
(``tuner.search.samplers.feasible_draws.FeasibleDraws``): the walk of the product
passes every configuration once, within each ask's share of checks; descents
keep the rules a family scopes; and studies on sparse products and on 10^12
points find feasible configurations with asks of a fraction of a second."""

from __future__ import annotations

import itertools
import math
import random

import pytest

from tuner.data.results import config_key
from tuner.families.base import MAX_ENUMERATED, Family, Param, Problem, ScopedRule
from tuner.search.samplers import feasible_draws
from tuner.search.samplers.feasible_draws import FeasibleDraws
from tuner.search.study.run import StudyOptions, run_study


def test_the_walk_passes_every_configuration_once_and_keeps_the_feasible_ones():
    domains = {"a": [1, 2, 3], "b": list(range(4)), "c": ["x", "y", "z", "w", "v"]}
    feasible = {config_key(dict(zip(domains, values))): dict(zip(domains, values)) for values in itertools.product(*domains.values())
                if values[0] + values[1] <= 3}  # fmt: skip
    passed = []
    draws = FeasibleDraws(domains, lambda cfg: passed.append(config_key(cfg)) or cfg["a"] + cfg["b"] <= 3, seed=5)
    draws.allow(7)
    assert len(draws.walked(random.Random(0), 100, set(), config_key)) == len(draws.found) and len(passed) == 7
    assert draws.walked(random.Random(0), 100, set(), config_key) and len(passed) == 7  # no checks left to this ask
    while not draws.walked_whole:
        draws.allow(7)
        draws.walked(random.Random(0), 1, set(), config_key)
    assert sorted(passed) == sorted(config_key(dict(zip(domains, v))) for v in itertools.product(*domains.values()))
    assert draws.found == feasible
    left = draws.walked(random.Random(1), 100, set(list(feasible)[:5]), config_key)
    assert sorted(map(config_key, left)) == sorted(list(feasible)[5:])  # what it skips is skipped


@pytest.mark.parametrize("size", [1, 2, 6, 97, 360, 1024, 3**7])
def test_the_walks_stride_visits_each_index_of_the_product_once(size):
    stride = feasible_draws._stride_prime_to(size)
    assert sorted((17 + k * stride) % size for k in range(size)) == list(range(size))


def test_descents_keep_every_scoped_rule_and_stop_within_the_asks_checks():
    domains = {f"p{i}": list(range(10)) for i in range(12)}  # 10^12 points
    rules = [ScopedRule(frozenset({"p3", "p7"}), lambda c: c["p3"] * c["p7"] == 12),  # 4 in 100
             ScopedRule(frozenset({"p0", "p2", "p4"}), lambda c: c["p0"] * c["p2"] * c["p4"] == 8)]  # 10 in 1000  # fmt: skip
    draws = FeasibleDraws(domains, lambda cfg: True, rules)
    rng = random.Random(0)
    drawn = [draws.random(rng) for _ in range(50)]  # within one ask's checks
    assert all(cfg is not None and list(cfg) == list(domains) for cfg in drawn)
    assert all(cfg["p3"] * cfg["p7"] == 12 and cfg["p0"] * cfg["p2"] * cfg["p4"] == 8 for cfg in drawn)
    assert len({config_key(cfg) for cfg in drawn}) > 40  # the free parameters drawn at random
    draws.allow(3)
    assert draws.random(rng) is None  # a descent needs more checks than are left
    nothing = FeasibleDraws(domains, lambda cfg: True, [ScopedRule(frozenset({"p5"}), lambda c: c["p5"] > 9)])
    assert nothing.random(rng) is None  # no value of p5 keeps its rule


class RuledFamily(Family):
    """A family whose rules are (names, text, check) triples, given or not as ``scoped_rules``."""

    name, source, dtypes, arg_types = "ruled", "ruled.cu", ("float32",), ""

    def __init__(self, domains: dict[str, list], rules: list, scoped: bool) -> None:
        self.params = tuple(Param(name, tuple(values), "a value") for name, values in domains.items())
        self.rules, self.scoped = rules, scoped

    def constraint_violations(self, cfg, problem):
        return [text for _, text, holds in self.rules if not holds(cfg)]

    def scoped_rules(self, problem):
        return [ScopedRule(frozenset(names), holds) for names, _, holds in self.rules] if self.scoped else ()

    def kernel_name(self, cfg):
        return "ruled"

    def defines(self, cfg, problem):
        return {name.upper(): str(value) for name, value in cfg.items()}

    def bytes_moved(self, cfg, problem):
        return 4 * problem.n

    make_inputs = reference = bind = allocate = None


# Kernel Tuner's convolution space (every value of its script: 3,145,728), narrowed by rules to 20 points.
CONVOLUTION = {"filter_height": list(range(3, 35, 2)), "filter_width": list(range(3, 35, 2)),
               "block_size_x": [16 * i for i in range(1, 9)], "block_size_y": [2**i for i in range(6)],
               "tile_size_x": list(range(1, 9)), "tile_size_y": list(range(1, 9)), "use_padding": [0, 1], "read_only": [0, 1]}  # fmt: skip
NARROW = [({"filter_height"}, "filter_height <= 5", lambda c: c["filter_height"] <= 5),
          ({"filter_height", "filter_width"}, "square filter", lambda c: c["filter_width"] == c["filter_height"]),
          ({"block_size_x", "block_size_y"}, "512 threads", lambda c: c["block_size_x"] * c["block_size_y"] == 512),
          ({"tile_size_x", "tile_size_y"}, "no tiling", lambda c: c["tile_size_x"] * c["tile_size_y"] == 1),
          ({"use_padding", "block_size_x"}, "padding where it helps", lambda c: c["use_padding"] == 0 or c["block_size_x"] % 32 != 0)]  # fmt: skip
# 10^12 points: twelve parameters of ten values, with a restriction (about 0.8 % of the space left).
WIDE = {f"p{i}": list(range(10)) for i in range(12)}
RESTRICTED = [({"p0", "p1"}, "p0 + p1 <= 12", lambda c: c["p0"] + c["p1"] <= 12),
              ({"p2", "p3", "p4"}, "p2 * p3 * p4 == 8", lambda c: c["p2"] * c["p3"] * c["p4"] == 8)]  # fmt: skip


def search(family: RuledFamily, budget: int):
    key = sorted(family.param_names)
    return run_study(StudyOptions.for_strategy(family=family, problem=Problem("ruled", "float32", 1024), domains=None,
                                               storage=None, study_name="s",
                                               measure=lambda cfg: {"status": "ok", "bandwidth_gbs": 1.0 + sum(i * cfg[n] for i, n in enumerate(key))},
                                               budget_trials=budget, timeout_s=None, seed=0))  # fmt: skip


@pytest.mark.parametrize(("domains", "rules", "scoped"), [(CONVOLUTION, NARROW, True), (CONVOLUTION, NARROW, False),
                                                          (WIDE, RESTRICTED, True), (WIDE, RESTRICTED, False)],
                         ids=["convolution-20-scoped", "convolution-20", "1e12-restricted-scoped", "1e12-restricted"])  # fmt: skip
def test_a_study_of_a_space_too_large_to_list_finds_its_feasible_configurations_in_asks_under_a_second(domains, rules, scoped):
    family = RuledFamily(domains, rules, scoped)
    assert math.prod(len(values) for values in domains.values()) > MAX_ENUMERATED
    outcome = search(family, 10)
    measured = [{name: row[name] for name in family.param_names} for row in outcome.rows]
    assert outcome.stop_reason == "budget" and len(set(map(config_key, measured))) == 10
    assert not any(family.violations(cfg, Problem("ruled", "float32", 1024)) for cfg in measured)
    assert outcome.asks_cpu_s / outcome.asks < 1.0  # seconds of CPU an ask (each walks at most CHECKS_PER_ASK)
