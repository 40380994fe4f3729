# Stage 2: compile every kernel variant the sweeps and studies need, in
# parallel, into the cubin cache; the table keeps ptxas's report per module.


rule compile_variants:
    input:
        device=f"{RESULTS}/{{gpu}}/device.json",
        config="config.yaml",
    output:
        f"{RESULTS}/{{gpu}}/compile.parquet",
    log:
        f"{RESULTS}/{{gpu}}/logs/compile.log",
    params:
        tuner=TUNER,
    conda:
        "../envs/tuner.yaml"
    shell:
        "set -o pipefail; {params.tuner} compile --config {input.config} --device {input.device} --out {output} 2>&1 | tee {log}"
