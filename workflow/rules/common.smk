# Settings and helpers shared by the rules. The config is checked once, here,
# into tuner.settings.Settings; each rule hands its stage exactly its own part
# of those settings as JSON through `params:` (so `--rerun-triggers params`
# reruns only the jobs whose settings changed), every value shell-quoted.
import functools
import shlex
import sys
from pathlib import Path

import yaml

# Run from the checkout, its own package is imported; run as a module of another
# folder's Snakefile (`tuner init`), the installed one, whose files
# (tuner.resources) include these rules.
if Path(workflow.basedir, "tuner", "__init__.py").is_file():
    sys.path.insert(0, workflow.basedir)

from tuner import resources as tuner_resources
from tuner import settings as tuner_settings

# The report's figures: the figure list the report's code draws from, read here
# as a file so that planning a run does not import the report's plotting code.
# Each has a caption file for `snakemake --report` (written from the list).
EXPECTED_FIGURES = [
    figure["stem"]
    for figure in yaml.safe_load(tuner_resources.figure_list_file().read_text())
]

# The interpreter running Snakemake runs the stages; set in the shell prefix,
# not in params or the command, so switching virtual environments reruns nothing.
shell.prefix(f"set -euo pipefail; PYTHON={shlex.quote(sys.executable)}; ")


def _config_error(message):
    print(f"config error: {message}", file=sys.stderr)
    sys.exit(2)


# Each config file is read once per start (checked, then searched for family_paths).
_read_yaml = functools.cache(tuner_settings.read_yaml)


def check_yaml_or_exit(path):
    """Syntax errors with their line, duplicate keys refused (Snakemake's own
    reader reports neither)."""
    try:
        _read_yaml(path)
    except tuner_settings.ConfigError as error:
        _config_error(error)


def _family_paths_base():
    """The folder of the config file that names family_paths (the last one
    given that does), so a config's plug-ins are found wherever snakemake runs."""
    files = list(workflow.overwrite_configfiles) or [
        str(Path(workflow.basedir) / "config.yaml")
    ]
    for path in reversed(files):
        if "family_paths" in (_read_yaml(path) or {}):
            return Path(path).resolve().parent
    return Path.cwd()


def settings_or_exit(config):
    from tuner.measure.compile import nvcc_architectures
    from tuner.device.describe import probe_devices
    from tuner.search.study.storage_spec import storage_problem

    from tuner.search.study.storage_server import export_passwords

    for path in workflow.overwrite_configfiles:
        check_yaml_or_exit(path)
    try:
        # Nested --config values reach here as strings; typed as the file's would be.
        tuner_settings.typed_overrides(config, workflow.config_settings.config)
        settings = tuner_settings.parse(
            config,
            device=probe_devices(),
            nvcc_archs=nvcc_architectures(),
            storage_check=storage_problem,
            base_dir=_family_paths_base(),
        )
    except tuner_settings.ConfigError as error:
        _config_error(error)
    # The stages get storage URLs without their passwords (Settings.stage_json)
    # and find them in the environment they inherit from this process.
    export_passwords(study.storage for study in settings.studies.values())
    return settings


wildcard_constraints:
    gpu="[a-z0-9][a-z0-9_-]*",
    name="[A-Za-z0-9][A-Za-z0-9_.-]*",


def report_outputs(folder):
    return [f"{folder}/report/report.md", f"{folder}/report/report.html"] + [
        f"{folder}/report/{stem}.png" for stem in EXPECTED_FIGURES
    ]


def report_figures(folder):
    """Each figure of the report in ``folder``, with its caption for
    `snakemake --report` (captions are relative to the rule's file)."""
    captioned = report  # Snakemake's report() flag, named so that snakefmt reads a call
    return [
        captioned(
            f"{folder}/report/{stem}.png",
            caption=f"../report/captions/{stem}.rst",
            category="Figures",
        )
        for stem in EXPECTED_FIGURES
    ]


def finished_result_folders():
    """This machine's result folders that already hold a collected dataset and
    what the report reads beside it (device.json, peaks.json): the report target
    rebuilds these without a GPU. A folder left out is said so, as one whose
    name holds a brace (Snakemake reads braces in a path as a wildcard): one
    such folder stopped every folder's report."""
    found = []
    for path in sorted(Path(RESULTS).glob("*/measurements.parquet")):
        folder = path.parent
        lacking = [
            name
            for name in ("device.json", "peaks.json")
            if not (folder / name).is_file()
        ]
        if "{" in folder.name or "}" in folder.name:
            why = (
                "a folder name must hold no braces (Snakemake reads them as a wildcard)"
            )
        elif lacking:
            why = f"a finished run's folder must hold measurements.parquet, device.json and peaks.json, lacks {lacking}"
        else:
            found.append(str(folder))
            continue
        print(f"report: {folder}: left out, {why}", file=sys.stderr)
    return found


def reference_folders():
    """The shipped reference runs (results/reference/<gpu>), by GPU."""
    found = sorted(Path(RESULTS).glob("reference/*/measurements.parquet"))
    return [p.parent.name for p in found]


def finished_inputs(folder):
    """What a finished folder's report is drawn from, as (name, size, mtime)
    text: a change of any of them draws the report again (a param, not an
    input another rule makes)."""
    files = [
        Path(folder, name)
        for name in ("measurements.parquet", "device.json", "peaks.json")
    ]
    files += sorted(Path(folder).glob("profiles/*.parquet"))
    found = []
    for path in files:
        if path.is_file():
            info = path.stat()
            found.append(f"{path.name}:{info.st_size}:{info.st_mtime_ns}")
    return ",".join(found)


def report_code_digest():
    """The report code's files as (name, size, mtime) text (a param)."""
    return ",".join(
        f"{Path(p).name}:{Path(p).stat().st_size}:{Path(p).stat().st_mtime_ns}"
        for p in report_code()
    )


def report_code():
    """The files a report is drawn by (its code and the figure list): editing
    one rebuilds the reference reports."""
    package = tuner_resources.package_dir() / "report"
    code = [p for p in package.rglob("*") if p.suffix in (".py", ".j2", ".css")]
    return sorted(str(p) for p in [*code, tuner_resources.figure_list_file()])
