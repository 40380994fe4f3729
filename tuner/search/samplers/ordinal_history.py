"""The ordinal sampler's reading of a study's history, kept between asks."""

from __future__ import annotations

from typing import Any, Callable, Sequence

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
        if study.study_name != self.study or len(trials) < self.length:
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
    one ask to the next: only what differs from the last ask's history is
    folded in. A trial of another worker that finished out of order lands
    among the last few positions: the fold rewinds to the state it had kept
    there (``KEPT`` positions back at most), else starts again. Either way
    the result is that of folding the whole history."""

    KEPT = 64

    def __init__(
        self, start: Callable[[], Any], fold: Callable[[Any, str, dict, float], None], copy: Callable[[Any], Any]
    ) -> None:
        self.start, self.fold, self.copy = start, fold, copy
        self.keys: list[str] = []
        self.values: list[float] = []
        self.state = start()
        self.kept: dict[int, Any] = {0: self.copy(self.state)}  # position -> the state after that many folds

    def read(self, measured: dict[str, tuple[dict, float]]):
        keys = list(measured)
        values = [value for _, value in measured.values()]
        done = self._agreed(keys, values)
        if done < len(self.keys):  # rewind
            back = max((p for p in self.kept if p <= done), default=None)
            if back is None:
                self.state, self.kept, back = self.start(), {}, 0
                self.kept[0] = self.copy(self.state)
            else:
                self.state = self.copy(self.kept[back])
            self.kept = {p: state for p, state in self.kept.items() if p <= back}
            done = back
        for position in range(done, len(keys)):
            self.fold(self.state, keys[position], measured[keys[position]][0], values[position])
            if position + 1 >= len(keys) - self.KEPT:  # only the states a rewind may want
                self.kept[position + 1] = self.copy(self.state)
        for old in [p for p in self.kept if p < len(keys) - self.KEPT]:
            del self.kept[old]
        self.keys, self.values = keys, values
        return self.state

    def _agreed(self, keys: list[str], values: list[float]) -> int:
        """How many first positions this history shares with the last one."""
        done = min(len(self.keys), len(keys))
        if keys[:done] == self.keys[:done] and values[:done] == self.values[:done]:
            return done
        sure = max(0, done - self.KEPT)
        if keys[:sure] != self.keys[:sure] or values[:sure] != self.values[:sure]:
            return 0
        for position in range(sure, done):
            if keys[position] != self.keys[position] or values[position] != self.values[position]:
                return position
        return done


def climb_read(patience: int, progress: float, phase: int = 0, start_phase: int = 0) -> RunningRead:
    """Where the current climb starts (``state["start"]``, a position in trial
    order): a climb restarts once ``patience`` measurements in a row failed to
    beat its best by ``progress``. The first ``phase`` measurements after a
    restart, and the first ``start_phase`` of the study (until position
    ``state["until"]``), are the global phase's: they set the climb's best but
    are not counted against its patience."""

    def fold(state: dict, key: str, cfg: dict, value: float) -> None:
        if value > state["best"] * (1 + progress):
            state["best"], state["since"] = value, 0
        elif state["seen"] >= state["until"]:
            state["since"] += 1
        state["seen"] += 1
        state["top"] = max(state["top"], value)
        if patience and state["since"] >= patience:
            # A climb that began at a restart (not the study's first) and left the study's best where it was
            # when it began (within progress) found nothing.
            stalled = state["start"] > 0 and state["top"] <= state["top_before"] * (1 + progress)
            state.update(start=state["seen"], best=0.0, since=0, until=state["seen"] + phase, stalled=stalled,
                         top_before=state["top"])  # fmt: skip

    # state["stalled"]: whether the climb before the current one began at a restart and found nothing
    # better than the study's best when it began (state["top_before"] is the study's best when the current
    # climb began, state["top"] the best so far).
    return RunningRead(lambda: {"start": 0, "best": 0.0, "since": 0, "seen": 0, "until": start_phase, "top": 0.0,
                                "top_before": 0.0, "stalled": False}, fold, dict)  # fmt: skip


def sums_read(width: int, columns_of: Callable[[str], np.ndarray]) -> RunningRead:
    """X'X, X'y and X'1 of the one-hot model on log bandwidth, one row added
    per measurement in trial order, as ``ordinal_grid.one_hot_sums`` adds them."""

    def fold(sums: tuple, key: str, cfg: dict, value: float) -> None:
        gram, moment, ones = sums
        columns = columns_of(key)
        gram[np.ix_(columns, columns)] += 1.0
        moment[columns] += np.log(np.array([value]))[
            0
        ]  # numpy's array log, as one_hot_sums takes it: its scalar log may differ in the last bit
        ones[columns] += 1.0

    return RunningRead(
        lambda: (np.zeros((width, width)), np.zeros(width), np.zeros(width)), fold, lambda sums: tuple(a.copy() for a in sums)
    )
