# Stage 5: one Parquet dataset per GPU, read back with pandas.read_parquet.
# It takes none of --cores (threads: 0): a short CPU job, it runs beside the profile.


rule collect:
    input:
        sweeps=[GPU.sweep(name) for name in SWEEPS],
        studies=[GPU.study(name) for name in STUDIES],
        peaks=rules.peaks.output.rows,
    output:
        GPU.measurements,
    log:
        GPU.log("collect"),
    benchmark:
        GPU.seconds("collect")
    conda:
        "../envs/tuner.yaml"
    threads: 0
    shell:
        '"$PYTHON" -m tuner collect {input.sweeps:q} {input.studies:q} {input.peaks:q} --out {output:q} 2>&1 | tee {log:q}'
