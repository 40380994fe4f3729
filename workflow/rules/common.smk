# Names and paths shared by the rules. The GPU's slug names the results folder;
# it comes from nvidia-smi at parse time so a dry run works without PyCUDA.
import sys
from pathlib import Path

sys.path.insert(0, workflow.basedir)

from tuner.config import check as check_config
from tuner.device import detect_slug
from tuner.report import EXPECTED_FIGURES

check_config(config)  # rules between values, before any job starts

RESULTS = config["results_dir"]
GPU = (
    config.get("gpu", "auto")
    if config.get("gpu", "auto") != "auto"
    else detect_slug(config.get("device_index", 0))
)
GPU_DIR = f"{RESULTS}/{GPU}"
SWEEPS = list(config.get("sweeps", {}))
STUDIES = list(config.get("studies", {}))
TUNER = f"{sys.executable} -m tuner"
# Several GPUs share each study: one worker process per listed device.
STUDY_WORKERS = (
    "--gpus " + ",".join(map(str, config["study_gpus"]))
    if len(config.get("study_gpus", [])) > 1
    else ""
)


wildcard_constraints:
    gpu="[A-Za-z0-9_.-]+",
    name="[A-Za-z0-9_.-]+",


def report_outputs(folder):
    return [f"{folder}/report/report.md", f"{folder}/report/report.html"] + [
        f"{folder}/report/{stem}.png" for stem in EXPECTED_FIGURES
    ]


def finished_result_folders():
    """Result folders that already hold a collected dataset (GPU runs and the
    shipped references): the report target rebuilds these without a GPU."""
    found = sorted(Path(RESULTS).glob("*/measurements.parquet")) + sorted(
        Path(RESULTS).glob("reference/*/measurements.parquet")
    )
    return [str(p.parent) for p in found]
