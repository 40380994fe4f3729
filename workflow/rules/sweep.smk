# Stage 3: exhaustive sweeps. Measurements accumulate in results/<gpu>/store/,
# which no rule owns, one durable row at a time, so a rerun resumes where an
# interrupted one stopped.


rule sweep:
    input:
        device=f"{RESULTS}/{{gpu}}/device.json",
        peaks=f"{RESULTS}/{{gpu}}/peaks.json",
        compiled=ancient(f"{RESULTS}/{{gpu}}/compile.parquet"),
    output:
        f"{RESULTS}/{{gpu}}/sweeps/{{name}}.parquet",
    log:
        f"{RESULTS}/{{gpu}}/logs/sweep-{{name}}.log",
    params:
        settings=lambda wildcards: SETTINGS.stage_json("sweep", wildcards.name),
    conda:
        "../envs/tuner.yaml"
    shell:
        '"$PYTHON" -m tuner sweep {wildcards.name:q} --settings {params.settings:q} --device {input.device:q}'
        " --out {output:q} 2>&1 | tee {log:q}"
