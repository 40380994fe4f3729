# Stage 2: compile every kernel variant the sweeps need, and a study's space
# where it is small beside its budget (a larger study compiles what it measures
# as it searches), in parallel, into the cubin cache; the table keeps ptxas's
# report per module, and a variant that fails to compile fails the run.
#
# It takes none of --cores (threads: 0), so it runs beside the peaks, a GPU
# job, on its own nvcc processes (one per CPU but one). Sweeps and studies do
# not take its table as input, so recompiling after one sweep changed reruns no
# other sweep (each compiles what it lacks, from the same cache); one that
# starts while it compiles waits for it before measuring (a lock in the cache).


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
    threads: 0
    params:
        settings=SETTINGS.stage_json("compile"),
    shell:
        '"$PYTHON" -m tuner compile --settings {params.settings:q} --device {input.device:q} --out {output:q} 2>&1'
        " | tee {log:q}"
