# Stage 3: exhaustive sweeps. Measurements accumulate in results/<gpu>/store/,
# which no rule owns, so a rerun resumes where an interrupted one stopped.


rule sweep:
    input:
        device=f"{RESULTS}/{{gpu}}/device.json",
        peaks=f"{RESULTS}/{{gpu}}/peaks.json",
        compiled=f"{RESULTS}/{{gpu}}/compile.parquet",
    output:
        f"{RESULTS}/{{gpu}}/sweeps/{{name}}.parquet",
    log:
        f"{RESULTS}/{{gpu}}/logs/sweep-{{name}}.log",
    shell:
        "set -o pipefail; {TUNER} sweep {wildcards.name} --config config.yaml --device {input.device}"
        " --peaks {input.peaks} --out {output} 2>&1 | tee {log}"
