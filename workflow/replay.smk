# A study against a measured table, its workers as separate jobs sharing one
# study storage (PostgreSQL on a cluster): the multi-host study of a GPU run
# with the measurement replaced by a table look-up, so it runs on CPU nodes.
#
#   snakemake -s workflow/replay.smk --configfile replay.yaml --profile workflow/profiles/slurm
#
# replay.yaml: table (Parquet in the results schema), source (its rows of one
# sweep, optional), family, dtype, n, storage (a URL every node reaches),
# study, budget, workers, sampler, out (a folder).
import shlex
import sys
from pathlib import Path

shell.prefix(f"set -euo pipefail; PYTHON={shlex.quote(sys.executable)}; ")

sys.path.insert(0, str(Path(workflow.basedir).parent))

from tuner.search.study.storage_server import export_passwords, public

# The storage URL's password stays off the jobs' command lines (Snakemake
# prints a failed job's command): the jobs find it in their environment.
export_passwords([config["storage"]])
STORAGE = public(config["storage"])
OUT = config["out"]
WORKERS = range(int(config["workers"]))


rule all:
    input:
        f"{OUT}/rows.parquet",


# One job per worker; each stops when the study's budget is spent, whoever spent it.
rule replay_worker:
    input:
        table=config["table"],
    output:
        f"{OUT}/workers/{{worker}}.json",
    log:
        f"{OUT}/logs/worker-{{worker}}.log",
    params:
        problem=[
            "--family",
            config["family"],
            "--dtype",
            config["dtype"],
            "--n",
            str(config["n"]),
        ]
        + (["--source", config["source"]] if config.get("source") else []),
        storage=STORAGE,
        study=config["study"],
        budget=int(config["budget"]),
        sampler=config.get("sampler", "tpe"),
    shell:
        '"$PYTHON" -m tuner.search.tables.replay_study worker {input.table:q} {params.problem:q} --storage {params.storage:q}'
        " --study {params.study:q} --budget {params.budget} --sampler {params.sampler:q} --seed {wildcards.worker}"
        ' --worker "replay{wildcards.worker}@$(hostname)" --out {output:q} 2>&1 | tee {log:q}'


# The study's rows once every worker is done; fails unless they are exactly
# the budget, each configuration once.
rule replay_rows:
    input:
        expand(f"{OUT}/workers/{{worker}}.json", worker=WORKERS),
    output:
        f"{OUT}/rows.parquet",
    log:
        f"{OUT}/logs/rows.log",
    params:
        storage=STORAGE,
        study=config["study"],
        budget=int(config["budget"]),
    shell:
        '"$PYTHON" -m tuner.search.tables.replay_study rows --storage {params.storage:q} --study {params.study:q}'
        " --budget {params.budget} --out {output:q} 2>&1 | tee {log:q}"
