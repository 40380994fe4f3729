"""Load and check config.yaml before any work starts.

The JSON schema (workflow/schemas/config.schema.yaml) checks the structure;
``check`` then applies the rules the schema cannot state (known families, each
parameter's rule, feasible grids). Every error names the key, the rule and the
value, e.g.::

    sweeps.reduce_block_unroll.params.block_size: block_size must be a multiple of 32 from 32 to 1024, got 100
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import yaml

from tuner.families import REGISTRY, Problem
from tuner.timing import TimingOptions

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"


class ConfigError(ValueError):
    """A configuration value breaks a rule; the message names key, rule and value."""


def load(path: str | Path) -> dict:
    with open(path) as handle:
        config = yaml.safe_load(handle) or {}
    validate(config)
    return config


def validate(config: dict) -> None:
    """Schema first, then the rules between values. Raises ConfigError."""
    import jsonschema

    schema = yaml.safe_load(SCHEMA.read_text())
    errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(config), key=lambda e: list(e.path))
    if errors:
        first = errors[0]
        key = ".".join(map(str, first.path)) or "(top level)"
        raise ConfigError(f"{key}: {first.message}")
    check(config)


def check(config: dict) -> None:
    for name, sweep in config.get("sweeps", {}).items():
        where = f"sweeps.{name}"
        family = _family(sweep["family"], f"{where}.family")
        _check_dtypes(family, sweep["dtypes"], f"{where}.dtypes")
        _check_params(family, sweep.get("params", {}), f"{where}.params")
        timing_options({**config.get("timing", {}), **sweep.get("timing", {})}, f"{where}.timing")
        problems = [Problem(family.name, d, n) for d in sweep["dtypes"] for n in sweep["sizes"]]
        if not any(family.space(p, sweep.get("params", {})) for p in problems):
            raise ConfigError(f"{where}: the grid must hold at least one feasible configuration, got none")
    for name, study in config.get("studies", {}).items():
        where = f"studies.{name}"
        family = _family(study["family"], f"{where}.family")
        _check_dtypes(family, [study["dtype"]], f"{where}.dtype")
        _check_params(family, study.get("params", {}), f"{where}.params")
        for i, point in enumerate(study.get("enqueue", [])):
            _check_params(family, {k: [v] for k, v in point.items()}, f"{where}.enqueue[{i}]")
        if "budget_trials" in study and "budget_fraction" in study:
            raise ConfigError(f"{where}: give budget_trials or budget_fraction, not both")
        target = study.get("compare_with_sweep")
        if target is not None and target not in config.get("sweeps", {}):
            raise ConfigError(f"{where}.compare_with_sweep: must name a sweep in sweeps, got {target!r}")
    timing_options(config.get("timing", {}), "timing")


def timing_options(values: dict, where: str = "timing") -> TimingOptions:
    known = {f.name for f in fields(TimingOptions)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ConfigError(f"{where}: keys must be among {sorted(known)}, got {unknown}")
    try:
        return TimingOptions(**values)
    except ValueError as error:
        raise ConfigError(f"{where}: {error}") from None


def _family(name: str, where: str):
    try:
        return REGISTRY[name]
    except KeyError:
        raise ConfigError(f"{where}: family must be one of {REGISTRY.names()}, got {name!r}") from None


def _check_dtypes(family, dtypes: list[str], where: str) -> None:
    for dtype in dtypes:
        if dtype not in family.dtypes:
            raise ConfigError(f"{where}: dtype must be one of {list(family.dtypes)} for family {family.name}, got {dtype!r}")


def _check_params(family, params: dict[str, list[Any]], where: str) -> None:
    for name, values in params.items():
        if name not in family.param_names:
            raise ConfigError(
                f"{where}: parameter must be one of {list(family.param_names)} for family {family.name}, got {name!r}"
            )
        param = family.param(name)
        for value in values:
            if not param.accepts(value):
                raise ConfigError(f"{where}.{name}: {name} must be {param.rule_description()}, got {value!r}")


@dataclass(frozen=True)
class StudySettings:
    name: str
    family: str
    problem: Problem
    sampler: str
    seed: int
    budget_trials: int
    timeout_s: float | None
    storage: str
    params: dict
    enqueue: list


def study_settings(config: dict, name: str, results_dir: Path) -> StudySettings:
    """A study's settings with defaults filled in; the budget in trials comes
    from budget_trials, or budget_fraction of the feasible space (default 10 %)."""
    study = config["studies"][name]
    family = REGISTRY[study["family"]]
    problem = Problem(family.name, study["dtype"], study["n"])
    params = study.get("params") or None
    space_size = len(family.space(problem, params))
    budget = study.get("budget_trials") or max(1, round(study.get("budget_fraction", 0.1) * space_size))
    storage = study.get("storage", "default")
    if storage == "default":
        storage = f"sqlite:///{(results_dir / 'optuna.db').resolve()}"
    return StudySettings(name, family.name, problem, study.get("sampler", "tpe"), study.get("seed", config.get("seed", 0)),
                         budget, study.get("timeout_s"), storage, params or {}, study.get("enqueue", []))  # fmt: skip
