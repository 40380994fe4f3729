# Stage 5b: the run's answer as files a program can load or include: the best
# verified configuration per family and problem (best.json, best_configs.h).
# Like collect and the report's figures, it takes none of --cores and runs beside the profile.


rule export_best:
    input:
        measurements=GPU.measurements,
        device=rules.describe_device.output.json,
    output:
        json=GPU.best_json,
        header=GPU.best_header,
    log:
        GPU.log("export_best"),
    benchmark:
        GPU.seconds("export_best")
    conda:
        "../envs/tuner.yaml"
    threads: 0
    params:
        folder=lambda wildcards: str(RESULTS.gpu(wildcards.gpu).path),
        settings=SETTINGS.stage_json("best"),
    shell:
        '"$PYTHON" -m tuner best --settings {params.settings:q} --results {params.folder:q} 2>&1 | tee {log:q}'
