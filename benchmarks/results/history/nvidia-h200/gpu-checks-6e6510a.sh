set -u
# The screen lines need benchmarks/screen/ of commit 9e6d64d and copies of the hub's files under hub/.
source .whl/setup.sh
git add -A >/dev/null 2>&1
S=$OUT/summary.txt
for t in convA100 convA4000 convA6000 rtx reduce_hard_2e24_h200; do FRAC=0.05 JOBS=16 OUTFILE=$OUT/s3-$t.json HUB_DIR=hub RTX_CACHE=hub/rtx2080ti.json timeout 70 python benchmarks/screen/screen.py $t ucbS_sp100,ucbS8 0:200 2>&1 | grep -v "^[0-9]* s$" | cut -c1-60 | tee -a $S; done
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
first = next(i for i, v in enumerate(st.sort_values("trial").bandwidth_gbs, 1) if v >= 0.99 * opt)
print(f"{f}: rows {len(d)} {dict(d.status.value_counts())}; study best {best:.1f} GB/s = {best/opt:.4f} of the reduce_space sweep's {opt:.1f}; first within 1 % at evaluation {first} of {len(st)}")
b = json.load(open(f.replace("measurements.parquet", "best.json")))
ties = [p.get("tie_count") for p in b["problems"]]
print(f"best.json: {len(b['problems'])} problems, tie counts {ties}")
PY
git ls-files -z | xargs -0 sha256sum > /tmp/after.sha
cmp -s /tmp/before.sha /tmp/after.sha && echo "tracked files unchanged" | tee -a $S || (echo "tracked files changed:"; diff /tmp/before.sha /tmp/after.sha | head) | tee -a $S
cp results/nvidia-*/best.json $OUT/ 2>/dev/null
