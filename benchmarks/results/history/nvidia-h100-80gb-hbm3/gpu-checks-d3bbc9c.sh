set -u
S=$OUT/summary.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a $S
sha256sum workflow/rules/report.smk workflow/rules/common.smk tuner/settings/parse.py | tee -a $S
git ls-files -z | xargs -0 sha256sum > /tmp/before.sha
rm -rf results/nvidia-* results/.reference-reports results/.finished-reports
t0=$(date +%s); snakemake --cores 1 > $OUT/pipeline.log 2>&1; echo "snakemake --cores 1 rc=$? $(( $(date +%s)-t0 )) s: $(grep -E 'steps \(100%\) done' $OUT/pipeline.log | tail -1)" | tee -a $S
t0=$(date +%s); snakemake --cores 1 report > $OUT/report.log 2>&1; echo "snakemake --cores 1 report rc=$? $(( $(date +%s)-t0 )) s: $(grep -E 'steps \(100%\) done|Nothing to be done' $OUT/report.log | tail -1); jobs: $(grep -E '^(report_finished|report_reference|plot_report|peaks|collect|sweep_[a-z_]+|tune_[a-z_0-9]+) +[0-9]+' $OUT/report.log | tr -s ' ' | tr '\n' ';')" | tee -a $S
python - <<'PY' 2>&1 | tee -a $S
import pandas as pd, glob
f = [p for p in glob.glob("results/*/measurements.parquet") if "/reference/" not in p][0]
d = pd.read_parquet(f)
st = d[d.source == "study:reduce_int32"]; sw = d[d.source == "sweep:reduce_space"]
best, opt = st.bandwidth_gbs.max(), sw.bandwidth_gbs.max()
first = next(i for i, v in enumerate(st.sort_values("trial").bandwidth_gbs, 1) if v >= 0.99 * opt)
print(f"rows {len(d)} {dict(d.status.value_counts())}; study best {best:.1f} GB/s = {best/opt:.4f} of the reduce_space sweep's {opt:.1f}; first within 1 % at evaluation {first} of {len(st)}")
PY
git ls-files -z | xargs -0 sha256sum > /tmp/after.sha
cmp -s /tmp/before.sha /tmp/after.sha && echo "tracked files unchanged" | tee -a $S || (echo "tracked files changed:"; diff /tmp/before.sha /tmp/after.sha | head) | tee -a $S
