# Stage 6: figures and the report document, from the Parquet dataset alone
# (no GPU needed). `snakemake --cores 1 report` rebuilds every finished folder
# and the shipped reference reports (results/reference/<gpu>/report/, tracked:
# report.md and its PNG figures, `--format markdown`, each figure stored once).


rule plot_report:
    input:
        measurements="{folder}/measurements.parquet",
        device="{folder}/device.json",
        peaks="{folder}/peaks.json",
        profiles=lambda wildcards: PROFILES if wildcards.folder == GPU_DIR else [],
    output:
        markdown="{folder}/report/report.md",
        html="{folder}/report/report.html",
        figures=report_figures("{folder}"),
    log:
        "{folder}/logs/report.log",
    benchmark:
        "{folder}/logs/seconds/report.tsv"
    conda:
        "../envs/tuner.yaml"
    shell:
        '"$PYTHON" -m tuner.report --results {wildcards.folder:q} --out {wildcards.folder:q}/report 2>&1 | tee {log:q}'


# The shipped reference reports are tracked files, so their modification times
# (clone order on a fresh clone) cannot say whether they are current: a stamp
# outside the tracked tree does. It is missing on a fresh clone and older than
# the report code after an edit, and then the report is rebuilt in place. The
# report is the same bytes for the same inputs, so a rebuild that changes a
# tracked file means the report code changed what it draws.
rule report_reference:
    input:
        measurements=f"{RESULTS}/reference/{{gpu}}/measurements.parquet",
        device=f"{RESULTS}/reference/{{gpu}}/device.json",
        peaks=f"{RESULTS}/reference/{{gpu}}/peaks.json",
        profiles=lambda wildcards: sorted(
            str(p)
            for p in Path(RESULTS, "reference", wildcards.gpu).glob(
                "profiles/*.parquet"
            )
        ),
        code=report_code(),
    output:
        stamp=touch(f"{RESULTS}/.reference-reports/{{gpu}}.done"),
        markdown=f"{RESULTS}/reference/{{gpu}}/report/report.md",
        figures=report_figures(f"{RESULTS}/reference/{{gpu}}"),
    log:
        f"{RESULTS}/.reference-reports/{{gpu}}.log",
    conda:
        "../envs/tuner.yaml"
    threads: 4  # scaled down to --cores
    params:
        folder=lambda wildcards: f"{RESULTS}/reference/{wildcards.gpu}",
    shell:
        '"$PYTHON" -m tuner.report --results {params.folder:q} --out {params.folder:q}/report '
        "--format markdown --processes {threads} 2>&1 | tee {log:q}"


# A finished folder's report, for the report target: drawn from the files the
# folder holds, with no input another rule makes. Through plot_report its
# measurements would be collect's output, so a folder copied from another run
# (without this config's sweeps, or a peaks.parquet) planned the GPU stages, and
# a failed one's outputs (peaks.json, measurements.parquet) were deleted. Its
# files' sizes and times are a param, so an edit of one draws it again.
rule report_finished:
    output:
        stamp=touch(f"{RESULTS}/.finished-reports/{{finished}}.done"),
        markdown=f"{RESULTS}/{{finished}}/report/report.md",
        html=f"{RESULTS}/{{finished}}/report/report.html",
        figures=report_figures(f"{RESULTS}/{{finished}}"),
    log:
        f"{RESULTS}/.finished-reports/{{finished}}.log",
    wildcard_constraints:
        finished="[^/]+",
    conda:
        "../envs/tuner.yaml"
    threads: 4  # scaled down to --cores
    params:
        folder=lambda wildcards: f"{RESULTS}/{wildcards.finished}",
        inputs=lambda wildcards: finished_inputs(f"{RESULTS}/{wildcards.finished}"),
        code=report_code_digest(),
    shell:
        '"$PYTHON" -m tuner.report --results {params.folder:q} --out {params.folder:q}/report '
        "--processes {threads} 2>&1 | tee {log:q}"


ruleorder: plot_report > report_finished


rule report:
    input:
        [
            f"{RESULTS}/.finished-reports/{Path(folder).name}.done"
            for folder in finished_result_folders()
        ],
        [f"{RESULTS}/.reference-reports/{gpu}.done" for gpu in reference_folders()],
