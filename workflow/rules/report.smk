# Stage 6: figures and the report document, from the Parquet dataset alone
# (no GPU needed). `snakemake --cores 1 report` rebuilds every finished folder.


rule plot_report:
    input:
        measurements="{folder}/measurements.parquet",
        device="{folder}/device.json",
        peaks="{folder}/peaks.json",
        profiles=lambda wildcards: PROFILES if wildcards.folder == GPU_DIR else [],
    output:
        markdown="{folder}/report/report.md",
        html="{folder}/report/report.html",
        figures=[
            report(
                f"{{folder}}/report/{stem}.png",
                caption=f"../report/captions/{stem}.rst",
                category="Figures",
            )
            for stem in EXPECTED_FIGURES
        ],
    log:
        "{folder}/logs/report.log",
    conda:
        "../envs/tuner.yaml"
    shell:
        '"$PYTHON" -m tuner.report --results {wildcards.folder:q} --out {wildcards.folder:q}/report 2>&1 | tee {log:q}'


rule report:
    input:
        [
            path
            for folder in finished_result_folders()
            for path in report_outputs(folder)
        ],
