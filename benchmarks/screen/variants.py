"""The variants screen.py runs (2026-11-29: Parzen kernels that know order, sideways climbs): each a function of
the seed returning an Optuna sampler. `benchmarks/results/history/search-variants.txt` gives their counts.

    FRAC=0.05 JOBS=16 python benchmarks/screen/screen.py reduce_hard_2e24_h200,convA100 base,opzx15 0:200"""

import math

import numpy as np

from tuner.data.results import config_key, plain_value
from tuner.search import ordinal as O
from tuner.search.ordinal_grid import kernel_keep
from tuner.search.strategies import make_sampler


def base(seed):
    return make_sampler("ordinal_global", seed)


def _og(cls, seed, **kw):
    args = dict(
        seed=seed,
        global_phase=O.GLOBAL_PHASE,
        start_phase=O.START_PHASE,
        landmarks=("last",),
        landmarks_first=True,
        slice_after=O.SLICE_AFTER,
        pairs=True,
        wide_restarts=True,
        bound_every=O.BOUND_EVERY,
    )
    args.update(kw)
    return cls(**args)


def ordinal(seed):
    return make_sampler("ordinal", seed)


class Sideways(O.OrdinalSampler):
    """A climb's steps go from the most recently measured of the configurations tied with its best (within
    PROGRESS, the measurement noise): sideways moves across a plateau, as in hill climbing with sideways moves."""

    def _step(self, climb, measured, visited, rng):
        top = max(value for _, value in climb.values())
        order = {key: i for i, key in enumerate(climb)}
        tie = (1 - O.PROGRESS) * top

        def rank(item):
            key, (_, value) = item
            return (-(top if value >= tie else value), -order[key])

        ranked = sorted(climb.items(), key=rank)
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
        return self._favourite(candidates, measured, rng) if candidates else None


def side(seed):
    return _og(Sideways, seed)


class OrderedParzen(O.OrdinalSampler):
    """Parzen kernels that know order: a good configuration's kernel moves an ordered parameter one position
    (to either neighbour) with chance `lam`, else keeps its value or draws one at random as before; the
    densities that rank the draws use the same kernels. TPE's kernels over ordered values are discretised
    Gaussians; here the one-position share stands for their spread."""

    lam = 0.25
    min_values = 2

    def _kernel_tables(self, observed_count):
        # per parameter: (k x k) matrix P[c, x] of the kernel centred at position c giving position x
        tables = []
        for name, dist in self._dists.items():
            ordered, values = self._order[name]
            k = len(dist.choices)
            keep = kernel_keep(np.array([k], dtype=float), observed_count)[0]
            other = (1 - keep) / max(1, k - 1) if k > 1 else 0.0
            cat = np.full((k, k), other)
            np.fill_diagonal(cat, keep)
            if ordered and k >= max(2, self.min_values):
                nb = np.zeros((k, k))
                for c in range(k):
                    near = [x for x in (c - 1, c + 1) if 0 <= x < k]
                    nb[c, near] = 1.0 / len(near)
                cat = (1 - self.lam) * cat + self.lam * nb
            tables.append((ordered, values, list(dist.choices), cat))
        return tables

    def _positions(self, cfg, tables):
        out = []
        for (ordered, values, choices, _), name in zip(tables, self._dists):
            out.append(values.index(cfg[name]) if ordered else [plain_value(c) for c in choices].index(cfg[name]))
        return out

    def _parzen(self, measured, visited, rng):
        ranked = sorted(measured, key=lambda key: -measured[key][1])
        good_count = max(1, min(int(np.ceil(O.ELITE * len(ranked))), O.ELITE_MAX))
        names = list(self._dists)
        tg = self._kernel_tables(good_count)
        tr = self._kernel_tables(max(1, len(ranked) - good_count))
        good_pos = np.array([self._positions(measured[k][0], tg) for k in ranked[:good_count]])
        rest_pos = np.array([self._positions(measured[k][0], tg) for k in ranked[good_count:]]).reshape(-1, len(names))
        candidates = {}
        for _ in range(8 * O.PARZEN_CANDIDATES):
            if len(candidates) >= O.PARZEN_CANDIDATES:
                break
            pick = rng.randrange(good_count + 1)
            cfg = {}
            for j, name in enumerate(names):
                ordered, values, choices, table = tg[j]
                if pick < good_count:
                    row = table[good_pos[pick, j]]
                    x = rng.choices(range(len(row)), weights=row)[0]
                    cfg[name] = values[x] if ordered else plain_value(choices[x])
                else:
                    cfg[name] = plain_value(rng.choice(choices))
            key = config_key(cfg)
            if key not in visited and key not in candidates and self._feasible(cfg):
                candidates[key] = cfg
        if not candidates:
            return None
        keys = list(candidates)
        drawn = np.array([self._positions(candidates[k], tg) for k in keys])

        def log_density(obs, tables):
            sizes = np.array([len(t[2]) for t in tables], dtype=float)
            uniform = -np.log(sizes).sum()
            if len(obs) == 0:
                return np.full(len(drawn), uniform)
            logp = np.zeros((len(drawn), len(obs) + 1))
            for j, t in enumerate(tables):
                logp[:, :-1] += np.log(t[3][obs[:, j][None, :], drawn[:, j][:, None]])
            logp[:, -1] = uniform
            top = logp.max(axis=1, keepdims=True)
            return top[:, 0] + np.log(np.exp(logp - top).sum(axis=1)) - np.log(len(obs) + 1)

        score = log_density(good_pos, tg) - log_density(rest_pos, tr)
        return candidates[keys[int(np.argmax(score))]]


