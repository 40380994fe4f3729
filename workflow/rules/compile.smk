# Stage 2: compile every kernel variant the sweeps need, and a study's space
# where it is small beside its budget (a larger study compiles what it measures
# as it searches), in parallel, into the cubin cache; the table keeps ptxas's
# report per module, and a variant that fails to compile fails the run. Sweeps
# and studies do not wait for it (each compiles what it lacks, in parallel,
# from the same cache), so recompiling after one sweep changed reruns no other sweep.


rule compile_variants:
    input:
        device=GPU.device_json,
    output:
        GPU.compile_parquet,
    log:
        GPU.log("compile"),
    benchmark:
        GPU.seconds("compile")
    conda:
        "../envs/tuner.yaml"
    params:
        settings=SETTINGS.stage_json("compile"),
    shell:
        '"$PYTHON" -m tuner compile --settings {params.settings:q} --device {input.device:q} --out {output:q} 2>&1'
        " | tee {log:q}"
