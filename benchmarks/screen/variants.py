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
    if name.startswith("pog") or name.startswith("pord"):
        return make8(name, seed)
    if name.startswith("early"):
        return make7(name, seed)
    if name.startswith("mode"):
        return make6(name, seed)
    if name.startswith("rf"):
        return make5(name, seed)
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


class Forest(OrdinalSampler):
    """Random-forest expected improvement (SMAC-like) in place of the Parzen
    phases ("phase"), the climb's step ranking ("step"), or both."""
    where = "phase"
    trees = 32
    leaf = 1
    feats = 1.0
    xi = 0.0

    def bind(self, *a, **k):
        super().bind(*a, **k)
        self._names = list(self._dists)
        if self._enumerated is not None:
            self._all_keys = [key for key, _ in self._enumerated]
            self._all_cfgs = [cfg for _, cfg in self._enumerated]
            self._all_X = np.array([self._enc(cfg) for cfg in self._all_cfgs], dtype=float)
        self._rf_cache = None

    def _enc(self, cfg):
        return [self._order[n][1].index(cfg[n]) for n in self._names]

    def _model(self, measured):
        if self._rf_cache is not None and self._rf_cache[0] == len(measured):
            return self._rf_cache[1]
        from sklearn.ensemble import RandomForestRegressor
        X = np.array([self._enc(cfg) for cfg, _ in measured.values()], dtype=float)
        y = np.log([v for _, v in measured.values()])
        rf = RandomForestRegressor(n_estimators=self.trees, min_samples_leaf=self.leaf, max_features=self.feats,
                                   bootstrap=True, random_state=self.seed * 7 + len(measured), n_jobs=1)
        rf.fit(X, y)
        self._rf_cache = (len(measured), (rf, y.max()))
        return rf, y.max()

    def _ei(self, measured, X):
        rf, best = self._model(measured)
        preds = np.stack([t.predict(X) for t in rf.estimators_])
        mu, sd = preds.mean(0), preds.std(0) + 1e-9
        from scipy.stats import norm
        z = (mu - best - self.xi) / sd
        return (mu - best - self.xi) * norm.cdf(z) + sd * norm.pdf(z), mu

    def _parzen(self, measured, visited, rng):
        if self.where not in ("phase", "both") or len(measured) < 8 or self._enumerated is None:
            return super()._parzen(measured, visited, rng)
        idx = [i for i, key in enumerate(self._all_keys) if key not in visited]
        if not idx:
            return None
        ei, _ = self._ei(measured, self._all_X[idx])
        ei = ei + np.array([rng.random() * 1e-12 for _ in idx])
        return self._all_cfgs[idx[int(np.argmax(ei))]]

    def _step(self, climb, measured, visited, rng):
        if self.where not in ("step", "both") or len(measured) < 8:
            return super()._step(climb, measured, visited, rng)
        ranked = sorted(climb.items(), key=lambda item: -item[1][1])
        candidates = {}
        searched = 0
        for key, (cfg, _) in ranked:
            if key in self._exhausted:
                continue
            steps = [(k, c) for k, c in self._neighbours(key, cfg) if k not in visited]
            if not steps:
                self._exhausted.add(key)
            else:
                candidates.update(steps)
                searched += 1
                if searched >= self.top_k:
                    break
        if not candidates:
            return None
        keys = list(candidates)
        X = np.array([self._enc(candidates[k]) for k in keys], dtype=float)
        ei, mu = self._ei(measured, X)
        score = (mu if self.step_by == "mean" else ei) + np.array([rng.random() * 1e-12 for _ in keys])
        return candidates[keys[int(np.argmax(score))]]

    step_by = "mean"


def make5(name, seed):
    cls = type("F", (Forest,), {})
    kw = {}
    for p in name.split("+")[1:]:
        k, v = p.split("=")
        if k == "w": cls.where = v
        elif k == "t": cls.trees = int(v)
        elif k == "leaf": cls.leaf = int(v)
        elif k == "f": cls.feats = float(v)
        elif k == "by": cls.step_by = v
        elif k == "xi": cls.xi = float(v)
        else:
            kw[{"pat": "patience", "sp": "start_phase", "gp": "global_phase", "n": "n_startup", "k": "top_k"}[k]] = int(v)
    return cls(seed=seed, **og_kwargs(**kw))


class Mode(OrdinalSampler):
    """Some restarts climb within a switch combination (mode) not yet climbed:
    from the best measured configuration of the modes no earlier climb's best
    had, keeping the climb's best within that mode."""
    every = 2  # every n-th restart is a mode restart
    floor = 0.0  # the anchor must be at least this share of the best measured

    def bind(self, *a, **k):
        super().bind(*a, **k)
        self._switch = [n for n, (ordered, values) in self._order.items() if len(values) == 2 or (not ordered and len(values) > 1)]
        self._climbed = {}  # climb start -> mode of its best (recorded when the next starts)
        self._anchor = {}  # climb start -> (key, mode) or None

    def _mode(self, cfg):
        return tuple(cfg[n] for n in self._switch)

    def _climb(self, measured):
        state = self._climbs.read(measured)
        start = state["start"]
        climb = super()._climb(measured)
        if start == 0 or not self._switch:
            return climb
        if start not in self._anchor:
            items = list(measured.items())
            # the modes of every earlier climb's best
            starts = sorted(set(self._anchor) | {0})
            bounds = starts + [start]
            modes = set()
            for a, b in zip(bounds, bounds[1:]):
                seg = items[a:b]
                if seg:
                    modes.add(self._mode(max(seg, key=lambda it: it[1][1])[1][0]))
            restarts = len(self._anchor) + 1
            anchor = None
            if restarts % self.every == 0:
                top = max(v for _, (_, v) in items[:start])
                pool = [(v, k, c) for k, (c, v) in items[:start] if self._mode(c) not in modes and v >= self.floor * top]
                if pool:
                    v, k, c = max(pool, key=lambda t: t[0])
                    anchor = (k, self._mode(c))
            self._anchor[start] = anchor
        anchor = self._anchor[start]
        if anchor is None:
            return climb
        key, mode = anchor
        self._mode_now = mode
        kept = {key: measured[key]}
        kept.update({k: (c, v) for k, (c, v) in climb.items() if self._mode(c) == mode})
        return kept

    _mode_now = None

    def _step(self, climb, measured, visited, rng):
        try:
            return super()._step(climb, measured, visited, rng)
        finally:
            self._mode_now = None

    def _neighbours(self, key, cfg):
        found = super()._neighbours(key, cfg)
        if self._mode_now is None:
            return found
        return [(k, c) for k, c in found if self._mode(c) == self._mode_now]


