"""The variants screen.py runs: each a function of the seed returning an Optuna sampler."""

import numpy as np

from tuner.search import ordinal as O
from tuner.search.strategies import make_sampler


def base(seed):
    return make_sampler("ordinal_global", seed)


class Islands(O.OrdinalSampler):
    """Start phase: two independent Parzen chains (measurement index parity)."""

    n_islands = 2

    def _restart_draw(self, measured, visited, rng):
        state = self._climbs.read(measured)
        if state["start"] == 0 and len(measured) >= self.n_startup:
            island = len(measured) % self.n_islands
            own = dict(item for i, item in enumerate(measured.items()) if i % self.n_islands == island or i < self.n_startup)
            return self._parzen(own, visited, rng)
        return super()._restart_draw(measured, visited, rng)


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
    )
    args.update(kw)
    return cls(**args)


def isl2(seed):
    return _og(Islands, seed)


class Islands3(Islands):
    n_islands = 3


def isl3(seed):
    return _og(Islands3, seed)


class UCB(O.OrdinalSampler):
    """Every k-th Parzen-phase proposal: the unvisited configuration of highest mean + kappa * sd under the
    ridge model with every pair column (Bayesian linear regression's posterior)."""

    every, kappa, pool = 5, 2.0, 2000

    def _restart_draw(self, measured, visited, rng):
        if len(measured) >= 10 and len(measured) % self.every == 0:
            cfg = self._ucb(measured, visited, rng)
            if cfg is not None:
                return cfg
        return super()._restart_draw(measured, visited, rng)

    def _ucb(self, measured, visited, rng):
        gram, moment, ones = self._sums.read(measured)
        y = np.log(self._sums.values)
        mean = y.mean()
        width = self._width
        inverse = np.linalg.inv(gram + O.RIDGE * np.eye(width))
        w = inverse @ (moment - mean * ones)
        feats = self._features_of(self._sums.keys)
        resid = y - mean - w[feats].sum(axis=1)
        sigma2 = max(float(resid @ resid) / max(1, len(y) - 1), 1e-6)
        cands = self._random_unseen(visited, rng, self.pool)
        if not cands:
            return None
        keys = [O.config_key(c) for c in cands]
        F = self._features_of(keys)
        design = np.zeros((len(keys), width))
        design[np.arange(len(keys))[:, None], F] = 1.0
        mu = design @ w
        var = np.einsum("ij,ij->i", design @ inverse, design) * sigma2
        score = mu + self.kappa * np.sqrt(var)
        return cands[int(np.argmax(score))]


class UCB0(UCB):
    kappa = 0.0


class UCB10(UCB):
    every = 10


class UCB1(UCB):
    kappa = 1.0


def ucb(seed):
    return _og(UCB, seed)


def ucb0(seed):
    return _og(UCB0, seed)


def ucb10(seed):
    return _og(UCB10, seed)


def ucb1(seed):
    return _og(UCB1, seed)


class UCBStart(UCB):
    """UCB proposals only in the study's start phase (before the first climb)."""

    def _restart_draw(self, measured, visited, rng):
        if self._climbs.read(measured)["start"] == 0 and len(measured) >= 10 and len(measured) % self.every == 0:
            cfg = self._ucb(measured, visited, rng)
            if cfg is not None:
                return cfg
        return O.OrdinalSampler._restart_draw(self, measured, visited, rng)


class UCBStart1(UCBStart):
    kappa = 1.0


def ucbS(seed):
    return _og(UCBStart, seed)


def ucbS1(seed):
    return _og(UCBStart1, seed)


class UCBStartLong(UCBStart):
    pass


def ucbS_sp100(seed):
    return _og(UCBStart, seed, start_phase=100)


class UCBStart8(UCBStart):
    every = 8


def ucbS8(seed):
    return _og(UCBStart8, seed)


# ---- 2026-11-29 screens ----
from tuner.data.results import plain_value  # noqa: E402
from tuner.search.ordinal_grid import kernel_keep, parzen_log_density  # noqa: E402
from tuner.search.ordinal_history import RunningRead  # noqa: E402


def crowd_climb_read(patience, progress, phase, start_phase, min_start, crowd, share):
    def fold(state, key, cfg, value):
        if value > state["best"] * (1 + progress):
            state["best"], state["since"] = value, 0
        elif state["seen"] >= state["until"]:
            state["since"] += 1
        state["seen"] += 1
        state["top"] = max(state["top"], value)
        if state["start"] == 0 and state["seen"] < state["until"]:
            state["vals"] = state["vals"] + (value,)
            if state["seen"] >= min_start and sum(v >= share * state["top"] for v in state["vals"]) >= crowd:
                state["until"] = state["seen"]
        if patience and state["since"] >= patience:
            stalled = state["start"] > 0 and state["top"] <= state["top_before"] * (1 + progress)
            state.update(
                start=state["seen"], best=0.0, since=0, until=state["seen"] + phase, stalled=stalled, top_before=state["top"]
            )

    return RunningRead(
        lambda: {
            "start": 0,
            "best": 0.0,
            "since": 0,
            "seen": 0,
            "until": start_phase,
            "top": 0.0,
            "top_before": 0.0,
            "stalled": False,
            "vals": (),
        },
        fold,
        dict,
    )


