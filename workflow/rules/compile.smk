# Stage 2: compile every kernel variant the sweeps and studies need, in
# parallel, into the cubin cache; the table keeps ptxas's report per module.
# Sweeps and studies name this table as ancient(): it warms the cache before
# they start, but recompiling (after another sweep changed) reruns none of them.


rule compile_variants:
    input:
        device=f"{RESULTS}/{{gpu}}/device.json",
    output:
        f"{RESULTS}/{{gpu}}/compile.parquet",
    log:
        f"{RESULTS}/{{gpu}}/logs/compile.log",
    params:
        settings=SETTINGS.stage_json("compile"),
    conda:
        "../envs/tuner.yaml"
    shell:
        '"$PYTHON" -m tuner compile --settings {params.settings:q} --device {input.device:q} --out {output:q} 2>&1'
        " | tee {log:q}"