def opz(seed):
    return _og(OrderedParzen, seed)


class OrderedParzen50(OrderedParzen):
    lam = 0.5


def opz50(seed):
    return _og(OrderedParzen50, seed)


class OrderedParzen10(OrderedParzen):
    lam = 0.1


def opz10(seed):
    return _og(OrderedParzen10, seed)


class OrderedParzen35(OrderedParzen):
    lam = 0.35


def opz35(seed):
    return _og(OrderedParzen35, seed)


class OrderedParzen3(OrderedParzen):
    min_values = 3


def opz3(seed):
    return _og(OrderedParzen3, seed)


class OrderedParzenWide(OrderedParzen):
    min_values = O.WIDE


def opzw(seed):
    return _og(OrderedParzenWide, seed)


class OrderedParzenCrowd(OrderedParzen):
    """Ordered kernels only where CROWD measurements lie within CROWD_SHARE of the best (a plateau, where the
    proposals refine near the best); categorical kernels elsewhere."""

    def _parzen(self, measured, visited, rng):
        values = [v for _, v in measured.values()]
        top = max(values)
        if sum(v >= O.CROWD_SHARE * top for v in values) >= O.CROWD:
            return OrderedParzen._parzen(self, measured, visited, rng)
        return O.OrdinalSampler._parzen(self, measured, visited, rng)


def opzc(seed):
    return _og(OrderedParzenCrowd, seed)


def _log_neighbours(values):
    """Each position's neighbours: the values nearest (in log) to twice and half its own, where all values are
    positive; else (or where that is the value itself) the adjacent positions."""
    k = len(values)
    out = []
    for c, v in enumerate(values):
        near = set()
        if all(isinstance(x, (int, float)) and x > 0 for x in values):
            for target in (2.0 * v, 0.5 * v):
                x = min(range(k), key=lambda i: (abs(math.log(values[i] / target)), i))
                if x != c:
                    near.add(x)
        if not near:
            near = {x for x in (c - 1, c + 1) if 0 <= x < k}
        out.append(sorted(near))
    return out


class OrderedParzenLog(OrderedParzen):
    """OrderedParzen whose kernel moves an ordered value to the one nearest twice or half it."""

    def _kernel_tables(self, observed_count):
        tables = []
        for name, dist in self._dists.items():
            ordered, values = self._order[name]
            k = len(dist.choices)
            keep = kernel_keep(np.array([k], dtype=float), observed_count)[0]
            other = (1 - keep) / max(1, k - 1) if k > 1 else 0.0
            cat = np.full((k, k), other)
            np.fill_diagonal(cat, keep)
            if ordered and k >= max(2, self.min_values):
                nb = np.zeros((k, k))
                for c, near in enumerate(_log_neighbours(values)):
                    nb[c, near] = 1.0 / len(near)
                cat = (1 - self.lam) * cat + self.lam * nb
            tables.append((ordered, values, list(dist.choices), cat))
        return tables


def opzx(seed):
    return _og(OrderedParzenLog, seed)


class OrderedParzenLog15(OrderedParzenLog):
    lam = 0.15


class OrderedParzenLog35(OrderedParzenLog):
    lam = 0.35


class OrderedParzenLog3(OrderedParzenLog):
    min_values = 3


def opzx15(seed):
    return _og(OrderedParzenLog15, seed)


def opzx35(seed):
    return _og(OrderedParzenLog35, seed)


def opzx3(seed):
    return _og(OrderedParzenLog3, seed)


def committed(seed):
    return make_sampler("ordinal_global", seed)


# 2026-11-29 (stop 54): the start phase ends once its Parzen draws stop improving; climb steps interleaved in it.
from tuner.search.ordinal_history import RunningRead