class CrowdStart(O.OrdinalSampler):
    min_start, crowd, share = 20, O.CROWD, O.CROWD_SHARE

    def bind(self, *a, **k):
        super().bind(*a, **k)
        self._climbs = crowd_climb_read(
            self.patience, O.PROGRESS, self.global_phase, self.start_phase, self.min_start, self.crowd, self.share
        )


def crowd20(seed):
    return _og(CrowdStart, seed)


class CrowdStart30(CrowdStart):
    min_start = 30


def crowd30(seed):
    return _og(CrowdStart30, seed)


class CrowdStart15(CrowdStart):
    min_start, crowd = 20, 15


def crowd20c15(seed):
    return _og(CrowdStart15, seed)


class ParzenV(O.OrdinalSampler):
    elite, elite_max, niche = O.ELITE, O.ELITE_MAX, False

    def _parzen(self, measured, visited, rng):
        ranked = sorted(measured, key=lambda key: -measured[key][1])
        good_count = max(1, min(int(np.ceil(self.elite * len(ranked))), self.elite_max))
        if self.niche:
            switches = [n for n, d in self._dists.items() if len(d.choices) == 2]
            top = ranked[:good_count]
            seen_combo = {tuple(measured[k][0][n] for n in switches) for k in top}
            extra = []
            for k in ranked[good_count:]:
                combo = tuple(measured[k][0][n] for n in switches)
                if combo not in seen_combo:
                    seen_combo.add(combo)
                    extra.append(k)
            chosen = set(top) | set(extra)
            ranked = top + extra + [k for k in ranked if k not in chosen]
            good_count = len(top) + len(extra)
        codes = self._columns_of(ranked)
        good, rest = codes[:good_count], codes[good_count:]
        sizes = np.array([len(dist.choices) for dist in self._dists.values()], dtype=float)
        names = list(self._dists)
        keep = kernel_keep(sizes, good_count)
        candidates = {}
        for _ in range(8 * O.PARZEN_CANDIDATES):
            if len(candidates) >= O.PARZEN_CANDIDATES:
                break
            pick = rng.randrange(good_count + 1)
            cfg = {}
            for j, name in enumerate(names):
                choices = self._dists[name].choices
                if pick < good_count and rng.random() < keep[j]:
                    cfg[name] = measured[ranked[pick]][0][name]
                else:
                    cfg[name] = plain_value(rng.choice(choices))
            key = O.config_key(cfg)
            if key not in visited and key not in candidates and self._feasible(cfg):
                candidates[key] = cfg
        if not candidates:
            return None
        keys = list(candidates)
        drawn = self._columns_of(keys)
        score = parzen_log_density(drawn, good, sizes) - parzen_log_density(drawn, rest, sizes)
        return candidates[keys[int(np.argmax(score))]]


def pz_same(seed):
    return _og(ParzenV, seed)


class Niche(ParzenV):
    niche = True


def niche(seed):
    return _og(Niche, seed)


class Elite20(ParzenV):
    elite = 0.2


def elite20(seed):
    return _og(Elite20, seed)


def ordinal(seed):
    return make_sampler("ordinal", seed)


class UCBRestart(UCB):
    """UCB proposals only in restart phases (after the first climb)."""

    def _restart_draw(self, measured, visited, rng):
        if self._climbs.read(measured)["start"] > 0 and len(measured) % self.every == 0:
            cfg = self._ucb(measured, visited, rng)
            if cfg is not None:
                return cfg
        return O.OrdinalSampler._restart_draw(self, measured, visited, rng)


class UCBRestart3(UCBRestart):
    every = 3


class UCBRestart2(UCBRestart):
    every = 2


def ucbR(seed):
    return _og(UCBRestart, seed)


def ucbR3(seed):
    return _og(UCBRestart3, seed)


def ucbR2(seed):
    return _og(UCBRestart2, seed)


class UCBRel(UCB):
    """UCB proposals at every k-th position of each restart phase (counted from the phase's start)."""

    every = 2

    def _restart_draw(self, measured, visited, rng):
        start = self._climbs.read(measured)["start"]
        if start > 0 and (len(measured) - start) % self.every == 0:
            cfg = self._ucb(measured, visited, rng)
            if cfg is not None:
                return cfg
        return O.OrdinalSampler._restart_draw(self, measured, visited, rng)


