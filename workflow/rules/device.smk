# Stage 1: describe the device. Stops the run with one line when PyCUDA or a
# CUDA device is missing, before anything is compiled or measured.


rule describe_device:
    output:
        f"{RESULTS}/{{gpu}}/device.json",
    log:
        f"{RESULTS}/{{gpu}}/logs/describe_device.log",
    shell:
        "{TUNER} describe --out {output} 2> >(tee {log} >&2)"


rule peaks:
    input:
        device=f"{RESULTS}/{{gpu}}/device.json",
        compiled=f"{RESULTS}/{{gpu}}/compile.parquet",
    output:
        f"{RESULTS}/{{gpu}}/peaks.json",
    log:
        f"{RESULTS}/{{gpu}}/logs/peaks.log",
    shell:
        "{TUNER} peaks --config config.yaml --device {input.device} --out {output} 2>&1 | tee {log}"
