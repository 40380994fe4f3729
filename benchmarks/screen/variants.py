"""Search variants screened against ``ordinal_global`` for the hub's convolution
tables (see benchmarks/results/history/search-variants.txt); each a subclass of
OrdinalSampler, none adopted. ``make(name, seed)`` builds one by name."""
import itertools
import math as _math

import numpy as np

from tuner.data.results import config_key
from tuner.search.ordinal import GLOBAL_PHASE, START_PHASE, OrdinalSampler


def og_kwargs(**kw):
    base = dict(global_phase=GLOBAL_PHASE, start_phase=START_PHASE, landmarks=("last",), landmarks_first=True)
    base.update(kw)
    return base


class Slice(OrdinalSampler):
    """Once a climb has gone `wide_after` measurements without progress, its
    steps also include every configuration that shares the best's values of
    the parameters with few values (the wide ordered ones free)."""
    wide_after = 15
    wide = 5

    def _step(self, climb, measured, visited, rng):
        state = self._climbs.read(measured)
        if climb is measured or state["since"] < self.wide_after or len(measured) < state["until"]:
            return super()._step(climb, measured, visited, rng)
        best_key, (best, _) = max(climb.items(), key=lambda item: item[1][1])
        free = [n for n, (ordered, values) in self._order.items() if ordered and len(values) >= self.wide]
        fixed = [n for n in self._order if n not in free]
        candidates = {}
        for key, cfg in self._enumerated or []:
            if key not in visited and all(cfg[n] == best[n] for n in fixed):
                candidates[key] = cfg
        for k1, c1 in self._neighbours(best_key, best):
            if k1 not in visited:
                candidates[k1] = c1
        if not candidates:
            return super()._step(climb, measured, visited, rng)
        weights, mean = self._fit(measured)
        keys = list(candidates)
        scores = weights[self._columns_of(keys)].sum(axis=1) + np.array([rng.random() * 1e-9 for _ in keys])
        return candidates[keys[int(np.argmax(scores))]]


class LogSteps(OrdinalSampler):
    """Steps on a log scale too: an ordered positive parameter also moves to
    the value nearest its double, half, quadruple or quarter, and two such
    parameters move at once, one doubled and one halved (a block's shape
    changed, its size kept) or both doubled/halved."""
    factors = (2.0, 0.5, 4.0, 0.25)
    reshape = True

    def _nearest(self, values, target):
        return min(values, key=lambda v: (abs(_math.log(v / target)), v))

    def _neighbours(self, key, cfg):
        found = self._steps.get(key)
        if found is not None:
            return found
        found = list(super()._neighbours(key, cfg))
        seen = {k for k, _ in found} | {key}
        logp = [(n, vals) for n, (o, vals) in self._order.items() if o and len(vals) > 2 and all(v > 0 for v in vals)]
        def add(c):
            if self._feasible(c):
                k = config_key(c)
                if k not in seen:
                    seen.add(k)
                    found.append((k, c))
        for n, vals in logp:
            for f in self.factors:
                v = self._nearest(vals, cfg[n] * f)
                if v != cfg[n]:
                    add({**cfg, n: v})
        if self.reshape:
            for (na, va), (nb, vb) in itertools.combinations(logp, 2):
                for fa, fb in ((2.0, 0.5), (0.5, 2.0), (2.0, 2.0), (0.5, 0.5)):
                    a, b = self._nearest(va, cfg[na] * fa), self._nearest(vb, cfg[nb] * fb)
                    if a != cfg[na] and b != cfg[nb]:
                        add({**cfg, na: a, nb: b})
        self._steps[key] = found
        return found


class RuggedSlice(Slice):
    """Slice sweeps only where the climb's best stands alone: its measured
    neighbours' median is below `rugged` of it (a smooth plateau keeps the
    climb's own steps)."""
    rugged = 0.9
    min_seen = 3

    def _step(self, climb, measured, visited, rng):
        state = self._climbs.read(measured)
        if climb is measured or state["since"] < self.wide_after or len(measured) < state["until"]:
            return OrdinalSampler._step(self, climb, measured, visited, rng)
        best_key, (best, value) = max(climb.items(), key=lambda item: item[1][1])
        seen = [measured[k][1] / value for k, _ in self._neighbours(best_key, best) if k in measured]
        if len(seen) < self.min_seen or float(np.median(seen)) >= self.rugged:
            return OrdinalSampler._step(self, climb, measured, visited, rng)
        return super()._step(climb, measured, visited, rng)


