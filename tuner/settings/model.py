"""Typed, immutable settings: the run's, each sweep's and each study's, and
the JSON each stage is handed (``Settings.stage_json``)."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping, Sequence

from tuner.data.paths import GpuFolder, cubin_cache
from tuner.errors import Refusal
from tuner.families import REGISTRY, Problem, load_family_paths
from tuner.measure.timing import TimingOptions


class ConfigError(Refusal, ValueError):
    """A configuration value breaks a rule; the message names key, rule and value."""

    label = "config error"
    exit_status = 2


def frozen_params(params: Mapping[str, Any]) -> Mapping[str, tuple]:
    return MappingProxyType({name: tuple(values) for name, values in params.items()})


@dataclass(frozen=True)
class RunSettings:
    """What every measuring stage shares."""

    results_dir: str
    gpu: str  # the results folder's name; never 'auto' once parsed
    device_index: int = 0
    arch: str = "auto"
    seed: int = 0
    compile_jobs: int = 0
    study_gpus: tuple[int, ...] = ()
    timing: TimingOptions = TimingOptions()
    family_paths: tuple[str, ...] = ()  # absolute paths of the Python files declaring plug-in families

    @property
    def gpu_dir(self) -> Path:
        return self.folder.path

    @property
    def folder(self) -> GpuFolder:
        """This GPU's results folder and where each of its files lies."""
        return GpuFolder(Path(self.results_dir) / self.gpu)

    @property
    def cubin_cache(self) -> Path:
        return cubin_cache(self.results_dir)

    def to_dict(self, keep: tuple[str, ...] | None = None) -> dict:
        data = {
            **asdict(self),
            "timing": asdict(self.timing),
            "study_gpus": list(self.study_gpus),
            "family_paths": list(self.family_paths),
        }
        return data if keep is None else {k: v for k, v in data.items() if k in keep}

    @classmethod
    def from_dict(cls, data: Mapping) -> "RunSettings":
        data = dict(data)
        if "timing" in data:
            data["timing"] = TimingOptions(**data["timing"])
        if "study_gpus" in data:
            data["study_gpus"] = tuple(data["study_gpus"])
        data["family_paths"] = tuple(data.get("family_paths", ()))
        load_family_paths(data["family_paths"])
        return cls(**data)


# What each stage is handed of the run settings: only what changes its
# outputs, so that Snakemake reruns a stage when, and only when, those change.
_PLACE = ("results_dir", "gpu", "device_index", "family_paths")
STAGE_RUN_FIELDS = {
    "describe": _PLACE,
    "compile": (*_PLACE, "arch", "compile_jobs"),
    "peaks": (*_PLACE, "arch", "seed", "timing"),
    "sweep": (*_PLACE, "arch", "seed", "compile_jobs"),
    "study": (*_PLACE, "arch", "seed", "study_gpus", "compile_jobs"),
    "profile": (*_PLACE, "arch", "seed"),
    "best": _PLACE,
}


@dataclass(frozen=True)
class SweepSettings:
    """An exhaustive grid: every feasible combination of ``params`` for every
    dtype and size."""

    name: str
    family: str
    dtypes: tuple[str, ...]
    sizes: tuple[int, ...]
    params: Mapping[str, tuple]
    timing: TimingOptions
    # None; "all"; "report": the configurations the report's blog comparisons show,
    # and each problem's fastest; or N: the N fastest configurations per problem
    profile: str | int | None = None
    # Energy (tuner/measure/energy.py): "all" verified configurations, the
    # "best" (fastest) of each problem after the sweep, or "off"
    energy: str = "best"

    def problems(self) -> list[Problem]:
        return [Problem(self.family, dtype, n) for dtype in self.dtypes for n in self.sizes]

    def domains(self) -> dict[str, list]:
        return {name: list(values) for name, values in self.params.items()}

    def to_dict(self) -> dict:
        return {"name": self.name, "family": self.family, "dtypes": list(self.dtypes), "sizes": list(self.sizes),
                "params": self.domains(), "timing": asdict(self.timing), "energy": self.energy}  # fmt: skip

    @classmethod
    def from_dict(cls, data: Mapping) -> "SweepSettings":
        return cls(data["name"], data["family"], tuple(data["dtypes"]), tuple(data["sizes"]),
                   frozen_params(data["params"]), TimingOptions(**data["timing"]), energy=data.get("energy", "best"))  # fmt: skip


@dataclass(frozen=True)
class StudySettings:
    """An Optuna search of one problem; ``budget_trials`` is resolved (from
    ``budget_fraction`` of the feasible space where that was given), and
    ``storage`` is an Optuna URL or a journal path."""

    name: str
    family: str
    dtype: str
    n: int
    sampler: str
    seed: int
    budget_trials: int
    timeout_s: float | None
    storage: str = field(repr=False)  # a URL may hold a password
    params: Mapping[str, tuple]
    enqueue: tuple[Mapping, ...]
    compare_with_sweep: str | None
    timing: TimingOptions
    space_size: int = 0
    warm_start: str | None = None  # results whose best configurations are enqueued first (tuner.search.study.warm)
    compile_ahead: bool = True  # compile modules in background threads while the GPU measures (tuner.measure.precompile)
    energy: bool = False  # every trial's row also gets its energy (tuner/measure/energy.py): about 0.7 s a trial

    @property
    def problem(self) -> Problem:
        return Problem(self.family, self.dtype, self.n)

    def domains(self) -> dict[str, list]:
        """Every parameter's searched values (the family's own where not listed)."""
        family = REGISTRY[self.family]
        return {p.name: list(self.params.get(p.name, p.values)) for p in family.params}

    def storage_name(self, gpu: str) -> str:
        """The study's name in its storage. It carries the problem and a digest
        of the searched space, so a study whose dtype, n or values change is a
        new study rather than the old one's rows."""
        digest = hashlib.sha256(json.dumps(self.domains(), sort_keys=True).encode()).hexdigest()[:8]
        return f"{gpu}/{self.name}/{self.dtype}-n{self.n}-{digest}"

    def to_dict(self) -> dict:
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        return {**data, "params": {k: list(v) for k, v in self.params.items()}, "enqueue": [dict(e) for e in self.enqueue],
                "timing": asdict(self.timing)}  # fmt: skip

    @classmethod
    def from_dict(cls, data: Mapping) -> "StudySettings":
        return cls(**{**data, "params": frozen_params(data["params"]), "enqueue": tuple(MappingProxyType(dict(e)) for e in data["enqueue"]),
                      "timing": TimingOptions(**data["timing"])})  # fmt: skip