def make6(name, seed):
    cls = type("M", (Mode,), {})
    kw = {}
    for p in name.split("+")[1:]:
        k, v = p.split("=")
        if k == "e": cls.every = int(v)
        elif k == "fl": cls.floor = float(v)
        else:
            kw[{"pat": "patience", "sp": "start_phase", "gp": "global_phase", "n": "n_startup", "k": "top_k"}[k]] = int(v)
    return cls(seed=seed, **og_kwargs(**kw))


from tuner.search.ordinal_history import RunningRead
from tuner.search.ordinal import PROGRESS


class EarlyPhase(OrdinalSampler):
    """A Parzen phase ends early once `stall` of its proposals in a row gained
    nothing (start phase; also restart phases if `restarts`)."""
    stall = 20
    restarts = False

    def bind(self, *a, **k):
        super().bind(*a, **k)
        patience, progress, phase, start_phase = self.patience, PROGRESS, self.global_phase, self.start_phase
        stall, restarts, n0 = self.stall, self.restarts, self.n_startup

        def fold(state, key, cfg, value):
            gained = value > state["best"] * (1 + progress)
            if gained:
                state["best"], state["since"] = value, 0
            elif state["seen"] >= state["until"]:
                state["since"] += 1
            in_phase = state["seen"] < state["until"]
            if in_phase and (state["start"] > 0 and restarts or state["start"] == 0 and state["seen"] >= n0):
                state["psince"] = 0 if gained else state["psince"] + 1
                if state["psince"] >= stall:
                    state["until"] = state["seen"] + 1
            state["seen"] += 1
            if patience and state["since"] >= patience:
                state.update(start=state["seen"], best=0.0, since=0, until=state["seen"] + phase, psince=0)

        self._climbs = RunningRead(lambda: {"start": 0, "best": 0.0, "since": 0, "seen": 0, "until": start_phase, "psince": 0}, fold, dict)


def make7(name, seed):
    cls = type("E", (EarlyPhase,), {})
    kw = {}
    for p in name.split("+")[1:]:
        k, v = p.split("=")
        if k == "st": cls.stall = int(v)
        elif k == "r": cls.restarts = bool(int(v))
        else:
            kw[{"pat": "patience", "sp": "start_phase", "gp": "global_phase", "n": "n_startup", "k": "top_k"}[k]] = int(v)
    return cls(seed=seed, **og_kwargs(**kw))


from tuner.search.ordinal_history import climb_read


def make8(name, seed):
    """prog: a climb's progress threshold (PROGRESS 0.002 shipped); base ordinal or og."""
    parts = name.split("+")
    base = parts[0]
    kw = {}
    prog = None
    for p in parts[1:]:
        k, v = p.split("=")
        if k == "prog": prog = float(v)
        else:
            kw[{"pat": "patience", "sp": "start_phase", "gp": "global_phase", "n": "n_startup", "k": "top_k"}[k]] = int(v)

    class P(OrdinalSampler):
        def bind(self, *a, **k):
            super().bind(*a, **k)
            self._climbs = climb_read(self.patience, prog, self.global_phase, self.start_phase)

    return P(seed=seed, **(og_kwargs(**kw) if base == "pog" else kw))


import tuner.search.ordinal as _ord


class TPEKnobs(OrdinalSampler):
    """The Parzen phases' TPE hyperparameters: candidates per ask, elite share, elite cap."""
    cand = PARZEN_CANDIDATES
    elite = ELITE
    elite_max = ELITE_MAX

    def _parzen(self, measured, visited, rng):
        saved = (_ord.PARZEN_CANDIDATES, _ord.ELITE, _ord.ELITE_MAX)
        _ord.PARZEN_CANDIDATES, _ord.ELITE, _ord.ELITE_MAX = self.cand, self.elite, self.elite_max
        try:
            return super()._parzen(measured, visited, rng)
        finally:
            _ord.PARZEN_CANDIDATES, _ord.ELITE, _ord.ELITE_MAX = saved


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


def make9(name, seed):
    base, *parts = name.split("+")
    cls = type("K", (TPEKnobs if base == "tpe" else Slice,), {})
    for p in parts:
        k, v = p.split("=")
        setattr(cls, {"c": "cand", "e": "elite", "m": "elite_max", "w": "wide_after", "d": "wide"}[k], float(v) if k == "e" else int(v))
    return cls(seed=seed, **og_kwargs())


_make_before = make


def make(name, seed):
    if name.startswith("tpe") or name.startswith("slice"):
        return make9(name, seed)
    return _make_before(name, seed)
