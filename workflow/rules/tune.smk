# Stage 4: Optuna studies, one worker per GPU in study_gpus. The study storage
# (results/<gpu>/optuna.db by default) is not an output: Snakemake never
# deletes it, and a rerun resumes.


rule tune:
    input:
        device=f"{RESULTS}/{{gpu}}/device.json",
        peaks=f"{RESULTS}/{{gpu}}/peaks.json",
        compiled=ancient(f"{RESULTS}/{{gpu}}/compile.parquet"),
    output:
        f"{RESULTS}/{{gpu}}/studies/{{name}}.parquet",
    log:
        f"{RESULTS}/{{gpu}}/logs/tune-{{name}}.log",
    params:
        settings=lambda wildcards: SETTINGS.stage_json("study", wildcards.name),
    conda:
        "../envs/tuner.yaml"
    shell:
        '"$PYTHON" -m tuner tune {wildcards.name:q} --settings {params.settings:q} --device {input.device:q}'
        " --out {output:q} 2>&1 | tee {log:q}"
