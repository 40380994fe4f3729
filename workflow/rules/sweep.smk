# Stage 3: exhaustive sweeps. Measurements accumulate in results/<gpu>/store/,
# which no rule owns, so a rerun resumes where an interrupted one stopped.


rule sweep:
    input:
        device=f"{RESULTS}/{{gpu}}/device.json",
        peaks=f"{RESULTS}/{{gpu}}/peaks.json",
        compiled=f"{RESULTS}/{{gpu}}/compile.parquet",
        config="config.yaml",
    output:
        f"{RESULTS}/{{gpu}}/sweeps/{{name}}.parquet",
    log:
        f"{RESULTS}/{{gpu}}/logs/sweep-{{name}}.log",
    params:
        tuner=TUNER,
    conda:
        "../envs/tuner.yaml"
    shell:
        "set -o pipefail; {params.tuner} sweep {wildcards.name} --config {input.config} --device {input.device}"
        " --peaks {input.peaks} --out {output} 2>&1 | tee {log}"