def _compiled_part(study: StudySettings) -> StudySettings:
    """What the compile stage reads of a study: its problem, searched values
    and budget (the rest blank)."""
    return StudySettings(study.name, study.family, study.dtype, study.n, sampler="", seed=0, budget_trials=study.budget_trials,
                         timeout_s=None, storage="", params=study.params, enqueue=(), compare_with_sweep=None,
                         timing=TimingOptions())  # fmt: skip


@dataclass(frozen=True)
class Settings:
    run: RunSettings
    sweeps: Mapping[str, SweepSettings] = field(default_factory=dict)
    studies: Mapping[str, StudySettings] = field(default_factory=dict)

    def sweep(self, name: str) -> SweepSettings:
        if name not in self.sweeps:
            raise ConfigError(f"sweep name: must be one of {list(self.sweeps)}, got {name!r}")
        return self.sweeps[name]

    def study(self, name: str) -> StudySettings:
        if name not in self.studies:
            raise ConfigError(f"study name: must be one of {list(self.studies)}, got {name!r}")
        return self.studies[name]

    def variants(self):
        """(family, problem, feasible configurations) of every sweep's grid. A
        study's space is not listed here: what a study compiles grows with its
        budget (``tuner.measure.compile.study_compiled_whole``)."""
        for sweep in self.sweeps.values():
            family = REGISTRY[sweep.family]
            for problem in sweep.problems():
                yield family, problem, family.space(problem, sweep.domains())

    def stage_json(self, stage: str, name: str | Sequence[str] | None = None) -> str:
        """The JSON a stage receives (``from_stage_json`` reads it back): the
        run settings it needs (``STAGE_RUN_FIELDS``) and, for a sweep or a
        study, that one section; the profile stage gets the sections of the
        sweeps ``name`` lists; the compile stage gets every section's grid."""
        data: dict[str, Any] = {"run": self.run.to_dict(STAGE_RUN_FIELDS[stage])}
        if stage == "sweep":
            data["sweep"] = self.sweep(name).to_dict()
        elif stage == "profile":  # every profiled sweep (one ncu run for all), each with what to profile:
            # kept out of the sweep's own JSON, so choosing what to profile never reruns a sweep
            names = [name] if isinstance(name, str) else list(name)
            data["profiled"] = [{"sweep": self.sweep(n).to_dict(), "profile": self.sweep(n).profile} for n in names]
        elif stage == "study":
            from tuner.search.study.storage_server import public

            # The password stays off the command line (Snakemake prints a failed
            # job's command); the stage finds it in the environment (export_passwords).
            data["study"] = {**self.study(name).to_dict(), "storage": public(self.study(name).storage)}
        elif stage == "compile":
            # Only the grids it compiles, so a sweep's timing or a study's
            # sampler do not rerun the compile stage. A study's part is its
            # problem, its searched values and its budget: the stage compiles
            # its space whole only where it is small beside the budget.
            grids = [(s.name, s.family, s.dtypes, s.sizes, s.domains()) for s in self.sweeps.values()]
            data["sweeps"] = [SweepSettings(name, family, dtypes, sizes, frozen_params(params), TimingOptions()).to_dict()
                              for name, family, dtypes, sizes, params in grids]  # fmt: skip
            data["studies"] = [_compiled_part(s).to_dict() for s in self.studies.values()]
        # Snakemake fills "{name}" in a rule's params with a wildcard's value: a brace
        # inside a string (a storage path x{y}.log) is written as a JSON escape instead.
        # An object's own brace is always followed by '"' or '}', which no wildcard is.
        return re.sub(r'\{(?=[^"}])', r"\\u007b", json.dumps(data, sort_keys=True))

    @classmethod
    def from_stage_json(cls, text: str) -> "Settings":
        data = json.loads(text)
        sweeps = [SweepSettings.from_dict(s) for s in data.get("sweeps", [])]
        studies = [StudySettings.from_dict(s) for s in data.get("studies", [])]
        if "sweep" in data:
            sweeps.append(SweepSettings.from_dict(data["sweep"]))
        sweeps += [replace(SweepSettings.from_dict(p["sweep"]), profile=p["profile"]) for p in data.get("profiled", [])]
        if "study" in data:
            studies.append(StudySettings.from_dict(data["study"]))
        return cls(RunSettings.from_dict(data["run"]), MappingProxyType({s.name: s for s in sweeps}),
                   MappingProxyType({s.name: s for s in studies}))  # fmt: skip
