# Stage 4: Optuna studies. The study database (results/<gpu>/optuna.db by
# default) is not an output: Snakemake never deletes it, and a rerun resumes.


rule tune:
    input:
        device=f"{RESULTS}/{{gpu}}/device.json",
        peaks=f"{RESULTS}/{{gpu}}/peaks.json",
        compiled=f"{RESULTS}/{{gpu}}/compile.parquet",
        config="config.yaml",
    output:
        f"{RESULTS}/{{gpu}}/studies/{{name}}.parquet",
    log:
        f"{RESULTS}/{{gpu}}/logs/tune-{{name}}.log",
    params:
        tuner=TUNER,
        workers=STUDY_WORKERS,
    conda:
        "../envs/tuner.yaml"
    shell:
        "set -o pipefail; {params.tuner} tune {wildcards.name} --config {input.config} --device {input.device}"
        " --peaks {input.peaks} --out {output} {params.workers} 2>&1 | tee {log}"
