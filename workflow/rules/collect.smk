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
    shell:
        "set -o pipefail; {TUNER} collect {input.sweeps} {input.studies} {RESULTS}/{wildcards.gpu}/peaks.parquet"
        " --out {output} 2>&1 | tee {log}"