def climb_read_quiet(patience, progress, phase, start_phase, quiet_after, restarts=False):
    def fold(state, key, cfg, value):
        if value > state["best"] * (1 + progress):
            state["best"], state["since"], state["quiet"] = value, 0, 0
        elif state["seen"] >= state["until"]:
            state["since"] += 1
        else:
            state["quiet"] += 1
        state["seen"] += 1
        state["top"] = max(state["top"], value)
        if (restarts or state["start"] == 0) and state["seen"] < state["until"] and state["quiet"] >= quiet_after:
            state["until"] = state["seen"]
        if patience and state["since"] >= patience:
            stalled = state["start"] > 0 and state["top"] <= state["top_before"] * (1 + progress)
            state.update(start=state["seen"], best=0.0, since=0, quiet=0, until=state["seen"] + phase, stalled=stalled,
                         top_before=state["top"])

    return RunningRead(lambda: {"start": 0, "best": 0.0, "since": 0, "quiet": 0, "seen": 0, "until": start_phase,
                                "top": 0.0, "top_before": 0.0, "stalled": False}, fold, dict)


class Quiet(O.OrdinalSampler):
    quiet_after = 20
    restarts = False

    def bind(self, *a, **k):
        super().bind(*a, **k)
        self._climbs = climb_read_quiet(self.patience, O.PROGRESS, self.global_phase, self.start_phase,
                                        self.quiet_after, self.restarts)


def _quiet(n, restarts=False):
    cls = type(f"Quiet{n}", (Quiet,), {"quiet_after": n, "restarts": restarts})
    return lambda seed: _og(cls, seed)


q10, q15, q20, q30 = _quiet(10), _quiet(15), _quiet(20), _quiet(30)
q15r, q20r = _quiet(15, True), _quiet(20, True)


class Interleave(O.OrdinalSampler):
    every = 4

    def _restart_draw(self, measured, visited, rng):
        state = self._climbs.read(measured)
        if state["start"] == 0 and len(measured) >= self.n_startup and len(measured) % self.every == 0:
            cfg = self._step(measured, measured, visited, rng)
            if cfg is not None:
                return cfg
        return super()._restart_draw(measured, visited, rng)


def _inter(n):
    cls = type(f"Interleave{n}", (Interleave,), {"every": n})
    return lambda seed: _og(cls, seed)


il3, il4, il6 = _inter(3), _inter(4), _inter(6)


