# Kernel autotuning pipeline: describe the GPU, compile the kernel variants,
# measure the peaks, run the sweeps and studies, collect one Parquet dataset,
# plot the report. `snakemake --cores 1` runs it all on this machine's GPU;
# `snakemake --cores 1 report` rebuilds reports from existing results only.
from snakemake.utils import min_version, validate

min_version("8.0")


configfile: "config.yaml"


validate(config, "workflow/schemas/config.schema.yaml")


include: "workflow/rules/common.smk"
include: "workflow/rules/device.smk"
include: "workflow/rules/compile.smk"
include: "workflow/rules/sweep.smk"
include: "workflow/rules/tune.smk"
include: "workflow/rules/collect.smk"
include: "workflow/rules/report.smk"


rule all:
    input:
        report_outputs(GPU_DIR),
