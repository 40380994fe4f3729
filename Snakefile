# Kernel autotuning pipeline: describe the GPU, compile the kernel variants,
# measure the peaks, run the sweeps and studies, collect one Parquet dataset,
# plot the report. `snakemake --cores 1` runs it all on this machine's GPU;
# `snakemake --cores 1 report` rebuilds reports from existing results only.
#
# `--configfile mine.yaml` names the whole configuration (config.yaml is then
# not read, so no sweep of it comes back); `--config key=value` overrides keys.
import time

from snakemake.utils import min_version

min_version("8.0")

RUN_STARTED = time.time()  # each stage's seconds since then are shown at the end


include: "workflow/rules/common.smk"


if not workflow.overwrite_configfiles:
    check_yaml_or_exit("config.yaml")

    configfile: "config.yaml"


SETTINGS = settings_or_exit(config)
# Every path below comes from tuner.data.paths: GPU is any GPU's folder as a
# pattern of the {gpu} wildcard, THIS_GPU the folder this config runs on.
RESULTS = ResultsFolder(SETTINGS.run.results_dir)
GPU = RESULTS.gpu("{gpu}")
THIS_GPU = SETTINGS.run.folder
GPU_DIR = str(THIS_GPU.path)
SWEEPS = list(SETTINGS.sweeps)
STUDIES = list(SETTINGS.studies)


include: "workflow/rules/device.smk"
include: "workflow/rules/compile.smk"
include: "workflow/rules/sweep.smk"
include: "workflow/rules/profile.smk"
include: "workflow/rules/tune.smk"
include: "workflow/rules/collect.smk"
include: "workflow/rules/export.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/search_bench.smk"


onsuccess:
    from tuner.data.stage_seconds import print_run_seconds

    print_run_seconds(RESULTS.path, RUN_STARTED)


rule all:
    input:
        THIS_GPU.compile_parquet,
        THIS_GPU.best_json,
        THIS_GPU.best_header,
        PROFILES,
        report_outputs(THIS_GPU),
