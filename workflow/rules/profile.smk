# Stage 3b: hardware counters of the sweeps that ask for them (`profile: all`
# or `profile: {top: N}`), one rule each (profile_<name>): the measuring
# harness runs the chosen configurations once more under Nsight Compute after
# the sweep, one profiled launch each, never timed. Without ncu, or where the
# GPU's counters are not permitted, the profile is empty and says why; the
# run goes on.

PROFILED = [
    name for name, sweep in SETTINGS.sweeps.items() if sweep.profile is not None
]


# This run's profiles: outputs of `all`, and inputs of the report of its own
# GPU's folder (other folders, the shipped references, bring their own if any).
PROFILES = [f"{GPU_DIR}/profiles/{name}.parquet" for name in PROFILED]


for sweep_name in PROFILED:

    rule:
        name:
            f"profile_{sweep_name}"
        input:
            device=f"{RESULTS}/{{gpu}}/device.json",
            sweep=f"{RESULTS}/{{gpu}}/sweeps/{sweep_name}.parquet",
        output:
            f"{RESULTS}/{{gpu}}/profiles/{sweep_name}.parquet",
        log:
            f"{RESULTS}/{{gpu}}/logs/profile-{sweep_name}.log",
        conda:
            "../envs/tuner.yaml"
        params:
            name=sweep_name,
            settings=SETTINGS.stage_json("profile", sweep_name),
        shell:
            '"$PYTHON" -m tuner profile {params.name:q} --settings {params.settings:q} --device {input.device:q}'
            " --measurements {input.sweep:q} --out {output:q} 2>&1 | tee {log:q}"
