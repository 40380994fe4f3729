"""Warm start: seed a study with what earlier results of the same family
already know (another GPU, another size, an earlier run).

Measured spaces correlate strongly across GPUs (the H100's and H200's
reduction spaces rank configurations alike), so the best configurations of
an earlier table are the first ones worth measuring here. ``warm_start``
turns a results table into the configurations to enqueue (its best ones,
within the study's space and feasible for its problem) and the prior rows
an ``OrdinalSampler`` fits its model on. Trials of enqueued warm-start
configurations carry the user attribute ``warm_start`` (the table's path):
``study_start`` names them to ``run_study``'s ``warm_start``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping, Sequence

import optuna
import pandas as pd

from tuner.data.results import config_key, plain_value, read
from tuner.families.base import Family, Problem

TOP = 5  # configurations enqueued from the earlier table


def warm_start_problem(path: str | os.PathLike) -> str | None:
    """Why ``path`` cannot seed a study (missing, or no Parquet in it), or None."""
    path = Path(path)
    if not path.exists():
        return f"must name a results folder or Parquet file that exists, got {str(path)!r}"
    if path.is_dir() and not any(path.rglob("*.parquet")):
        return f"must name a folder that holds Parquet results, got {str(path)!r} with none"
    if path.is_file() and path.suffix != ".parquet":
        return f"must name a .parquet file or a results folder, got {str(path)!r}"
    return None


def warm_start(
    table: pd.DataFrame, family: Family, problem: Problem, domains: Mapping[str, Sequence], top: int = TOP
) -> tuple[list[dict], list[tuple[dict, float]]]:
    """(configurations to enqueue, prior (configuration, GB/s) rows) from ``table``.

    Rows of ``family`` measured ok count; those of ``problem``'s element type
    and size are preferred where the table has them. A configuration must lie
    within ``domains`` (a parameter the table lacks takes the domain's only
    value, or the family default) and be feasible for ``problem``; one
    measured several times keeps its mean. The best ``top`` are enqueued,
    best first; every one is a prior row.
    """
    rows = table
    if "family" in rows:
        rows = rows[rows["family"] == family.name]
    if "status" in rows:
        rows = rows[rows["status"] == "ok"]
    rows = rows[rows["bandwidth_gbs"].notna()] if "bandwidth_gbs" in rows else rows.iloc[0:0]
    for column, value in (("dtype", problem.dtype), ("n", problem.n)):
        if column in rows and (rows[column] == value).any():
            rows = rows[rows[column] == value]
    sums: dict[str, list] = {}
    for record in rows.to_dict("records"):
        cfg = _within(record, family, domains)
        if cfg is None or family.violations(cfg, problem):
            continue
        entry = sums.setdefault(config_key(cfg), [cfg, 0.0, 0])
        entry[1] += float(record["bandwidth_gbs"])
        entry[2] += 1
    prior = sorted(((cfg, total / count) for cfg, total, count in sums.values()), key=lambda item: -item[1])
    return [dict(cfg) for cfg, _ in prior[:top]], prior


def load_warm_start(path: str | os.PathLike, family: Family, problem: Problem, domains: Mapping[str, Sequence], top: int = TOP):
    """``warm_start`` of the results at ``path`` (a Parquet file or a folder of them).

    Raises:
        ValueError: ``path`` cannot seed a study, or holds no usable row.
    """
    problem_text = warm_start_problem(path)
    if problem_text:
        raise ValueError(f"warm_start {problem_text}")
    enqueue, prior = warm_start(read(path), family, problem, domains, top)
    if not enqueue:
        raise ValueError(f"warm_start must hold ok {family.name} rows within the study's space, got none in {str(path)!r}")
    return enqueue, prior


def marks(enqueue: Sequence[Mapping], source: str | os.PathLike) -> dict[str, str]:
    """``config_key`` -> ``source`` of a warm start's enqueued configurations
    (``run_study``'s ``warm_start``: their trials carry the user attribute
    ``warm_start``)."""
    return {config_key(dict(cfg)): str(source) for cfg in enqueue}


def _within(record: Mapping, family: Family, domains: Mapping[str, Sequence]) -> dict | None:
    cfg = {}
    for param in family.params:
        values = [plain_value(v) for v in domains.get(param.name, param.values)]
        value = plain_value(record.get(param.name))
        if value is None:
            value = values[0] if len(values) == 1 else param.default
        if value not in values:
            return None
        cfg[param.name] = value
    return cfg


def study_start(settings, family: Family, seed: int) -> tuple[list[dict], str | optuna.samplers.BaseSampler, dict[str, str]]:
    """A study's (enqueue, sampler, warm-start marks) from its
    ``StudySettings``: with a ``warm_start``, the table's best configurations
    after the study's own enqueued ones, its sampler made with the prior
    rows, and the marks of the table's configurations (``marks``)."""
    enqueue = [dict(e) for e in settings.enqueue]
    if not settings.warm_start:
        return enqueue, settings.sampler, {}
    from tuner.search.samplers import make_sampler

    warm, prior = load_warm_start(settings.warm_start, family, settings.problem, settings.domains())
    return enqueue + warm, make_sampler(settings.sampler, seed, prior=prior), marks(warm, settings.warm_start)
