# Settings and helpers shared by the rules. The config is checked once, here,
# into tuner.settings.Settings; each rule hands its stage exactly its own part
# of those settings as JSON through `params:` (so `--rerun-triggers params`
# reruns only the jobs whose settings changed), every value shell-quoted.
import functools
import os
import re
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
from tuner.data.paths import GpuFolder, ResultsFolder

# The report's figures: the figure list the report's code draws from, read here
# as a file so that planning a run does not import the report's plotting code.
FIGURES = yaml.safe_load(tuner_resources.figure_list_file().read_text(encoding="utf-8"))
EXPECTED_FIGURES = [figure["stem"] for figure in FIGURES]

# Each figure's caption for `snakemake --report`, which reads a caption from a
# file (reStructuredText, rendered by Jinja2 first): written from the list as
# the workflow is read, into Snakemake's folder of the working directory
# (.snakemake/, which version control ignores), never beside these rules, which
# an install may hold read-only.
CAPTIONS_DIR = Path(".snakemake", "report-captions").resolve()
CAPTION_SHARED = (
    "A figure of the tuning report (``report.html`` beside it holds every figure and table in one file): measured "
    "on the GPU named in its title, verified against a numpy reference; bandwidth is the fewest bytes the problem "
    "moves over the median kernel time (L2 flushed before every sample)."
)


def caption_text(caption):
    """A figure's caption as Snakemake renders it: reStructuredText's markup
    characters escaped, and Jinja2 told to leave the text as it is."""
    escaped = re.sub(r"([\\*`_|])", r"\\\1", caption)
    return f"{{% raw %}}{escaped}\n\n{CAPTION_SHARED}{{% endraw %}}\n"


def write_captions(folder):
    """Each figure's caption file, ``<stem>.rst``, rewritten only where its text
    changed, by a rename (another run in this folder may be reading it)."""
    folder.mkdir(parents=True, exist_ok=True)
    for figure in FIGURES:
        path = folder / f"{figure['stem']}.rst"
        text = caption_text(figure["caption"])
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            partial = path.with_name(f".{path.name}.{os.getpid()}")
            partial.write_text(text, encoding="utf-8")
            os.replace(partial, path)


write_captions(CAPTIONS_DIR)

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
    """The report of ``folder`` (a GpuFolder): its documents and PNG figures."""
    return [folder.report_markdown, folder.report_html] + [
        folder.report_figure(stem) for stem in EXPECTED_FIGURES
    ]


def report_figures(folder):
    """Each PNG figure of the report of ``folder`` (a GpuFolder), with its
    caption for `snakemake --report` (an absolute path: Snakemake joins a
    relative one to the rule file's folder)."""
    captioned = report  # Snakemake's report() flag, named so that snakefmt reads a call
    return [
        captioned(
            str(folder.report_figure(stem)),
            caption=str(CAPTIONS_DIR / f"{stem}.rst"),
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
    for folder in (GpuFolder(path) for path in sorted(RESULTS.path.glob("*/"))):
        if not folder.measurements.is_file():
            continue
        beside = (folder.device_json, folder.peaks_json)
        lacking = [p.name for p in beside if not p.is_file()]
        if "{" in folder.path.name or "}" in folder.path.name:
            why = (
                "a folder name must hold no braces (Snakemake reads them as a wildcard)"
            )
        elif lacking:
            why = f"a finished run's folder must hold measurements.parquet, device.json and peaks.json, lacks {lacking}"
        else:
            found.append(folder)
            continue
        print(f"report: {folder.path}: left out, {why}", file=sys.stderr)
    return found


def reference_folders():
    """The shipped reference runs (results/reference/<gpu>), by GPU."""
    found = sorted(RESULTS.references.glob("*/"))
    return [p.name for p in found if RESULTS.reference(p.name).measurements.is_file()]


def finished_inputs(folder):
    """What a finished folder's report (``folder``, a GpuFolder) is drawn from,
    as (name, size, mtime) text: a change of any of them draws the report again
    (a param, not an input another rule makes)."""
    files = [folder.measurements, folder.device_json, folder.peaks_json]
    files += sorted(folder.profiles.glob("*.parquet"))
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
    return [str(p) for p in tuner_resources.report_code_files()]
