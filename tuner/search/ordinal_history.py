"""The ordinal sampler's reading of a study's history, kept between asks."""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
import optuna
from optuna.trial import FrozenTrial


class FinishedPrefix:
    """The history's leading run of finished trials, kept between asks: a
    finished trial never changes, so each ask reads only the trials after it
    (the one being measured, those of other workers still running, and what
    finished since), not the whole study again."""

    def __init__(self) -> None:
        self.study: str | None = None
        self.length = 0  # trials[:length] are finished and counted below
        self.measured: dict[str, tuple[dict, float]] = {}  # in trial order, as reading every trial gives it
        self.visited: set[str] = set()

    def advance(self, study: optuna.Study, trials: Sequence[FrozenTrial], seen: Callable) -> FinishedPrefix:
        """Take in the finished trials that now follow the prefix (``trials``
        in number order; ``seen(trial)`` is (key, configuration, bandwidth or
        None), or None for a trial without this space's parameters)."""
        if study.study_name != self.study:
            self.__init__()
            self.study = study.study_name
        while self.length < len(trials) and trials[self.length].state.is_finished():
            found = seen(trials[self.length])
            if found is not None:
                key, cfg, value = found
                self.visited.add(key)
                if value is not None:
                    self.measured[key] = (cfg, value)
            self.length += 1
        return self


class RunningRead:
    """A fold over the measured configurations in trial order, carried from
    one ask to the next: when this ask's history extends the last one's
    (the same keys and values first), only the new ones are folded in; when
    it does not (a trial of another worker finished out of order), the fold
    starts again. Either way the result is that of folding the whole history."""

    def __init__(self, start: Callable[[], object], fold: Callable[[object, str, dict, float], None]) -> None:
        self.start, self.fold = start, fold
        self.keys: list[str] = []
        self.values: list[float] = []
        self.state = start()

    def read(self, measured: dict[str, tuple[dict, float]]):
        keys = list(measured)
        values = [value for _, value in measured.values()]
        done = len(self.keys)
        if keys[:done] != self.keys or values[:done] != self.values:
            self.state, done = self.start(), 0
        for key, value in zip(keys[done:], values[done:]):
            self.fold(self.state, key, measured[key][0], value)
        self.keys, self.values = keys, values
        return self.state


def climb_read(patience: int, progress: float) -> RunningRead:
    """Where the current climb starts (``state["start"]``, a position in trial
    order): a climb restarts once ``patience`` measurements in a row failed to
    beat its best by ``progress``."""

    def fold(state: dict, key: str, cfg: dict, value: float) -> None:
        if value > state["best"] * (1 + progress):
            state["best"], state["since"] = value, 0
        else:
            state["since"] += 1
        state["seen"] += 1
        if patience and state["since"] >= patience:
            state.update(start=state["seen"], best=0.0, since=0)

    return RunningRead(lambda: {"start": 0, "best": 0.0, "since": 0, "seen": 0}, fold)


def sums_read(width: int, columns_of: Callable[[str], np.ndarray]) -> RunningRead:
    """X'X, X'y and X'1 of the one-hot model on log bandwidth, one row added
    per measurement in trial order, as ``ordinal_grid.one_hot_sums`` adds them."""

    def fold(sums: tuple, key: str, cfg: dict, value: float) -> None:
        gram, moment, ones = sums
        columns = columns_of(key)
        gram[np.ix_(columns, columns)] += 1.0
        moment[columns] += np.log(np.array([value]))[0]
        ones[columns] += 1.0

    return RunningRead(lambda: (np.zeros((width, width)), np.zeros(width), np.zeros(width)), fold)
