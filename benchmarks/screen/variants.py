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
