# Stage 3: exhaustive sweeps, one rule each (sweep_<name>), so that each holds
# its own settings in params: editing one sweep reruns that sweep alone (then
# collect and the report). Measurements accumulate in results/<gpu>/store/,
# which no rule owns, one durable row at a time, so a rerun resumes where an
# interrupted one stopped.

for sweep_name in SWEEPS:

    rule:
        name:
            f"sweep_{sweep_name}"
        input:
            device=rules.describe_device.output.json,
            peaks=rules.peaks.output.json,
        output:
            GPU.sweep(sweep_name),
        log:
            GPU.log(f"sweep-{sweep_name}"),
        benchmark:
            GPU.seconds(f"sweep-{sweep_name}")
        conda:
            "../envs/tuner.yaml"
        resources:
            gpu=1,
        params:
            name=sweep_name,
            settings=SETTINGS.stage_json("sweep", sweep_name),
        shell:
            '"$PYTHON" -m tuner sweep {params.name:q} --settings {params.settings:q} --device {input.device:q}'
            " --out {output:q} 2>&1 | tee {log:q}"
