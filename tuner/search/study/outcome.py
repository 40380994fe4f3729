"""What one study run did: its counts, and where its host-side time went."""

from __future__ import annotations

from dataclasses import dataclass, field

import optuna
from optuna.storages import BaseStorage


@dataclass
class StudyOutcome:
    """What one ``run_study`` call did.

    Attributes:
        study: the study in the storage, as the dashboard shows it: one
            finished trial per measured configuration, earlier runs included.
        storage: the study's storage, where its claims are found
            (``study_rows(outcome.storage, outcome.study.study_name)``).
        rows: results rows measured by this call, in trial order.
        best: the best ``ok`` row of the whole study (earlier runs included),
            or None when nothing has measured ok.
        measured: configurations measured by this call (ok and failed).
        infeasible: proposals of infeasible configurations passed over in
            this call (no trial, no measurement).
        duplicate: proposals of configurations already claimed or measured
            passed over in this call (no trial, no measurement).
        rescued: measured configurations this call chose itself (near the
            sampler's proposal, or at random) because the sampler was stuck.
        failed: measured configurations whose status was not ``ok`` (a subset
            of ``measured``), exceptions raised by ``measure`` included.
        lost: asks of this call that measured nothing: nothing could be
            claimed (another worker took the last of the budget, or no
            unclaimed configuration was found), the claim was asked ahead
            and released when the search stopped, or it was taken over while
            measuring.
        recovered: claims of dead workers this call settled: released
            (unmeasured) or finished from their recorded rows.
        total_measured: distinct configurations measured in the whole study.
        stop_reason: budget | timeout | exhausted | stalled | ask_limit.
    """

    study: optuna.Study
    storage: BaseStorage | None = None
    rows: list[dict] = field(default_factory=list)
    best: dict | None = None
    measured: int = 0
    infeasible: int = 0
    duplicate: int = 0
    rescued: int = 0
    failed: int = 0
    lost: int = 0
    recovered: int = 0
    total_measured: int = 0
    stop_reason: str = ""
    asks: int = 0  # trials asked for (by this worker)
    asks_s: float = 0.0  # wall seconds in asks (sampler, storage, claim), in the ask thread
    asks_cpu_s: float = 0.0  # of which CPU time of that thread
    ask_waits_s: float = 0.0  # seconds the search loop waited for an ask ahead

    def ask_summary(self) -> str:
        """Where the host-side cost of choosing went: one line."""
        each = 1e3 / max(self.asks, 1)
        return (f"asks: {self.asks}, {self.asks_s * each:.2f} ms each ({self.asks_cpu_s * each:.2f} ms CPU), "
                f"the search loop waited {self.ask_waits_s:.2f} s for them")  # fmt: skip
