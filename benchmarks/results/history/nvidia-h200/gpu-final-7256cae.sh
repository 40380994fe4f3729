set -u
source .whl/setup.sh
git add -A >/dev/null 2>&1
S=$OUT/summary.txt
echo "tree of $(git log --oneline -1 | cut -c1-7), $(git status --short | wc -l) paths differ from it" | tee -a $S
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a $S
git ls-files -z | xargs -0 sha256sum > /tmp/before.sha
t0=$(date +%s); python -m pytest -q -m gpu -p no:cacheprovider -rs > $OUT/gpu-tests.log 2>&1; echo "pytest -m gpu rc=$? $(( $(date +%s)-t0 )) s: $(tail -1 $OUT/gpu-tests.log)" | tee -a $S
rm -rf results/nvidia-* results/transpose results/.reference-reports results/.finished-reports
t0=$(date +%s); snakemake --cores 1 > $OUT/pipeline.log 2>&1; echo "snakemake --cores 1 rc=$? $(( $(date +%s)-t0 )) s: $(grep -E 'steps \(100%\) done' $OUT/pipeline.log | tail -1)" | tee -a $S
t0=$(date +%s); snakemake --cores 1 --configfile examples/transpose/config.yaml > $OUT/example-transpose.log 2>&1; echo "transpose example rc=$? $(( $(date +%s)-t0 )) s: $(grep -E 'steps \(100%\) done' $OUT/example-transpose.log | tail -1)" | tee -a $S
python - <<'PY' 2>&1 | tee -a $S
import pandas as pd, glob, json
def first_hit(f, study, sweep, col):
    d = pd.read_parquet(f)
    st = d[d.source == f"study:{study}"]; sw = d[d.source == f"sweep:{sweep}"]
    best, opt = st[col].max(), sw[col].max()
    first = next((i for i, v in enumerate(st.sort_values("trial")[col], 1) if v >= 0.99 * opt), None)
    print(f"{f}: rows {len(d)} {dict(d.status.value_counts())}; study {study} best {best:.1f} = {best/opt:.4f} of sweep {sweep}'s {opt:.1f}; first within 1 % at evaluation {first} of {len(st)}")
    b = json.load(open(f.replace("measurements.parquet", "best.json")))
    print(f"  best.json: {len(b['problems'])} problems")
f = [p for p in glob.glob("results/nvidia-*/measurements.parquet")][0]
first_hit(f, "reduce_int32", "reduce_space", "bandwidth_gbs")
f = glob.glob("results/transpose/*/measurements.parquet")[0]
first_hit(f, "transpose_search", "transpose_space", "bandwidth_gbs")
PY
git ls-files -z | xargs -0 sha256sum > /tmp/after.sha
cmp -s /tmp/before.sha /tmp/after.sha && echo "tracked files unchanged" | tee -a $S || (echo "tracked files changed:"; diff /tmp/before.sha /tmp/after.sha | head) | tee -a $S
