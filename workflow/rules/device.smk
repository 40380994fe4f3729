# Stage 1: describe the device (stops the run with one line when PyCUDA or a
# CUDA device is missing, before anything is compiled or measured), then
# measure the bandwidth peaks every result is judged against.


rule describe_device:
    output:
        f"{RESULTS}/{{gpu}}/device.json",
    log:
        f"{RESULTS}/{{gpu}}/logs/describe_device.log",
    params:
        tuner=TUNER,
    conda:
        "../envs/tuner.yaml"
    shell:
        "{params.tuner} describe --out {output} 2> >(tee {log} >&2)"


rule peaks:
    input:
        device=f"{RESULTS}/{{gpu}}/device.json",
        compiled=f"{RESULTS}/{{gpu}}/compile.parquet",
        config="config.yaml",
    output:
        f"{RESULTS}/{{gpu}}/peaks.json",
    log:
        f"{RESULTS}/{{gpu}}/logs/peaks.log",
    params:
        tuner=TUNER,
    conda:
        "../envs/tuner.yaml"
    shell:
        "set -o pipefail; {params.tuner} peaks --config {input.config} --device {input.device} --out {output} 2>&1 | tee {log}"
