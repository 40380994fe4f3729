# Stage 4: Optuna studies, one rule each (tune_<name>) holding its own
# settings, one worker per GPU in study_gpus. The study storage
# (results/<gpu>/optuna.log by default) is not an output: Snakemake never
# deletes it, and a rerun resumes.

for study_name in STUDIES:

    rule:
        name:
            f"tune_{study_name}"
        input:
            device=rules.describe_device.output.json,
            peaks=rules.peaks.output.json,
        output:
            GPU.study(study_name),
        log:
            GPU.log(f"tune-{study_name}"),
        benchmark:
            GPU.seconds(f"tune-{study_name}")
        conda:
            "../envs/tuner.yaml"
        resources:
            gpu=max(1, len(SETTINGS.run.study_gpus)),
        params:
            name=study_name,
            settings=SETTINGS.stage_json("study", study_name),
        shell:
            '"$PYTHON" -m tuner tune {params.name:q} --settings {params.settings:q} --device {input.device:q}'
            " --out {output:q} 2>&1 | tee {log:q}"
