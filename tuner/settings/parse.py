"""Checking a config: the JSON schema's structure as one-line errors, then
the rules between values, against the machine's devices and nvcc where they
are known (the YAML file itself is read by ``tuner.settings.yaml_file``)."""

from __future__ import annotations

import functools
import math
import os
import re
from dataclasses import fields
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping

import yaml

from tuner.data.paths import GPU_FOLDER_NAMES, RESULTS_FOLDER_NAMES
from tuner.device.describe import DeviceFacts
from tuner.families import REGISTRY, Problem, load_family_paths
from tuner.families.base import MAX_ENUMERATED, nvcc_text_unfit
from tuner.measure.timing import TimingOptions
from tuner.resources import config_schema_file, reference_results, resource_missing
from tuner.settings.model import ConfigError, RunSettings, Settings, StudySettings, SweepSettings, frozen_params
from tuner.settings.yaml_file import read_yaml

SCHEMA = config_schema_file()


@functools.cache
def config_schema() -> dict:
    """The config's JSON schema, read once per process with libyaml's parser
    where PyYAML has it (the pure-Python one takes a good part of a second for
    this file, paid at every Snakemake start), with a study's ``sampler`` enum
    filled from the strategy registry (``tuner.search.samplers.registry``).
    Shared: do not modify."""
    missing = resource_missing(SCHEMA)
    if missing:
        raise ConfigError(missing)
    schema = yaml.load(SCHEMA.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # noqa: S506 - a safe loader
    # The timing block is TimingOptions' own (its fields, types, defaults and bounds), not a copy kept in step by hand.
    schema["$defs"]["timing"] = TimingOptions.json_schema()
    # A study's strategies are the registry's (it imports no Optuna): a new one needs no schema edit.
    from tuner.search.samplers.registry import SAMPLERS

    schema["properties"]["studies"]["additionalProperties"]["properties"]["sampler"]["enum"] = list(SAMPLERS)
    return schema

# Without a device to ask, sizes are judged against this much device memory.
ASSUMED_DEVICE_BYTES = 192 << 30
# Share of device memory a problem's buffers may take (the L2 flush buffer,
# the context and the CUB workspace need the rest).
USABLE_MEMORY = 0.9


# ---- parsing -------------------------------------------------------------------


def load(path: str | Path, **checks) -> Settings:
    """``parse`` of a YAML file (``checks``: parse's keyword arguments); its
    ``family_paths`` are relative to the file's folder."""
    return parse(read_yaml(path), base_dir=Path(path).resolve().parent, **checks)


def parse(config: Mapping, *, device: DeviceFacts | None = None, nvcc_archs: tuple[str, ...] | None = None,
          storage_check=None, base_dir: str | Path | None = None) -> Settings:  # fmt: skip
    """Check ``config`` and return its settings. Raises ConfigError (one line).

    Args:
        device: the CUDA devices, to check ``device_index``, ``arch`` and sizes
            against (None: not checked against a device; sizes against
            ``ASSUMED_DEVICE_BYTES``).
        nvcc_archs: the architectures nvcc can build (None: not checked).
        storage_check: ``(spec, workers) -> problem text or None`` for study
            storages (None: only the form is checked).
        base_dir: the folder relative ``family_paths`` are taken from: the
            config file's (None: the working directory).
    """
    _check_finite(config)
    check_schema(config)
    base = Path(base_dir) if base_dir is not None else Path.cwd()
    family_paths = tuple(str((base / p).resolve()) for p in config.get("family_paths", []))
    try:
        loaded = load_family_paths(family_paths)
    except ValueError as error:  # a plug-in that does not import, or breaks a family's rules, is the user's config error
        raise ConfigError(str(error)) from None
    if loaded:
        # Here, not at the top: a measuring process reads its settings too, and never needs pandas.
        from tuner.data.results import family_columns_unfit
    for name in loaded:  # a parameter is a column of the results: one named as another is refused here
        unfit = family_columns_unfit(REGISTRY[name])
        if unfit:
            raise ConfigError(f"family_paths: {unfit}")
    device = device or DeviceFacts()
    index = config.get("device_index", 0)
    if device.count is not None and not index < device.count:
        raise ConfigError(f"device_index: must be the index of one of this machine's {device.count} CUDA devices "
                          f"(0 to {device.count - 1}), got {index}")  # fmt: skip
    for i, gpu_index in enumerate(config.get("study_gpus", [])):
        if device.count is not None and not gpu_index < device.count:
            raise ConfigError(
                f"study_gpus[{i}]: must be the index of one of this machine's {device.count} CUDA devices, got {gpu_index}"
            )
    arch = check_arch(config.get("arch", "auto"), capability=device.capability_of(index), nvcc_archs=nvcc_archs)
    gpu = config.get("gpu", "auto")
    if gpu == "auto":
        from tuner.device.describe import NO_GPU_SLUG, slugify

        gpu = slugify(device.names[index]) if index < len(device.names) else NO_GPU_SLUG
    results_dir = _check_results_dir(config["results_dir"], gpu, config.get("allow_reference_results", False))
    if not config.get("allow_other_files_in_results_dir", False):
        _check_results_folder(results_dir)
    timing = timing_options(config.get("timing", {}), "timing")
    run = RunSettings(results_dir=results_dir, gpu=gpu, device_index=index, arch=arch,
                      seed=config.get("seed", 0), compile_jobs=config.get("compile_jobs", 0),
                      study_gpus=tuple(config.get("study_gpus", [])), timing=timing, family_paths=family_paths)  # fmt: skip
    memory = device.memory_of(index)
    sweeps = {name: _sweep(name, section, config, memory) for name, section in config.get("sweeps", {}).items()}
    studies = {}
    for name, section in config.get("studies", {}).items():
        study = _study(name, section, config, run, memory)
        target = study.compare_with_sweep
        if target is not None and target not in sweeps:
            raise ConfigError(
                f"studies.{name}.compare_with_sweep: must name a sweep of this config {list(sweeps)}, got {target!r}"
            )
        if target is not None and study.problem not in sweeps[target].problems():
            swept = ", ".join(p.key for p in sweeps[target].problems())
            raise ConfigError(f"studies.{name}.compare_with_sweep: must name a sweep of the study's problem "
                              f"{study.problem.key}, got {target!r}, which sweeps {swept}")  # fmt: skip
        workers = max(1, len(run.study_gpus))
        problem = storage_check(study.storage, workers) if storage_check else None
        if problem:
            raise ConfigError(f"studies.{name}.storage: {problem}")
        if _in_memory_sqlite(study.storage):
            raise ConfigError(f"studies.{name}.storage: must keep the study where the tune stage's worker and the stage "
                              f"itself both read it, got {study.storage!r}, an in-memory SQLite database that vanishes with "
                              f"its process (give sqlite:///path.db or a journal file)")  # fmt: skip
        studies[name] = study
    return Settings(run, MappingProxyType(sweeps), MappingProxyType(studies))


def _check_finite(value: Any, path: tuple = ()) -> None:
    """NaN and infinity compare false with every bound, so a schema's
    ``minimum`` lets them through (``timeout_s: .nan``); no setting means them."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"{_key(path)}: must be a finite number, got {value!r}")
    if isinstance(value, Mapping):
        for key, item in value.items():
            _check_finite(item, (*path, key))
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            _check_finite(item, (*path, i))


def check_schema(config: Mapping) -> None:
    """The structure, as one line per the first error (jsonschema's own
    message is a multi-line dump)."""
    import jsonschema

    schema = config_schema()
    # JSON Schema counts 4.0 as an integer; here a float where an integer is
    # meant is a mistake (it would reach nvcc as -DVEC=4.0), and so is a bool.
    strict = jsonschema.Draft202012Validator.TYPE_CHECKER.redefine(
        "integer", lambda checker, value: isinstance(value, int) and not isinstance(value, bool)
    )
    validator = jsonschema.validators.extend(jsonschema.Draft202012Validator, type_checker=strict)
    errors = sorted(validator(schema).iter_errors(config), key=lambda e: (len(e.path), list(map(str, e.path))))
    if errors:
        raise ConfigError(schema_message(errors[0]))


def _key(path) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(top level)"


def schema_message(error) -> str:
    """One line for a jsonschema error: key, rule, value."""
    key, value, rule = _key(error.absolute_path), error.instance, error.validator_value
    written = error.schema.get("x-rule")
    kind = error.validator
    if kind == "required":
        missing = [name for name in rule if name not in value]
        return f"{_key([*error.absolute_path, missing[0]])}: is required, got nothing"
    if kind == "additionalProperties":
        known = sorted(error.schema.get("properties", {}))
        extra = sorted(set(value) - set(known))
        return f"{key}: keys must be among {known}, got {extra}"
    if kind == "minLength":
        return f"{key}: must not be empty, got {value!r}"
    if written:
        return f"{key}: must be {written}, got {value!r}"
    if kind == "type":
        article = {"integer": "an integer", "array": "a list", "object": "a mapping", "string": "a string",
                   "number": "a number", "boolean": "true or false"}  # fmt: skip
        names = rule if isinstance(rule, list) else [rule]
        return f"{key}: must be {' or '.join(article.get(n, n) for n in names)}, got {value!r}"
    if kind == "enum":
        return f"{key}: must be one of {rule}, got {value!r}"
    bounds = {"minimum": ">=", "maximum": "<=", "exclusiveMinimum": ">", "exclusiveMaximum": "<"}
    if kind in bounds:
        return f"{key}: must be {bounds[kind]} {rule}, got {value!r}"
    if kind == "minItems":
        return f"{key}: must hold at least {rule} value(s), got {value!r}"
    if kind == "uniqueItems":
        return f"{key}: must not repeat a value, got {value!r}"
    if kind == "pattern":
        return f"{key}: must match {rule}, got {value!r}"
    return f"{key}: {error.message}"


def timing_options(values: Mapping, where: str = "timing") -> TimingOptions:
    known = {f.name for f in fields(TimingOptions)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ConfigError(f"{where}: keys must be among {sorted(known)}, got {unknown}")
    try:
        return TimingOptions(**values)
    except ValueError as error:
        # TimingOptions names its own field: "timing.max_samples must be ..."
        message = str(error)
        field_name = message.split(" ", 1)[0].removeprefix("timing.")
        raise ConfigError(f"{where}.{field_name}: {message.split(' ', 1)[1]}") from None


def check_arch(arch: str, *, where: str = "arch", capability: str | None = None, nvcc_archs: tuple[str, ...] | None = None) -> str:
    """``arch`` as the config's ``arch`` and the command line's ``--arch``
    take it: auto, or an ``sm_XY`` this nvcc builds that runs on the device
    of compute capability ``capability`` (None: not checked against a device).

    Raises:
        ConfigError: one line naming ``where``, the rule and the value.
    """
    form = config_schema()["properties"]["arch"]
    if not (isinstance(arch, str) and re.fullmatch(form["pattern"], arch)):
        raise ConfigError(f"{where}: must be {form['x-rule']}, got {arch!r}")
    if arch == "auto":
        return arch
    if nvcc_archs is not None and arch not in nvcc_archs:
        raise ConfigError(f"{where}: must be auto or an architecture this nvcc builds ({', '.join(nvcc_archs)}), got {arch!r}")
    if capability is not None:
        major, minor = capability.split(".")
        digits = arch.removeprefix("sm_").rstrip("a")
        # A cubin runs on devices of its major version with an equal or higher minor.
        if not (digits[:-1] == major and int(digits[-1]) <= int(minor)):
            raise ConfigError(f"{where}: must be auto or build code that runs on the device (compute capability {capability}:"
                              f" sm_{major}0 to sm_{major}{minor}), got {arch!r}")  # fmt: skip
    return arch


# The shipped reference results (a checkout's; an install has none): a run writing there would overwrite them.
REFERENCE_RESULTS = reference_results()
MAX_NAME_BYTES = 255  # of one path component, on the usual file systems


def _check_results_dir(results_dir: str, gpu: str, allow_reference: bool) -> str:
    """``results_dir`` as the rules and the workflow's paths use it
    (``results/`` and ``./results`` are ``results``, ``~`` the home folder), once checked: a folder,
    or where one can be made, with names a file system takes, and outside the
    reference results unless ``allow_reference_results`` says otherwise."""
    odd = re.search(r"[{}\x00-\x1f\x7f]", results_dir)
    if odd:  # Snakemake reads a brace in a rule's paths as a wildcard
        raise ConfigError(f"results_dir: must be a path without braces or control characters, got {results_dir[:80]!r} "
                          f"with {odd.group()!r}")  # fmt: skip
    if nvcc_text_unfit(results_dir):  # the cubin cache is under it, on nvcc's command line
        raise ConfigError(f"results_dir: {nvcc_text_unfit(results_dir)}")
    normal = os.path.normpath(os.path.expanduser(results_dir))  # ~/runs as a shell reads it, not a folder named ~
    path = Path(normal)
    for part in path.parts:
        if len(os.fsencode(part)) > MAX_NAME_BYTES:
            raise ConfigError(f"results_dir: must be a path whose folder names are at most {MAX_NAME_BYTES} bytes, "
                              f"got {results_dir[:80]!r}... with a name of {len(os.fsencode(part))} bytes")  # fmt: skip
    for parent in (path, *path.parents):
        if parent.exists() and not parent.is_dir():
            raise ConfigError(
                f"results_dir: must be a folder (or a path where one can be made), got {results_dir!r}, where {str(parent)!r} is a file"
            )
    if not allow_reference:
        gpu_dir = (path / gpu).resolve()
        for reference in {Path("results", "reference").resolve(), *([REFERENCE_RESULTS.resolve()] if REFERENCE_RESULTS else [])}:
            if gpu_dir == reference or reference in gpu_dir.parents:
                raise ConfigError(f"results_dir: must lie outside the shipped reference results {str(reference)!r} "
                                  f"(a run would overwrite them) unless allow_reference_results is true, got {results_dir!r}"
                                  f" with gpu {gpu!r}")  # fmt: skip
    return normal


MAX_RESULTS_ENTRIES = 1000  # entries of a results folder looked at


def _check_results_folder(results_dir: str) -> None:
    """A ``results_dir`` that exists must be empty or hold only what this
    pipeline writes there, so a run never mixes its files into a home folder
    or a source tree (``allow_other_files_in_results_dir`` lets it)."""
    path = Path(results_dir)
    if not path.is_dir():
        return
    try:
        with os.scandir(path) as entries:
            for count, entry in enumerate(entries):
                other = count >= MAX_RESULTS_ENTRIES or not _results_entry(entry)
                if other:
                    what = f"more than {MAX_RESULTS_ENTRIES} entries" if count >= MAX_RESULTS_ENTRIES else repr(entry.name)
                    raise ConfigError(f"results_dir: must be a new or empty folder, or one this pipeline wrote (a folder per GPU), "
                                      f"unless allow_other_files_in_results_dir is true, got {results_dir!r}, which holds {what}")  # fmt: skip
    except OSError as error:
        raise ConfigError(f"results_dir: must be a folder this user can read, got {results_dir!r} ({error.strerror})") from None


def _results_entry(entry: os.DirEntry) -> bool:
    if entry.name in RESULTS_FOLDER_NAMES:
        return True
    if not entry.is_dir(follow_symlinks=False):
        return False
    with os.scandir(entry.path) as inside:
        names = [e.name for _, e in zip(range(MAX_RESULTS_ENTRIES), inside)]
    return not names or any(name in GPU_FOLDER_NAMES for name in names)


def _in_memory_sqlite(storage: str) -> bool:
    if not storage.startswith("sqlite"):
        return False
    import sqlalchemy

    try:
        url = sqlalchemy.engine.make_url(storage)
    except Exception:  # noqa: BLE001 - a malformed URL is the storage check's to report
        return False
    database = url.database or ""
    return database in ("", ":memory:") or database.startswith("file::memory:") or url.query.get("mode") == "memory"


def _family(name: str, where: str):
    if name not in REGISTRY.names():
        raise ConfigError(f"{where}: must be one of {REGISTRY.names()}, got {name!r}")
    return REGISTRY[name]


def _check_dtype(family, dtype: str, where: str) -> None:
    if dtype not in family.dtypes:
        raise ConfigError(f"{where}: must be one of {list(family.dtypes)} for family {family.name}, got {dtype!r}")


def _check_size(family, dtype: str, n: int, where: str, memory: int | None) -> None:
    """n must fit the device's memory with the family's buffers."""
    per_element = family.device_bytes(Problem(family.name, dtype, 1))
    limit = family.max_size(dtype, int((memory or ASSUMED_DEVICE_BYTES) * USABLE_MEMORY))
    source = (
        f"{memory / 2**30:.0f} GiB of device memory" if memory else f"{ASSUMED_DEVICE_BYTES >> 30} GiB assumed without a device"
    )
    if not (isinstance(n, int) and 1 <= n <= limit):
        raise ConfigError(f"{where}: must be an integer from 1 to {limit} ({family.name} {dtype} needs about "
                          f"{per_element} bytes per element; {source}), got {n!r}")  # fmt: skip


def _check_params(family, params: Mapping[str, list], where: str) -> None:
    for name, values in params.items():
        if name not in family.param_names:
            raise ConfigError(
                f"{where}: parameter must be one of {list(family.param_names)} for family {family.name}, got {name!r}"
            )
        param = family.param(name)
        for i, value in enumerate(values):
            if not param.accepts(value):
                raise ConfigError(f"{where}.{name}[{i}]: must be {param.rule_description()}, got {value!r}")
            # A text value a plug-in's rule lets through becomes a -D define: nothing nvcc's shell would run.
            if isinstance(value, str) and nvcc_text_unfit(value, define=True):
                raise ConfigError(f"{where}.{name}[{i}]: {nvcc_text_unfit(value, define=True)}")


def _merged_timing(config: Mapping, section: Mapping, where: str) -> TimingOptions:
    timing_options(section.get("timing", {}), f"{where}.timing")  # names the section's own bad key
    return timing_options({**config.get("timing", {}), **section.get("timing", {})}, f"{where}.timing")


def _check_feasible_point(family, problem: Problem, point: dict, space: list[dict] | None, where: str) -> None:
    """An enqueued point must be, or complete to, a feasible configuration:
    one that is not is never measured (a complete one is checked however
    large the space; a partial one where the space could be listed)."""
    if set(point) == set(family.param_names):
        reasons = family.violations(point, problem)
        if reasons:
            raise ConfigError(f"{where}: must be a feasible configuration of {problem.key}, got {point} ({reasons[0]})")
    elif space is not None and not any(all(c[k] == v for k, v in point.items()) for c in space):
        raise ConfigError(f"{where}: must complete to a feasible configuration of {problem.key} within the searched values,"
                          f" got {point}, whose every completion is infeasible")  # fmt: skip


# A sweep's ``energy``: true, every verified configuration; best (the default),
# each problem's fastest, after the sweep; false, none.
SWEEP_ENERGY = {True: "all", "best": "best", False: "off"}


def _sweep(name: str, section: Mapping, config: Mapping, memory: int | None) -> SweepSettings:
    where = f"sweeps.{name}"
    family = _family(section["family"], f"{where}.family")
    for i, dtype in enumerate(section["dtypes"]):
        _check_dtype(family, dtype, f"{where}.dtypes[{i}]")
        for j, n in enumerate(section["sizes"]):
            _check_size(family, dtype, n, f"{where}.sizes[{j}]", memory)
    params = section.get("params", {})
    if params == "declared":  # every value the family declares (a spec edited later is swept as it stands)
        params = {p.name: list(p.values) for p in family.params}
    _check_params(family, params, f"{where}.params")
    profile = section.get("profile")
    sweep = SweepSettings(name, family.name, tuple(section["dtypes"]), tuple(section["sizes"]), frozen_params(params),
                          _merged_timing(config, section, where), profile if profile in (None, "all", "report") else profile["top"],
                          energy=SWEEP_ENERGY[section.get("energy", "best")])  # fmt: skip
    count = family.combinations(sweep.domains())
    if count > MAX_ENUMERATED:  # a sweep measures every one of them
        raise ConfigError(f"{where}.params: the grid must hold at most {MAX_ENUMERATED:,} combinations, got {count:,}")
    if not any(family.space(p, sweep.domains()) for p in sweep.problems()):
        raise ConfigError(f"{where}.params: the grid must hold at least one feasible configuration, got none"
                          f"{_first_infeasible(family, sweep.problems()[0], sweep.domains())}")  # fmt: skip
    return sweep


def _first_infeasible(family, problem: Problem, domains: Mapping[str, list]) -> str:
    """`` (the first, {config}: why)``: the rules that rule out the first
    configuration of an empty space, so one line says which restriction to loosen."""
    first = {p.name: list(domains.get(p.name, [p.default]))[0] for p in family.params}
    reasons = family.violations(first, problem)
    return f" (the first, {first}: {'; '.join(reasons)})" if reasons else ""


def _study(name: str, section: Mapping, config: Mapping, run: RunSettings, memory: int | None) -> StudySettings:
    where = f"studies.{name}"
    family = _family(section["family"], f"{where}.family")
    _check_dtype(family, section["dtype"], f"{where}.dtype")
    _check_size(family, section["dtype"], section["n"], f"{where}.n", memory)
    params = section.get("params", {})
    _check_params(family, params, f"{where}.params")
    problem = Problem(family.name, section["dtype"], section["n"])
    domains = {p.name: list(params.get(p.name, p.values)) for p in family.params}
    space = family.listed_space(problem, domains)
    space_size = None if space is None else len(space)
    if space_size == 0:
        raise ConfigError(f"{where}.params: the space must hold at least one feasible configuration for {problem.key}, got none"
                          f"{_first_infeasible(family, problem, domains)}")  # fmt: skip
    for i, point in enumerate(section.get("enqueue", [])):
        unknown = sorted(set(point) - set(family.param_names))
        if unknown:
            raise ConfigError(
                f"{where}.enqueue[{i}]: keys must be parameters of {family.name} {list(family.param_names)}, got {unknown}"
            )
        for key, value in point.items():
            if value not in domains[key] or not family.param(key).accepts(value):
                raise ConfigError(f"{where}.enqueue[{i}].{key}: must be one of the searched values {domains[key]}, got {value!r}")
        _check_feasible_point(family, problem, dict(point), space, f"{where}.enqueue[{i}]")
    if "budget_trials" in section and "budget_fraction" in section:
        raise ConfigError(f"{where}: must give budget_trials or budget_fraction, not both, got both")
    if "budget_trials" in section:
        budget = section["budget_trials"]
    else:
        if space_size is None:
            raise ConfigError(f"{where}.budget_fraction: needs a space small enough to count; give budget_trials instead")
        budget = max(1, round(section.get("budget_fraction", 0.1) * space_size))
    storage = section.get("storage", "default")
    odd = re.search(r"[\x00-\x1f\x7f]", storage)
    if odd:  # as in results_dir: a line break or NUL names no file, and would split the stages' one-line messages
        from tuner.search.study.storage_server import public

        raise ConfigError(f"{where}.storage: must be a journal path or URL without control characters, "
                          f"got {public(storage)[:80]!r} with {odd.group()!r}")  # fmt: skip
    if storage == "default":
        # A journal file: shared safely by worker processes, and a trial costs a
        # few appends (SQLite costs tens of milliseconds of queries a trial).
        storage = str((run.folder.optuna_journal).resolve())
    elif "://" not in storage:
        storage = os.path.expanduser(storage)  # a journal path: ~/study.log as a shell reads it, as results_dir
    warm = section.get("warm_start")
    if warm is not None:
        from tuner.search.study.warm import warm_start_problem

        problem_text = warm_start_problem(warm, family, problem, domains)  # the rule the tune stage applies
        if problem_text:
            raise ConfigError(f"{where}.{problem_text}")
    from tuner.search.samplers.registry import DEFAULT_STRATEGY

    return StudySettings(name=name, family=family.name, dtype=section["dtype"], n=section["n"],
                         sampler=section.get("sampler", DEFAULT_STRATEGY), seed=section.get("seed", config.get("seed", 0)),
                         budget_trials=budget, timeout_s=section.get("timeout_s"), storage=storage,
                         params=frozen_params(params), enqueue=tuple(MappingProxyType(dict(e)) for e in section.get("enqueue", [])),
                         compare_with_sweep=section.get("compare_with_sweep"), timing=_merged_timing(config, section, where),
                         space_size=space_size or 0, warm_start=warm, compile_ahead=section.get("compile_ahead", True),
                         energy=section.get("energy", False))  # fmt: skip
