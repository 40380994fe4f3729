# Stage 5b: the run's answer as files a program can load or include: the best
# verified configuration per family and problem (best.json, best_configs.h).


rule export_best:
    input:
        measurements=f"{RESULTS}/{{gpu}}/measurements.parquet",
        device=rules.describe_device.output.json,
    output:
        json=f"{RESULTS}/{{gpu}}/best.json",
        header=f"{RESULTS}/{{gpu}}/best_configs.h",
    log:
        f"{RESULTS}/{{gpu}}/logs/export_best.log",
    benchmark:
        f"{RESULTS}/{{gpu}}/logs/seconds/export_best.tsv"
    conda:
        "../envs/tuner.yaml"
    params:
        folder=lambda wildcards: f"{RESULTS}/{wildcards.gpu}",
        settings=SETTINGS.stage_json("best"),
    shell:
        '"$PYTHON" -m tuner best --settings {params.settings:q} --results {params.folder:q} 2>&1 | tee {log:q}'
