# Stage 5: one Parquet dataset per GPU, read back with pandas.read_parquet.


rule collect:
    input:
        sweeps=expand(f"{RESULTS}/{{{{gpu}}}}/sweeps/{{name}}.parquet", name=SWEEPS),
        studies=expand(f"{RESULTS}/{{{{gpu}}}}/studies/{{name}}.parquet", name=STUDIES),
        peaks=f"{RESULTS}/{{gpu}}/peaks.json",
    output:
        f"{RESULTS}/{{gpu}}/measurements.parquet",
    log:
        f"{RESULTS}/{{gpu}}/logs/collect.log",
    params:
        tuner=TUNER,
        peak_rows=lambda wildcards, input: str(Path(input.peaks).with_suffix(".parquet")),
    conda:
        "../envs/tuner.yaml"
    shell:
        "set -o pipefail; {params.tuner} collect {input.sweeps} {input.studies} {params.peak_rows}"
        " --out {output} 2>&1 | tee {log}"
