# Stage 6: figures and the report document, from the Parquet dataset alone
# (no GPU needed). `snakemake --cores 1 report` rebuilds every finished folder
# and the shipped reference reports (results/reference/<gpu>/report/, tracked:
# report.md and its PNG figures, `--format markdown`, each figure stored once).
#
# A run's own report is drawn in two jobs (tuner/report/draft.py): draw_report
# draws every figure from the dataset and takes none of --cores (threads: 0), so
# it runs beside the profile, a GPU job that leaves the CPUs idle; plot_report
# then adds the hardware counters and writes the documents.


# Any folder with a dataset, by wildcard (this run's GPU folder among them).
FOLDER = GpuFolder("{folder}")


rule draw_report:
    input:
        measurements=FOLDER.measurements,
        device=FOLDER.device_json,
        peaks=FOLDER.peaks_json,
    output:
        draft=FOLDER.report_draft,
        figures=report_figures(FOLDER),
    log:
        FOLDER.log("draw_report"),
    benchmark:
        FOLDER.seconds("draw_report")
    conda:
        "../envs/tuner.yaml"
    threads: 0
    params:
        out=lambda wildcards: str(GpuFolder(wildcards.folder).report),
    shell:
        '"$PYTHON" -m tuner.report --results {wildcards.folder:q} --out {params.out:q} --draft {output.draft:q} 2>&1'
        " | tee {log:q}"


rule plot_report:
    input:
        draft=FOLDER.report_draft,
        measurements=FOLDER.measurements,
        device=FOLDER.device_json,
        peaks=FOLDER.peaks_json,
        profiles=lambda wildcards: PROFILES if wildcards.folder == GPU_DIR else [],
    output:
        markdown=FOLDER.report_markdown,
        html=FOLDER.report_html,
    log:
        FOLDER.log("report"),
    benchmark:
        FOLDER.seconds("report")
    conda:
        "../envs/tuner.yaml"
    params:
        out=lambda wildcards: str(GpuFolder(wildcards.folder).report),
    shell:
        '"$PYTHON" -m tuner.report --results {wildcards.folder:q} --out {params.out:q} --from-draft {input.draft:q}'
        " 2>&1 | tee {log:q}"


# A shipped reference run's folder and a finished one's, by wildcard.
REFERENCE = RESULTS.reference("{gpu}")


# The shipped reference reports are tracked files, so their modification times
# (clone order on a fresh clone) cannot say whether they are current: a stamp
# outside the tracked tree does. It is missing on a fresh clone and older than
# the report code after an edit, and then the report is rebuilt in place. The
# report is the same bytes for the same inputs, so a rebuild that changes a
# tracked file means the report code changed what it draws.
rule report_reference:
    input:
        measurements=REFERENCE.measurements,
        device=REFERENCE.device_json,
        peaks=REFERENCE.peaks_json,
        profiles=lambda wildcards: sorted(
            str(p) for p in RESULTS.reference(wildcards.gpu).profiles.glob("*.parquet")
        ),
        code=report_code(),
    output:
        stamp=touch(str(RESULTS.reference_report_stamp("{gpu}"))),
        markdown=REFERENCE.report_markdown,
        figures=report_figures(REFERENCE),
    log:
        RESULTS.reference_report_log("{gpu}"),
    conda:
        "../envs/tuner.yaml"
    threads: 4  # scaled down to --cores
    params:
        folder=lambda wildcards: str(RESULTS.reference(wildcards.gpu).path),
        out=lambda wildcards: str(RESULTS.reference(wildcards.gpu).report),
    shell:
        '"$PYTHON" -m tuner.report --results {params.folder:q} --out {params.out:q} '
        "--format markdown --processes {threads} 2>&1 | tee {log:q}"


FINISHED = RESULTS.gpu("{finished}")


# A finished folder's report, for the report target: drawn from the files the
# folder holds, with no input another rule makes. Through draw_report and
# plot_report its measurements would be collect's output, so a folder copied from another run
# (without this config's sweeps, or a peaks.parquet) planned the GPU stages, and
# a failed one's outputs (peaks.json, measurements.parquet) were deleted. Its
# files' sizes and times are a param, so an edit of one draws it again.


rule report_finished:
    output:
        stamp=touch(str(RESULTS.finished_report_stamp("{finished}"))),
        markdown=FINISHED.report_markdown,
        html=FINISHED.report_html,
        figures=report_figures(FINISHED),
    log:
        RESULTS.finished_report_log("{finished}"),
    wildcard_constraints:
        finished="[^/]+",
    conda:
        "../envs/tuner.yaml"
    threads: 4  # scaled down to --cores
    params:
        folder=lambda wildcards: str(RESULTS.gpu(wildcards.finished).path),
        out=lambda wildcards: str(RESULTS.gpu(wildcards.finished).report),
        inputs=lambda wildcards: finished_inputs(RESULTS.gpu(wildcards.finished)),
        code=report_code_digest(),
    shell:
        '"$PYTHON" -m tuner.report --results {params.folder:q} --out {params.out:q} '
        "--processes {threads} 2>&1 | tee {log:q}"


ruleorder: plot_report > report_finished
ruleorder: draw_report > report_finished


rule report:
    input:
        [
            RESULTS.finished_report_stamp(folder.path.name)
            for folder in finished_result_folders()
        ],
        [RESULTS.reference_report_stamp(gpu) for gpu in reference_folders()],