class CentreClimb(Quiet):
    """In the start phase, every `every`-th measurement is a step of a climb from the grid's centre (ordinal's
    start), kept while it progresses (`lineage_patience` of its own measurements without progress end it)."""

    every = 2
    lineage_patience = 10
    quiet_after = 10**9

    def _restart_draw(self, measured, visited, rng):
        state = self._climbs.read(measured)
        if state["start"] == 0 and len(measured) >= self.n_startup and len(measured) % self.every == 0:
            cfg = self._lineage_step(measured, visited, rng)
            if cfg is not None:
                self._lineage_keys.add(config_key(cfg))
                return cfg
        return super()._restart_draw(measured, visited, rng)

    def _lineage_step(self, measured, visited, rng):
        if not hasattr(self, "_lineage_keys"):
            self._lineage_keys = set()
        own = [(k, measured[k]) for k in measured if k in self._lineage_keys]
        if not own:
            if getattr(self, "_centre_tried", False):
                return None
            self._centre_tried = True
            r = random.Random(self.seed)
            cfg = {n: (v[len(v) // 2] if o else r.choice(v)) for n, (o, v) in self._order.items()}
            if config_key(cfg) in visited or not self._feasible(cfg):
                return None
            return cfg
        best, since = 0.0, 0
        for _, (_, value) in own:
            if value > best * (1 + O.PROGRESS):
                best, since = value, 0
            else:
                since += 1
        if since >= self.lineage_patience:
            return None
        return self._step(dict(own), measured, visited, rng)


import random


def _cc(every, patience, quiet=10**9):
    cls = type(f"CC{every}_{patience}_{quiet}", (CentreClimb,), {"every": every, "lineage_patience": patience,
                                                                 "quiet_after": quiet})
    return lambda seed: _og(cls, seed)


cc2p10, cc2p20, cc3p10, cc2p10q20 = _cc(2, 10), _cc(2, 20), _cc(3, 10), _cc(2, 10, 20)


class CappedCentreClimb(CentreClimb):
    cap = 15

    def _lineage_step(self, measured, visited, rng):
        if len(getattr(self, "_lineage_keys", ())) >= self.cap:
            return None
        return super()._lineage_step(measured, visited, rng)


def _ccc(every, patience, cap):
    cls = type(f"CCC{every}_{patience}_{cap}", (CappedCentreClimb,), {"every": every, "lineage_patience": patience,
                                                                      "cap": cap})
    return lambda seed: _og(cls, seed)


c2p10c12, c2p10c20, c2p6c20 = _ccc(2, 10, 12), _ccc(2, 10, 20), _ccc(2, 6, 20)


# later still: the centre climb started later, or cut once it falls behind
from tuner.search.strategies import make_sampler as _ms


class LateCentre(O.OrdinalSampler):
    late = 20
    behind = 0.0
    grace = 5

    def _centre_step(self, measured, visited, rng):
        if len(measured) < self.late:
            return None
        if self.behind and self._centre:
            own = [measured[k][1] for k in self._centre if k in measured]
            if len(own) >= self.grace and max(own) < self.behind * max(v for _, v in measured.values()):
                return None
        return super()._centre_step(measured, visited, rng)


def _late(late, behind=0.0, grace=5):
    cls = type(f"Late{late}_{behind}", (LateCentre,), {"late": late, "behind": behind, "grace": grace})

    def make(seed):
        s = _ms("ordinal_global", seed)
        s.__class__ = cls
        return s
    return make


late12, late20, behind90, behind95 = _late(12), _late(20), _late(0, 0.9), _late(0, 0.95)


# stop 55: the centre climb's settings set per run (module constants, read at call time; each factory sets all)
def _cfg(every=2, patience=10, cap=20, behind=0.9, grace=5):
    def make(seed):
        O.CENTRE_EVERY, O.CENTRE_PATIENCE, O.CENTRE_BEHIND, O.CENTRE_GRACE = every, patience, behind, grace
        s = _ms("ordinal_global", seed)
        s.centre_climb = cap
        return s
    return make


d0 = _cfg()
unc = _cfg(cap=10**6)
cap40 = _cfg(cap=40)
e1c20 = _cfg(every=1, cap=20)
e1c40 = _cfg(every=1, cap=40)
unc_p20 = _cfg(cap=10**6, patience=20)


# the centre climb's step chosen by the upper bound (prediction + kappa sd) instead of the prediction
from tuner.search.ordinal import one_hot_quadratic_forms as _oqf
from tuner.data.results import config_key as _ck


class UcbCentre(O.OrdinalSampler):
    kappa = 1.0

    def _ucb_favourite(self, candidates, measured, rng):
        gram, moment, ones = self._sums.read(measured)
        y = np.log(self._sums.values)
        mean = y.mean()
        inverse = np.linalg.inv(gram + O.RIDGE * np.eye(self._width))
        weights = inverse @ (moment - mean * ones)
        residuals = y - mean - weights[self._features_of(self._sums.keys)].sum(axis=1)
        variance = max(float(residuals @ residuals) / max(1, len(y) - 1), 1e-6)
        keys = list(candidates)
        columns = self._features_of(keys)
        spread = _oqf(inverse, columns) * variance
        score = weights[columns].sum(axis=1) + self.kappa * np.sqrt(spread) + np.array([rng.random() * 1e-9 for _ in keys])
        return candidates[keys[int(np.argmax(score))]]

    def _centre_step(self, measured, visited, rng, top):
        if self._centre is None or len(self._centre) >= self.centre_climb:
            return super()._centre_step(measured, visited, rng, top)
        own = {key: measured[key] for key in measured if key in self._centre}
        if not own:
            return None
        best, since = 0.0, 0
        for _, value in own.values():
            best, since = (value, 0) if value > best * (1 + O.PROGRESS) else (best, since + 1)
        if since >= O.CENTRE_PATIENCE:
            return None
        if len(own) >= O.CENTRE_GRACE and max(value for _, value in own.values()) < O.CENTRE_BEHIND * top:
            return None
        bkey, (bcfg, _) = max(own.items(), key=lambda item: item[1][1])
        steps = {k: c for k, c in self._neighbours(bkey, bcfg) if k not in visited}
        if not steps:
            return None
        cfg = self._ucb_favourite(steps, measured, rng)
        self._centre.add(_ck(cfg))
        return cfg


def _ucb(kappa, cap=20):
    cls = type(f"Ucb{kappa}", (UcbCentre,), {"kappa": kappa})

    def make(seed):
        O.CENTRE_EVERY, O.CENTRE_PATIENCE, O.CENTRE_BEHIND, O.CENTRE_GRACE = 2, 10, 0.9, 5
        s = _ms("ordinal_global", seed)
        s.__class__ = cls
        s.centre_climb = cap
        return s
    return make


ucb0, ucb1, ucb2, ucb1c40 = _ucb(0.0), _ucb(1.0), _ucb(2.0), _ucb(1.0, 40)


# the cap ends only a climb that does not lead: one whose best is at least `share` of the study's best goes on
class LeadCentre(O.OrdinalSampler):
    share = 1.0

    def _centre_step(self, measured, visited, rng, top):
        own = [measured[k][1] for k in (self._centre or ()) if k in measured]
        cap = self.centre_climb
        if own and max(own) >= self.share * top:
            self.centre_climb = 10**6
        try:
            return super()._centre_step(measured, visited, rng, top)
        finally:
            self.centre_climb = cap


def _lead(share, cap=20):
    cls = type(f"Lead{share}", (LeadCentre,), {"share": share})

    def make(seed):
        O.CENTRE_EVERY, O.CENTRE_PATIENCE, O.CENTRE_BEHIND, O.CENTRE_GRACE = 2, 10, 0.9, 5
        s = _ms("ordinal_global", seed)
        s.__class__ = cls
        s.centre_climb = cap
        return s
    return make


lead, lead97, lead99 = _lead(1.0), _lead(0.97), _lead(0.99)


class LeadCapCentre(O.OrdinalSampler):
    share, longer = 1.0, 40

    def _centre_step(self, measured, visited, rng, top):
        own = [measured[k][1] for k in (self._centre or ()) if k in measured]
        cap = self.centre_climb
        if own and max(own) >= self.share * top:
            self.centre_climb = self.longer
        try:
            return super()._centre_step(measured, visited, rng, top)
        finally:
            self.centre_climb = cap


def _leadcap(longer, cap=20):
    cls = type(f"LeadCap{longer}", (LeadCapCentre,), {"longer": longer})

    def make(seed):
        O.CENTRE_EVERY, O.CENTRE_PATIENCE, O.CENTRE_BEHIND, O.CENTRE_GRACE = 2, 10, 0.9, 5
        s = _ms("ordinal_global", seed)
        s.__class__ = cls
        s.centre_climb = cap
        return s
    return make


lead30, lead40 = _leadcap(30), _leadcap(40)


# a leading climb goes on past its cap only where its best lies apart from the best of the other measurements
class LeadApart(O.OrdinalSampler):
    apart = 0.3

    def _distance(self, a, b):
        return sum(abs(x - y) for x, y, (ordered, _) in zip(self._position(a), self._position(b), self._order.values()) if ordered)

    def _centre_step(self, measured, visited, rng, top):
        cap = self.centre_climb
        mine = [(measured[k][1], measured[k][0]) for k in (self._centre or ()) if k in measured]
        if mine:
            value, cfg = max(mine, key=lambda t: t[0])
            others = [v for k, v in measured.items() if k not in self._centre]
            if value >= top and others:
                _, (ocfg, _) = max(((v[1], v) for v in others), key=lambda t: t[0])
                if self._distance(cfg, ocfg) >= self.apart:
                    self.centre_climb = 10**6
        try:
            return super()._centre_step(measured, visited, rng, top)
        finally:
            self.centre_climb = cap


def _apart(apart, cap=20):
    cls = type(f"Apart{apart}", (LeadApart,), {"apart": apart})

    def make(seed):
        O.CENTRE_EVERY, O.CENTRE_PATIENCE, O.CENTRE_BEHIND, O.CENTRE_GRACE = 2, 10, 0.9, 5
        s = _ms("ordinal_global", seed)
        s.__class__ = cls
        s.centre_climb = cap
        return s
    return make


apart3, apart5 = _apart(0.3), _apart(0.5)


# the centre climb's steps ranked by a model of its own measurements and the space-filling start only
from tuner.search.ordinal_grid import one_hot_sums as _ohs


class OwnModelCentre(O.OrdinalSampler):
    def _centre_step(self, measured, visited, rng, top):
        if self._centre is None or len(self._centre) >= self.centre_climb:
            return super()._centre_step(measured, visited, rng, top)
        own = {key: measured[key] for key in measured if key in self._centre}
        if not own:
            return None
        best, since = 0.0, 0
        for _, value in own.values():
            best, since = (value, 0) if value > best * (1 + O.PROGRESS) else (best, since + 1)
        if since >= O.CENTRE_PATIENCE:
            return None
        if len(own) >= O.CENTRE_GRACE and max(value for _, value in own.values()) < O.CENTRE_BEHIND * top:
            return None
        bkey, (bcfg, _) = max(own.items(), key=lambda item: item[1][1])
        steps = {k: c for k, c in self._neighbours(bkey, bcfg) if k not in visited}
        if not steps:
            return None
        keys = list(measured)[: self.n_startup] + [k for k in own if k not in list(measured)[: self.n_startup]]
        width = max(self._columns.values()) + 1
        y = np.log(np.array([measured[k][1] for k in keys]))
        gram, moment, ones = _ohs(self._columns_of(keys), y, width)
        mean = y.mean()
        weights = np.linalg.solve(gram + O.RIDGE * np.eye(width), moment - mean * ones)
        cand = list(steps)
        score = weights[self._columns_of(cand)].sum(axis=1) + np.array([rng.random() * 1e-9 for _ in cand])
        cfg = steps[cand[int(np.argmax(score))]]
        self._centre.add(_ck(cfg))
        return cfg


def _own(cap=20):
    def make(seed):
        O.CENTRE_EVERY, O.CENTRE_PATIENCE, O.CENTRE_BEHIND, O.CENTRE_GRACE = 2, 10, 0.9, 5
        s = _ms("ordinal_global", seed)
        s.__class__ = OwnModelCentre
        s.centre_climb = cap
        return s
    return make


own20, own40 = _own(20), _own(40)


# the Parzen model without the centre climb's measurements (the draws stay independent of the climb)
def _sep_parzen(self, measured, visited, rng):
    if self._centre:
        measured = {k: v for k, v in measured.items() if k not in self._centre} or measured
    return O.OrdinalSampler._parzen(self, measured, visited, rng)


SepCentre = type("SepCentre", (O.OrdinalSampler,), {"_parzen": _sep_parzen})
SepLead = type("SepLead", (LeadCentre,), {"_parzen": _sep_parzen, "share": 1.0})


def _sep(cls, cap):
    def make(seed):
        O.CENTRE_EVERY, O.CENTRE_PATIENCE, O.CENTRE_BEHIND, O.CENTRE_GRACE = 2, 10, 0.9, 5
        s = _ms("ordinal_global", seed)
        s.__class__ = cls
        s.centre_climb = cap
        return s
    return make


sep, sep40, sep_unc, sep_lead = _sep(SepCentre, 20), _sep(SepCentre, 40), _sep(SepCentre, 10**6), _sep(SepLead, 20)


# the Parzen model's good set takes at most half its members from the centre climb
from tuner.search.ordinal_grid import parzen_kernels as _pk, parzen_log_density as _pld, weighted_choice as _wc


def _half_parzen(self, measured, visited, rng):
    ranked = sorted(measured, key=lambda key: -measured[key][1])
    good_count = max(1, min(int(np.ceil(O.ELITE * len(ranked))), O.ELITE_MAX))
    if self._centre:
        limit, good, later = max(1, good_count // 2), [], []
        for key in ranked:
            if len(good) < good_count and (key not in self._centre or sum(k in self._centre for k in good) < limit):
                good.append(key)
            else:
                later.append(key)
        ranked = good + later
    positions = self._kernel_positions(ranked)
    good, rest = positions[:good_count], positions[good_count:]
    orders = [self._order[name] for name in self._dists]
    good_kernels = _pk(orders, good_count, O.PARZEN_NEIGHBOUR, self._kernel_neighbours)
    candidates = {}
    for _ in range(8 * O.PARZEN_CANDIDATES):
        if len(candidates) >= O.PARZEN_CANDIDATES:
            break
        pick = rng.randrange(good_count + 1)
        cfg = {}
        for j, (name, dist) in enumerate(self._dists.items()):
            if pick < good_count:
                cfg[name] = self._kernel_value(name, _wc(good_kernels[j].row(good[pick, j]), rng))
            else:
                cfg[name] = plain_value(rng.choice(dist.choices))
        key = config_key(cfg)
        if key not in visited and key not in candidates and self._feasible(cfg):
            candidates[key] = cfg
    if not candidates:
        return None
    keys = list(candidates)
    drawn = self._kernel_positions(keys)
    rest_kernels = _pk(orders, max(1, len(rest)), O.PARZEN_NEIGHBOUR, self._kernel_neighbours)
    score = _pld(drawn, good, good_kernels) - _pld(drawn, rest, rest_kernels)
    return candidates[keys[int(np.argmax(score))]]


HalfCentre = type("HalfCentre", (O.OrdinalSampler,), {"_parzen": _half_parzen})
HalfLead = type("HalfLead", (LeadCentre,), {"_parzen": _half_parzen, "share": 1.0})
half, half_lead, half40 = _sep(HalfCentre, 20), _sep(HalfLead, 20), _sep(HalfCentre, 40)


# the first restart after the start phase resumes the centre climb (where its best is near the study's) before the
# restart's Parzen draws
import itertools as _it


class ResumeCentre(O.OrdinalSampler):
    share, patience = 0.97, 10

    def _restart_draw(self, measured, visited, rng):
        state = self._climbs.read(measured)
        start = state["start"]
        if start > 0 and self._centre:
            first = getattr(self, "_first_restart", None)
            if first is None:
                first = self._first_restart = start
            if start == first:
                own = {k: measured[k] for k in measured if k in self._centre}
                before = [v for k, (_, v) in own.items() if k not in set(_it.islice(measured, start, None))]
                after = [measured[k][1] for k in _it.islice(measured, start, None) if k in self._centre]
                if own and max(v for _, v in own.values()) >= self.share * state["top_before"]:
                    best, since = (max(before) if before else 0.0), 0
                    for v in after:
                        best, since = (v, 0) if v > best * (1 + O.PROGRESS) else (best, since + 1)
                    if since < self.patience:
                        cfg = self._step(own, measured, visited, rng)
                        if cfg is not None:
                            self._centre.add(_ck(cfg))
                            return cfg
        return super()._restart_draw(measured, visited, rng)


def _resume(share=0.97, patience=10):
    cls = type(f"Resume{share}_{patience}", (ResumeCentre,), {"share": share, "patience": patience})
    return _sep(cls, 20)


resume, resume95, resume_p5 = _resume(), _resume(0.95), _resume(0.97, 5)


# the upper bound's proposal in the start phase too: every `every`-th measurement (an odd one, not the climb's)
def _make_bnd(base_cls, every):
    def _restart_draw(self, measured, visited, rng):
        state = self._climbs.read(measured)
        n = len(measured)
        if state["start"] == 0 and n >= 10 and n % every == every // 2 and n % 2 == 1 and ("s", n) not in self._bounded:
            self._bounded.add(("s", n))
            cfg = self._bound(measured, visited, rng)
            if cfg is not None:
                return cfg
        return base_cls._restart_draw(self, measured, visited, rng)
    return type(f"Bnd{base_cls.__name__}{every}", (base_cls,), {"_restart_draw": _restart_draw})


bnd6 = _sep(_make_bnd(O.OrdinalSampler, 6), 20)
lead_bnd6 = _sep(_make_bnd(LeadCentre, 6), 20)
bnd10 = _sep(_make_bnd(O.OrdinalSampler, 10), 20)


# stop 56: a climb skips steps that change only parameters measured to make no difference (every measured pair of
# configurations differing in that parameter alone within `tol` of each other, at least `groups` such pairs)
class NeutralSteps(O.OrdinalSampler):
    tol, groups, centre_only = 0.01, 2, True

    def _neutral(self, measured):
        names = [n for n, (_, values) in self._order.items() if len(values) > 1]
        out = set()
        for p in names:
            seen = {}
            for cfg, v in measured.values():
                seen.setdefault(tuple((n, plain_value(cfg[n])) for n in names if n != p), []).append(v)
            pairs = [vs for vs in seen.values() if len(vs) > 1]
            if len(pairs) >= self.groups and all(max(vs) <= (1 + self.tol) * min(vs) for vs in pairs):
                out.add(p)
        return out

    def _centre_step(self, measured, visited, rng, top):
        self._in_centre = True
        try:
            return super()._centre_step(measured, visited, rng, top)
        finally:
            self._in_centre = False

    def _step(self, climb, measured, visited, rng):
        if self.centre_only and not getattr(self, "_in_centre", False):
            return super()._step(climb, measured, visited, rng)
        neutral = self._neutral(measured)
        if not neutral:
            return super()._step(climb, measured, visited, rng)
        ranked = sorted(climb.items(), key=lambda item: -item[1][1])
        candidates, searched = {}, 0
        for key, (cfg, _) in ranked:
            if key in self._exhausted:
                continue
            steps = [(k, c) for k, c in self._neighbours(key, cfg) if k not in visited]
            if not steps:
                self._exhausted.add(key)
                continue
            useful = [(k, c) for k, c in steps if any(c[n] != cfg[n] for n in self._order if n not in neutral)]
            if useful:
                candidates.update(useful)
                searched += 1
                if searched >= self.top_k:
                    break
        return self._favourite(candidates, measured, rng) if candidates else None


def _neutral(centre_only, tol=0.01, groups=2, cls=NeutralSteps):
    kind = type(f"Neutral{int(centre_only)}_{tol}_{groups}", (cls,), {"centre_only": centre_only, "tol": tol, "groups": groups})
    return _sep(kind, 20)


neu_c, neu_all, neu_c5, neu_all5 = _neutral(True), _neutral(False), _neutral(True, 0.005), _neutral(False, 0.005)


# stop 56: on a plateau (CROWD measurements within CROWD_SHARE of the study's best), the centre climb goes on past its
# cap (`every`: every measurement of the start phase instead of every other; `patience`: its own patience there)
class PlateauCentre(O.OrdinalSampler):
    every, patience, crowd, share = 2, 10, 10, 0.97

    def _crowded(self, measured):
        values = [v for _, v in measured.values()]
        top = max(values)
        return sum(v >= self.share * top for v in values) >= self.crowd

    def _restart_draw(self, measured, visited, rng):
        state = self._climbs.read(measured)
        if (self.centre_climb and state["start"] == 0 and self._centre and len(measured) >= self.n_startup
                and len(measured) % self.every == 0 and self._crowded(measured)):
            cap, patience = self.centre_climb, O.CENTRE_PATIENCE
            self.centre_climb, O.CENTRE_PATIENCE = 10**6, self.patience
            try:
                cfg = self._centre_step(measured, visited, rng, state["top"])
            finally:
                self.centre_climb, O.CENTRE_PATIENCE = cap, patience
            if cfg is not None:
                return cfg
        return super()._restart_draw(measured, visited, rng)


def _plat(every=2, patience=10, crowd=10, share=0.97):
    kind = type(f"Plat{every}_{patience}_{crowd}_{share}", (PlateauCentre,),
                {"every": every, "patience": patience, "crowd": crowd, "share": share})
    return _sep(kind, 20)


platA, platB, platC, platD = _plat(), _plat(1), _plat(1, 30), _plat(2, 30)


# stop 56: sideways moves across ties (Sideways._step) in the centre climb only (side_c) or in every climb (side_all)
class SideCentre(O.OrdinalSampler):
    centre_only = True

    def _centre_step(self, measured, visited, rng, top):
        self._in_centre = True
        try:
            return super()._centre_step(measured, visited, rng, top)
        finally:
            self._in_centre = False

    def _step(self, climb, measured, visited, rng):
        if self.centre_only and not getattr(self, "_in_centre", False):
            return O.OrdinalSampler._step(self, climb, measured, visited, rng)
        return Sideways._step(self, climb, measured, visited, rng)


side_c = _sep(SideCentre, 20)
side_all = _sep(type("SideAll", (SideCentre,), {"centre_only": False}), 20)
side_c40 = _sep(SideCentre, 40)


# stop 56: on a plateau, the centre climb as `ordinal` climbs: ranked by its own model, uncapped, with its patience
class PlateauOwn(PlateauCentre, OwnModelCentre):
    pass


def _pown(every=1, patience=30, crowd=10, share=0.97):
    kind = type(f"PlatOwn{every}_{patience}_{crowd}_{share}", (PlateauOwn,),
                {"every": every, "patience": patience, "crowd": crowd, "share": share})
    return _sep(kind, 20)


pown1, pown2, pown1p10 = _pown(1, 30), _pown(2, 30), _pown(1, 10)


# the own model only on the plateau (before it, the committed centre climb)
class PlateauOwnOnly2(PlateauCentre):
    def _restart_draw(self, measured, visited, rng):
        state = self._climbs.read(measured)
        if (self.centre_climb and state["start"] == 0 and self._centre and len(measured) >= self.n_startup
                and len(measured) % self.every == 0 and self._crowded(measured)):
            cap, patience = self.centre_climb, O.CENTRE_PATIENCE
            self.centre_climb, O.CENTRE_PATIENCE = 10**6, self.patience
            try:
                cfg = OwnModelCentre._centre_step(self, measured, visited, rng, state["top"])
            finally:
                self.centre_climb, O.CENTRE_PATIENCE = cap, patience
            if cfg is not None:
                return cfg
        return O.OrdinalSampler._restart_draw(self, measured, visited, rng)


def _powno(every=1, patience=30, crowd=10, share=0.97):
    kind = type(f"PlatOwnOnly{every}_{patience}_{crowd}_{share}", (PlateauOwnOnly2,),
                {"every": every, "patience": patience, "crowd": crowd, "share": share})
    return _sep(kind, 20)


powno1 = _powno(1, 30)


# stop 56, on 7256cae: the centre climb's first steps (fewer than `own_after` of its measurements) ranked by the model
# of every measurement, later ones by its own
class GraceOwn(O.OrdinalSampler):
    own_after = 5

    def _centre_favourite(self, own, measured, visited, rng):
        if len(own) < self.own_after:
            best_key, (best_cfg, _) = max(own.items(), key=lambda item: item[1][1])
            steps = {key: cfg for key, cfg in self._neighbours(best_key, best_cfg) if key not in visited}
            return self._favourite(steps, measured, rng) if steps else None
        return super()._centre_favourite(own, measured, visited, rng)


def _grace(after):
    kind = type(f"GraceOwn{after}", (GraceOwn,), {"own_after": after})

    def make(seed):
        s = base(seed)
        s.__class__ = kind
        return s
    return make


grace5, grace3 = _grace(5), _grace(3)
