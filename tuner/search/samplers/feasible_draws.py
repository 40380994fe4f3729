"""Feasible configurations drawn from a space too large to list.

A space whose product exceeds ``MAX_ENUMERATED`` is searched without a list
of it: the samplers draw whole configurations at random and keep the
feasible ones. Where few of them are (Kernel Tuner's convolution narrowed to
24 feasible points of a 3.1 million product), hundreds of random draws find
none, and a search had nothing to start from. Two ways out, each bounded per
call:

* **Descents** (where the family names its rules' parameters,
  ``Family.scoped_rules``): parameters are fixed one at a time, those that
  rules read first, and at each step a value is taken only where every rule
  over the fixed parameters holds, going back a step where none does: a
  rule over two or three parameters prunes the product as it is descended.
* **A walk of the product** in an order that spreads over it (an index
  stepped by a stride prime to the product, about 0.618 of it, and read as
  one value per parameter), never the same twice.

Both share ``CHECKS_PER_ASK`` checks an ask (``allow``), so an ask stays
within a fraction of a second of CPU whatever the space. Every feasible one it passes is kept, so a sparse space is
  found whole after one pass, and its points are drawn from what was found.
"""

from __future__ import annotations

import math
import random
from typing import Any, Callable, Mapping, Sequence

from tuner.families.base import ScopedRule

CHECKS_PER_ASK = 20_000  # configurations (or a descent's partial ones) checked per ask at most: about a tenth of a second


class FeasibleDraws:
    """Random feasible configurations of ``domains`` (parameter -> values,
    in the family's order) where ``feasible`` holds (the whole check, a
    family's ``violations``), helped by ``rules`` (``Family.scoped_rules``)."""

    def __init__(self, domains: Mapping[str, Sequence], feasible: Callable[[dict], bool], rules: Sequence[ScopedRule] = (),
                 seed: int = 0) -> None:  # fmt: skip
        self.names = list(domains)
        self.values = {name: list(values) for name, values in domains.items()}
        self.feasible = feasible
        known = set(self.names)
        self.rules = [rule for rule in rules if rule.names <= known]
        self._order, self._checked_at = self._levels()
        # The parameters some rule reads come first in the order; the rest are free.
        read = set().union(*(rule.names for rule in self.rules)) if self.rules else set()
        self._ruled = sum(name in read for name in self._order)
        # The walk: index k of the product is (offset + k * stride) mod size, read in mixed radix.
        self.size = math.prod(len(values) for values in self.values.values())
        self._stride = _stride_prime_to(self.size)
        self._offset = random.Random(seed).randrange(self.size) if self.size else 0
        self._walked = 0
        self._allowed = CHECKS_PER_ASK  # checks left to the walk and the descents until the next ``allow``
        self._found: dict[str, dict] = {}  # every feasible configuration the walk passed, by key
        self._keys: list[str] = []

    def _levels(self) -> tuple[list[str], list[list[ScopedRule]]]:
        """The order parameters are fixed in (those of the narrowest rules
        first, so each rule is checked as early as it can be), and the rules
        checked once each parameter is fixed (each at the last it reads)."""
        order: list[str] = []
        for rule in sorted(self.rules, key=lambda r: len(r.names)):
            order += [name for name in self.names if name in rule.names and name not in order]
        order += [name for name in self.names if name not in order]
        position = {name: i for i, name in enumerate(order)}
        checked_at: list[list[ScopedRule]] = [[] for _ in order]
        for rule in self.rules:
            if rule.names:
                checked_at[max(position[name] for name in rule.names)].append(rule)
        return order, checked_at

    @property
    def descends(self) -> bool:
        """Whether draws descend by the rules (else they are uniform over the product)."""
        return any(self._checked_at)

    @property
    def walked_whole(self) -> bool:
        """Whether the walk has passed every configuration (what it found is the feasible space)."""
        return self._walked >= self.size

    @property
    def found(self) -> dict[str, dict]:
        """Every feasible configuration the walk has passed, by key."""
        return self._found

    def random(self, rng: random.Random) -> dict | None:
        """One configuration at random: uniform over the product without
        rules; with them, one that keeps every rule, found depth first (the
        parameters that rules read in order, each value tried from a random
        one on, back a step where none keeps the rules over the fixed ones),
        the others drawn at random; None where the ask's share of checks
        (``allow``) runs out first. Not checked whole."""
        if not self.descends:
            return {name: rng.choice(self.values[name]) for name in self.names}
        cfg: dict[str, Any] = {}
        tried: list[list[int]] = []  # per fixed level: [first value's index, values tried]
        level = 0
        while level < self._ruled:
            if level == len(tried):
                tried.append([rng.randrange(len(self.values[self._order[level]])), 0])
            name, rules = self._order[level], self._checked_at[level]
            values, place = self.values[name], tried[level]
            while place[1] < len(values) and self._allowed > 0:
                cfg[name] = values[(place[0] + place[1]) % len(values)]
                place[1] += 1
                self._allowed -= 1
                if all(_holds(rule, cfg) for rule in rules):
                    level += 1
                    break
            else:
                if self._allowed <= 0:
                    return None
                tried.pop()  # no value of this parameter keeps the rules: another one for the one before
                level -= 1
                if level < 0:
                    return None  # none at all
        for name in self._order[self._ruled :]:
            cfg[name] = rng.choice(self.values[name])
        return {name: cfg[name] for name in self.names}

    def allow(self, checks: int | None = None) -> None:
        """Let the walk and the descents check ``checks`` (default
        ``CHECKS_PER_ASK``) more configurations: an ask's share."""
        self._allowed = CHECKS_PER_ASK if checks is None else checks

    def walked(self, rng: random.Random, count: int, skip: set[str], key: Callable[[dict], str]) -> list[dict]:
        """Up to ``count`` feasible configurations whose ``key`` is not in
        ``skip``, at random among those the walk has found, after walking on
        as far as it is allowed (``allow``) where it has not passed it all."""
        if not self.walked_whole and self._allowed > 0:
            self._walk(key)
        left = [k for k in self._keys if k not in skip]
        return [self._found[k] for k in rng.sample(left, min(count, len(left)))]

    def _walk(self, key: Callable[[dict], str]) -> None:
        radices = [len(self.values[name]) for name in self.names]
        end = min(self.size, self._walked + self._allowed)
        self._allowed -= end - self._walked
        for step in range(self._walked, end):
            index = (self._offset + step * self._stride) % self.size
            cfg = {}
            for name, radix in zip(reversed(self.names), reversed(radices)):
                index, place = divmod(index, radix)
                cfg[name] = self.values[name][place]
            cfg = {name: cfg[name] for name in self.names}
            if all(_holds(rule, cfg) for rule in self.rules) and self.feasible(cfg):
                k = key(cfg)
                if k not in self._found:
                    self._found[k] = cfg
                    self._keys.append(k)
        self._walked = end


def _holds(rule: ScopedRule, cfg: Mapping[str, Any]) -> bool:
    try:
        return bool(rule.holds(cfg))
    except Exception:  # noqa: BLE001 - a rule that cannot be evaluated does not hold (violations says why)
        return False


def _stride_prime_to(size: int) -> int:
    """A step through ``size`` indices that visits each once: prime to
    ``size``, near its golden section (consecutive steps land far apart)."""
    if size <= 1:
        return 1
    stride = max(1, size * 618_033_988_749_895 // 10**15)  # in integers: a product may pass a float's range
    while math.gcd(stride, size) != 1:
        stride += 1
    return stride
