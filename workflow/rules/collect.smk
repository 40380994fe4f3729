# Stage 5: one Parquet dataset per GPU, read back with pandas.read_parquet.


rule collect:
    input:
        sweeps=expand(f"{RESULTS}/{{{{gpu}}}}/sweeps/{{name}}.parquet", name=SWEEPS),
        studies=expand(f"{RESULTS}/{{{{gpu}}}}/studies/{{name}}.parquet", name=STUDIES),
        peaks=rules.peaks.output.rows,
    output:
        f"{RESULTS}/{{gpu}}/measurements.parquet",
    log:
        f"{RESULTS}/{{gpu}}/logs/collect.log",
    benchmark:
        f"{RESULTS}/{{gpu}}/logs/seconds/collect.tsv"
    conda:
        "../envs/tuner.yaml"
    shell:
        '"$PYTHON" -m tuner collect {input.sweeps:q} {input.studies:q} {input.peaks:q} --out {output:q} 2>&1 | tee {log:q}'
