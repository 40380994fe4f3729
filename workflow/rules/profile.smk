# Stage 3b: hardware counters of the sweeps that ask for them (`profile: all`,
# `report` or `{top: N}`), in one job: the measuring harness runs the chosen
# configurations of every profiled sweep once more under Nsight Compute, in
# one process (one ncu and one harness start for them all), one profiled
# launch each, never timed. A sweep whose choice and timed rows did not change
# keeps its last profile (results/<gpu>/store/profiles/), so editing one sweep
# profiles that sweep again, not the others. Without ncu, or where the GPU's
# counters are not permitted, the profiles are empty and say why; the run goes on.

PROFILED = [
    name for name, sweep in SETTINGS.sweeps.items() if sweep.profile is not None
]


# This run's profiles: outputs of `all`, and inputs of the report of its own
# GPU's folder (other folders, the shipped references, bring their own if any).
PROFILES = [THIS_GPU.profile(name) for name in PROFILED]


if PROFILED:

    rule profile:
        input:
            device=GPU.device_json,
            sweeps=[GPU.sweep(name) for name in PROFILED],
        output:
            [GPU.profile(name) for name in PROFILED],
        log:
            GPU.log("profile"),
        benchmark:
            GPU.seconds("profile")
        conda:
            "../envs/tuner.yaml"
        resources:
            gpu=1,
        params:
            names=" ".join(shlex.quote(name) for name in PROFILED),
            settings=SETTINGS.stage_json("profile", PROFILED),
        shell:
            '"$PYTHON" -m tuner profile {params.names} --settings {params.settings:q} --device {input.device:q}'
            " 2>&1 | tee {log:q}"
