# noqa
"""Screening variants of OrdinalSampler (not project code)."""
import itertools, numpy as np
from tuner.search.ordinal import OrdinalSampler, GLOBAL_PHASE, START_PHASE, ELITE, ELITE_MAX, PARZEN_CANDIDATES
from tuner.search.ordinal_grid import kernel_keep, parzen_log_density
from tuner.data.results import config_key, plain_value


def og_kwargs(**kw):
    base = dict(global_phase=GLOBAL_PHASE, start_phase=START_PHASE, landmarks=("last",), landmarks_first=True)
    base.update(kw)
    return base


class Niche(OrdinalSampler):
    """Restarts climb within one switch value the best lacks."""
    every = 1  # every restart (1) or every other (2)
    pick = "best"  # "best": the niche with the best measured; "least": the least measured

    def bind(self, *a, **k):
        super().bind(*a, **k)
        self._switches = [n for n, (ordered, values) in self._order.items() if len(values) >= 2 and (len(values) == 2 or not ordered)]
        self._niches = {}  # climb start -> (name, value) or None
        self._tried = set()

    def _niche(self, measured):
        start = self._climbs.read(measured)["start"]
        if start == 0:
            return None
        if start not in self._niches:
            restarts = len(self._niches) + 1
            items = list(measured.values())[:start]
            choice = None
            if restarts % self.every == 0 and items:
                best = max(items, key=lambda it: it[1])[0]
                scored = []
                for name in self._switches:
                    for value in self._order[name][1]:
                        if value == best[name] or (name, value) in self._tried:
                            continue
                        inside = [v for c, v in items if c[name] == value]
                        key = max(inside, default=0.0) if self.pick == "best" else -len(inside)
                        scored.append((key, name, str(value), value))
                if scored:
                    _, name, _, value = max(scored)
                    choice = (name, value)
                    self._tried.add(choice)
            self._niches[start] = choice
        return self._niches[start]

    def _parzen(self, measured, visited, rng):
        niche = self._niche(measured)
        if niche is None:
            return super()._parzen(measured, visited, rng)
        name0, value0 = niche
        ranked = sorted(measured, key=lambda key: -measured[key][1])
        good_count = max(1, min(int(np.ceil(ELITE * len(ranked))), ELITE_MAX))
        codes = self._columns_of(ranked)
        good, rest = codes[:good_count], codes[good_count:]
        sizes = np.array([len(d.choices) for d in self._dists.values()], dtype=float)
        names = list(self._dists)
        keep = kernel_keep(sizes, good_count)
        candidates = {}
        for _ in range(8 * PARZEN_CANDIDATES):
            if len(candidates) >= PARZEN_CANDIDATES:
                break
            pick = rng.randrange(good_count + 1)
            cfg = {}
            for j, name in enumerate(names):
                choices = self._dists[name].choices
                if pick < good_count and rng.random() < keep[j]:
                    cfg[name] = measured[ranked[pick]][0][name]
                else:
                    cfg[name] = plain_value(rng.choice(choices))
            cfg[name0] = value0
            key = config_key(cfg)
            if key not in visited and key not in candidates and self._feasible(cfg):
                candidates[key] = cfg
        if not candidates:
            return super()._parzen(measured, visited, rng)
        keys = list(candidates)
        drawn = self._columns_of(keys)
        score = parzen_log_density(drawn, good, sizes) - parzen_log_density(drawn, rest, sizes)
        return candidates[keys[int(np.argmax(score))]]

    def _neighbours(self, key, cfg):
        found = super()._neighbours(key, cfg)
        niche = getattr(self, "_current", None)
        if niche is None:
            return found
        return [(k, c) for k, c in found if c[niche[0]] == niche[1]]

    def _step(self, climb, measured, visited, rng):
        self._current = self._niche(measured) if climb is not measured else None
        try:
            if self._current is not None:
                # _exhausted is per key without niche; keep a separate set
                saved = self._exhausted
                self._exhausted = set()
                try:
                    return super()._step(climb, measured, visited, rng)
                finally:
                    self._exhausted = saved
            return super()._step(climb, measured, visited, rng)
        finally:
            self._current = None


def make(name, seed):
    if name.startswith("later"):
        return make4(name, seed)
    if name.startswith("vnd"):
        return make3(name, seed)
    if name.startswith("stabu"):
        return make2(name, seed)
    if name == "og":
        return OrdinalSampler(seed=seed, **og_kwargs())
    if name.startswith("og+"):
        kw = {}
        for p in name.split("+")[1:]:
            k, v = p.split("=")
            kw[{"pat": "patience", "sp": "start_phase", "gp": "global_phase", "n": "n_startup", "k": "top_k"}[k]] = int(v)
        return OrdinalSampler(seed=seed, **og_kwargs(**kw))
    if name == "ordinal":
        return OrdinalSampler(seed=seed)
    if name.startswith("niche"):
        cls = type("N", (Niche,), {})
        parts = name.split("+")[1:]
        kw = {}
        for p in parts:
            if p == "alt": cls.every = 2
            elif p == "least": cls.pick = "least"
            elif p.startswith("pat="): kw["patience"] = int(p[4:])
            elif p.startswith("sp="): kw["start_phase"] = int(p[3:])
            elif p.startswith("gp="): kw["global_phase"] = int(p[3:])
        return cls(seed=seed, **og_kwargs(**kw))
    raise ValueError(name)


