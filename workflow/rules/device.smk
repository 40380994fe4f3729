# Stage 1 (GPU jobs: resources gpu=1, which the SLURM profile turns into
# --gpus=1): describe the device (stops the run with one line when PyCUDA or a
# CUDA device is missing, before anything is compiled or measured), then
# measure the bandwidth peaks every result is judged against.


rule describe_device:
    output:
        json=GPU.device_json,
    log:
        GPU.log("describe_device"),
    benchmark:
        GPU.seconds("describe_device")
    conda:
        "../envs/tuner.yaml"
    resources:
        gpu=1,
    params:
        settings=SETTINGS.stage_json("describe"),
    shell:
        '"$PYTHON" -m tuner describe --settings {params.settings:q} --out {output:q} 2> >(tee {log:q} >&2)'


rule peaks:
    input:
        device=rules.describe_device.output.json,
    output:
        json=GPU.peaks_json,
        rows=GPU.peaks_parquet,
    log:
        GPU.log("peaks"),
    benchmark:
        GPU.seconds("peaks")
    conda:
        "../envs/tuner.yaml"
    resources:
        gpu=1,
    params:
        settings=SETTINGS.stage_json("peaks"),
    shell:
        '"$PYTHON" -m tuner peaks --settings {params.settings:q} --device {input.device:q} --out {output.json:q} 2>&1'
        " | tee {log:q}"