class UCBRel3(UCBRel):
    every = 3


def ucbRr2(seed):
    return _og(UCBRel, seed)


def ucbRr3(seed):
    return _og(UCBRel3, seed)


def ucbRr2nw(seed):
    return _og(UCBRel, seed, wide_restarts=False)


def ucbRr3nw(seed):
    return _og(UCBRel3, seed, wide_restarts=False)


class UCBRelCrowd(UCB):
    """UCB proposals at every k-th position of each restart phase, except on a plateau (CROWD measurements
    within CROWD_SHARE of the best before the phase), where the restart refines."""

    every, kappa = 3, 2.0

    def _restart_draw(self, measured, visited, rng):
        state = self._climbs.read(measured)
        start = state["start"]
        if start > 0 and (len(measured) - start) % self.every == 0:
            before = [value for _, value in itertools.islice(measured.values(), start)]
            if sum(value >= O.CROWD_SHARE * state["top_before"] for value in before) < O.CROWD:
                cfg = self._ucb(measured, visited, rng)
                if cfg is not None:
                    return cfg
        return O.OrdinalSampler._restart_draw(self, measured, visited, rng)


import itertools  # noqa: E402


class UCBRelCrowdK1(UCBRelCrowd):
    kappa = 1.0


class UCBRelCrowd2(UCBRelCrowd):
    every = 2


class UCBRelCrowd4(UCBRelCrowd):
    every = 4


def ucbRr3c(seed):
    return _og(UCBRelCrowd, seed)


def ucbRr3ck1(seed):
    return _og(UCBRelCrowdK1, seed)


def ucbRr2c(seed):
    return _og(UCBRelCrowd2, seed)


def ucbRr4c(seed):
    return _og(UCBRelCrowd4, seed)


class PlateauPairs(O.OrdinalSampler):
    """On a plateau (CROWD measurements within CROWD_SHARE of the best) a climb
    stalled for `after` measurements also takes in every pair of two of its
    best's one-parameter steps (in two different parameters), ranked by the
    model with the others: a lone spike two moves off the plateau."""

    after = 10

    def _step(self, climb, measured, visited, rng):
        state = self._climbs.read(measured)
        if climb and state["since"] >= self.after:
            top = max(v for _, v in measured.values())
            crowd = sum(v >= O.CROWD_SHARE * top for _, v in measured.values())
            if crowd >= O.CROWD:
                key, (cfg, _) = max(climb.items(), key=lambda item: item[1][1])
                singles = self._neighbours(key, cfg)
                cands = {k: c for k, c in singles if k not in visited}
                moved = [(next(n for n in c if c[n] != cfg[n]), c) for _, c in singles if sum(c[n] != cfg[n] for n in c) == 1]
                for (na, ca), (nb, cb) in __import__("itertools").combinations(moved, 2):
                    if na == nb:
                        continue
                    both = {**cfg, na: ca[na], nb: cb[nb]}
                    k = O.config_key(both)
                    if k not in visited and self._feasible(both):
                        cands[k] = both
                if cands:
                    return self._favourite(cands, measured, rng)
        return super()._step(climb, measured, visited, rng)


def plateau_pairs(seed):
    s = make_sampler("ordinal_global", seed)
    s.__class__ = PlateauPairs
    return s


class PlateauPairs20(PlateauPairs):
    after = 20


def plateau_pairs20(seed):
    s = make_sampler("ordinal_global", seed)
    s.__class__ = PlateauPairs20
    return s


class PlateauLandmarkClimb(O.OrdinalSampler):
    """On a plateau, a restart's phase is a climb from an unvisited landmark
    (the grid's centre, then the near corner), else from a far-apart point:
    the Parzen proposals would only re-draw the plateau."""

    marks = ("centre", "first")

    def _restart_draw(self, measured, visited, rng):
        state = self._climbs.read(measured)
        start = state["start"]
        if start > 0 and self._on_plateau(measured, state):
            phase = dict(__import__("itertools").islice(measured.items(), start, None))
            if not phase:
                for landmark in self.marks:
                    pick = O._PICK[landmark]
                    cfg = {
                        name: pick(values) if ordered else rng.choice(values) for name, (ordered, values) in self._order.items()
                    }
                    if O.config_key(cfg) not in visited and self._feasible(cfg):
                        return cfg
                return self._spread(visited, rng, with_landmarks=False)
            cfg = self._step(phase, measured, visited, rng)
            if cfg is not None:
                return cfg
        return super()._restart_draw(measured, visited, rng)


def plateau_landmark(seed):
    s = make_sampler("ordinal_global", seed)
    s.__class__ = PlateauLandmarkClimb
    return s