class SwitchTabu(OrdinalSampler):
    """A restart's Parzen phase proposes only configurations whose switch
    values differ from those of every stalled climb's best."""
    every = 1
    excl_good = False

    def bind(self, *a, **k):
        super().bind(*a, **k)
        self._switches = [n for n, (ordered, values) in self._order.items() if len(values) >= 2 and (len(values) == 2 or not ordered)]
        self._stalls = {}  # restart position -> tuple of switch values of the stalled climb's best

    def _banned(self, measured):
        start = self._climbs.read(measured)["start"]
        if start == 0:
            return set()
        if start not in self._stalls:
            items = list(measured.values())
            prev = max([0] + [s for s in self._stalls])
            seg = items[prev:start]
            best = max(seg, key=lambda it: it[1])[0] if seg else None
            self._stalls[start] = None if best is None else tuple(best[n] for n in self._switches)
        restarts = sorted(self._stalls)
        if (restarts.index(start) + 1) % self.every:
            return set()
        return {v for s, v in self._stalls.items() if s <= start and v is not None}

    def _parzen(self, measured, visited, rng):
        banned = self._banned(measured)
        if not banned:
            return super()._parzen(measured, visited, rng)
        orig = self._feasible
        sw = self._switches
        self._feasible = lambda cfg: orig(cfg) and tuple(cfg[n] for n in sw) not in banned
        try:
            out = super()._parzen(measured, visited, rng)
        finally:
            self._feasible = orig
        return out if out is not None else super()._parzen(measured, visited, rng)


def make2(name, seed):
    if name.startswith("stabu"):
        cls = type("S", (SwitchTabu,), {})
        kw = {}
        for p in name.split("+")[1:]:
            if p == "alt": cls.every = 2
            else:
                k, v = p.split("=")
                kw[{"pat": "patience", "sp": "start_phase", "gp": "global_phase", "n": "n_startup", "k": "top_k"}[k]] = int(v)
        return cls(seed=seed, **og_kwargs(**kw))
    return None


class VND(OrdinalSampler):
    """Once a climb has gone `wide_after` measurements without progress, its
    steps also include two-step moves from its best."""
    wide_after = 15
    wide_k = 1

    def _step(self, climb, measured, visited, rng):
        state = self._climbs.read(measured)
        if climb is measured or state["since"] < self.wide_after or len(measured) < state["until"]:
            return super()._step(climb, measured, visited, rng)
        ranked = sorted(climb.items(), key=lambda item: -item[1][1])[: self.wide_k]
        candidates = {}
        for key, (cfg, _) in ranked:
            for k1, c1 in self._neighbours(key, cfg):
                if k1 not in visited:
                    candidates[k1] = c1
                for k2, c2 in self._neighbours(k1, c1):
                    if k2 not in visited:
                        candidates[k2] = c2
        if not candidates:
            return super()._step(climb, measured, visited, rng)
        weights, mean = self._fit(measured)
        keys = list(candidates)
        scores = weights[self._columns_of(keys)].sum(axis=1) + np.array([rng.random() * 1e-9 for _ in keys])
        return candidates[keys[int(np.argmax(scores))]]


def make3(name, seed):
    cls = type("V", (VND,), {})
    kw = {}
    for p in name.split("+")[1:]:
        k, v = p.split("=")
        if k == "w": cls.wide_after = int(v)
        elif k == "wk": cls.wide_k = int(v)
        else:
            kw[{"pat": "patience", "sp": "start_phase", "gp": "global_phase", "n": "n_startup", "k": "top_k"}[k]] = int(v)
    return cls(seed=seed, **og_kwargs(**kw))


class Later(VND):
    """Broader climbs only after the first restart: vnd (2-step) or top_k=2."""
    mode = "vnd"

    def _step(self, climb, measured, visited, rng):
        state = self._climbs.read(measured)
        later = state["start"] > 0 and climb is not measured
        if self.mode == "k2":
            self.top_k = 2 if later else 1
            return OrdinalSampler._step(self, climb, measured, visited, rng)
        if not later:
            return OrdinalSampler._step(self, climb, measured, visited, rng)
        return VND._step(self, climb, measured, visited, rng)


def make4(name, seed):
    cls = type("L", (Later,), {})
    kw = {}
    for p in name.split("+")[1:]:
        k, v = p.split("=")
        if k == "w": cls.wide_after = int(v)
        elif k == "m": cls.mode = v
        else:
            kw[{"pat": "patience", "sp": "start_phase", "gp": "global_phase", "n": "n_startup", "k": "top_k"}[k]] = int(v)
    return cls(seed=seed, **og_kwargs(**kw))
