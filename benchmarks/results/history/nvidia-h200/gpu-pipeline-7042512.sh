set -u
# The ordered Parzen kernels on one GPU: the shipped pipeline from an empty results folder.
source .whl/setup.sh
git add -A >/dev/null 2>&1
S=$OUT/summary.txt
echo "tree of $(git log --oneline -1 | cut -c1-7), $(git status --short | wc -l) paths differ from it" | tee -a $S
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a $S
git ls-files -z | xargs -0 sha256sum > /tmp/before.sha
rm -rf results/nvidia-* results/.reference-reports results/.finished-reports
t0=$(date +%s); snakemake --cores 1 > $OUT/pipeline.log 2>&1; echo "snakemake --cores 1 rc=$? $(( $(date +%s)-t0 )) s: $(grep -E 'steps \(100%\) done' $OUT/pipeline.log | tail -1)" | tee -a $S
python - <<'PY' 2>&1 | tee -a $S
import pandas as pd, glob, json
f = [p for p in glob.glob("results/*/measurements.parquet") if "/reference/" not in p][0]
d = pd.read_parquet(f)
st = d[d.source == "study:reduce_int32"]; sw = d[d.source == "sweep:reduce_space"]
best, opt = st.bandwidth_gbs.max(), sw.bandwidth_gbs.max()
first = next((i for i, v in enumerate(st.sort_values("trial").bandwidth_gbs, 1) if v >= 0.99 * opt), None)
print(f"{f}: rows {len(d)} {dict(d.status.value_counts())}; study best {best:.1f} GB/s = {best/opt:.4f} of the reduce_space sweep's {opt:.1f}; first within 1 % at evaluation {first} of {len(st)}")
b = json.load(open(f.replace("measurements.parquet", "best.json")))
print(f"best.json: {len(b['problems'])} problems")
PY
git ls-files -z | xargs -0 sha256sum > /tmp/after.sha
cmp -s /tmp/before.sha /tmp/after.sha && echo "tracked files unchanged" | tee -a $S || (echo "tracked files changed:"; diff /tmp/before.sha /tmp/after.sha | head) | tee -a $S