class ComboUCB(OrdinalSampler):
    """Every `every`-th Parzen-phase proposal goes to a combination of the
    small parameters (fewer than `wide` values) by an upper confidence bound
    on its mean log-rate (shrunk to the overall mean), the unvisited
    configuration of it the step model ranks first."""
    every = 3
    wide = 5
    beta = 1.0
    shrink = 1.0

    def bind(self, *a, **k):
        super().bind(*a, **k)
        self._small = [n for n, (o, vals) in self._order.items() if 1 < len(vals) < self.wide]
        self._nparzen = 0

    def _parzen(self, measured, visited, rng):
        self._nparzen += 1
        if self._nparzen % self.every or not self._enumerated or not measured:
            return super()._parzen(measured, visited, rng)
        stats = {}
        for cfg, value in measured.values():
            c = tuple(cfg[n] for n in self._small)
            s = stats.setdefault(c, [0, 0.0])
            s[0] += 1
            s[1] += np.log(value)
        ys = np.log([v for _, v in measured.values()])
        mu, sd = float(ys.mean()), float(ys.std() + 1e-9)
        open_ = {}
        for key, cfg in self._enumerated:
            if key not in visited:
                open_.setdefault(tuple(cfg[n] for n in self._small), []).append((key, cfg))
        if not open_:
            return super()._parzen(measured, visited, rng)
        def ucb(c):
            n, tot = stats.get(c, (0, 0.0))
            m = (tot + self.shrink * mu) / (n + self.shrink)
            return m + self.beta * sd / np.sqrt(n + 1) + rng.random() * 1e-9
        c = max(open_, key=ucb)
        weights, mean = self._fit(measured)
        keys = [k for k, _ in open_[c]]
        scores = weights[self._columns_of(keys)].sum(axis=1) + np.array([rng.random() * 1e-9 for _ in keys])
        return open_[c][int(np.argmax(scores))][1]


class PlateauTabu(OrdinalSampler):
    """A restart's Parzen phase proposes nothing with the switch values (the
    parameters of two values, and the unordered ones) of a stalled climb's best
    that sat on a plateau: its measured neighbours' median at least `smooth` of
    it. A climb stalled on a spike keeps its region (a slice sweep's case)."""

    smooth = 0.9
    min_seen = 3

    def bind(self, *a, **k):
        super().bind(*a, **k)
        self._switches = [n for n, (ordered, values) in self._order.items() if len(values) == 2 or (len(values) > 2 and not ordered)]
        self._stalls = {}  # restart position -> the stalled climb's best's switch values, where it sat on a plateau

    def _banned(self, measured):
        start = self._climbs.read(measured)["start"]
        if start == 0 or not self._switches:
            return set()
        if start not in self._stalls:
            items = list(measured.items())
            before = max([0] + list(self._stalls))
            segment = items[before:start]
            self._stalls[start] = None
            if segment:
                key, (best, value) = max(segment, key=lambda item: item[1][1])
                seen = [measured[k][1] / value for k, _ in self._neighbours(key, best) if k in measured]
                if len(seen) >= self.min_seen and float(np.median(seen)) >= self.smooth:
                    self._stalls[start] = tuple(best[n] for n in self._switches)
        return {v for s, v in self._stalls.items() if s <= start and v is not None}

    def _parzen(self, measured, visited, rng):
        banned = self._banned(measured)
        if not banned:
            return super()._parzen(measured, visited, rng)
        feasible, names = self._feasible, self._switches
        self._feasible = lambda cfg: feasible(cfg) and tuple(cfg[n] for n in names) not in banned
        try:
            cfg = super()._parzen(measured, visited, rng)
        finally:
            self._feasible = feasible
        return cfg if cfg is not None else super()._parzen(measured, visited, rng)


def make(name, seed):
    """og; slice+w=N; log(+rs=0|1)(+f=2); rslice+w=N+r=X; lr+w=N+r=X; cucb+e=N+b=X."""
    base, *parts = name.split("+")
    opts = dict(p.split("=") for p in parts)
    if base == "og":
        return OrdinalSampler(seed=seed, **og_kwargs())
    cls = {"slice": Slice, "log": LogSteps, "rslice": RuggedSlice, "cucb": ComboUCB}.get(base)
    if base == "lr":
        cls = type("LR", (RuggedSlice, LogSteps), {"reshape": False})
    if base == "lrt":
        cls = type("LRT", (PlateauTabu, RuggedSlice, LogSteps), {"reshape": False})
    if base == "pt":
        cls = PlateauTabu
    if cls is None:
        raise ValueError(name)
    cls = type(cls.__name__, (cls,), {})
    for key, value in opts.items():
        attr = {"w": "wide_after", "r": "rugged", "rs": "reshape", "f": "factors", "e": "every", "b": "beta", "s": "shrink", "m": "smooth"}[key]
        if key == "f":
            value = (2.0, 0.5) if value == "2" else (2.0, 0.5, 4.0, 0.25)
        elif key == "rs":
            value = bool(int(value))
        elif key in ("w", "e"):
            value = int(value)
        else:
            value = float(value)
        setattr(cls, attr, value)
    return cls(seed=seed, **og_kwargs())
