set -u
source .whl/setup.sh
git add -A >/dev/null 2>&1  # the lent machine's git index names an older commit's files
S=$OUT/summary.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a $S
echo "cpus: $(nproc)" | tee -a $S
python benchmarks/results/history/nvidia-h200/visible-devices-check.py > $OUT/visible-devices.txt 2>&1; tail -1 $OUT/visible-devices.txt | tee -a $S
grep DIFFERENT $OUT/visible-devices.txt | tee -a $S
git ls-files -z | xargs -0 sha256sum > /tmp/before.sha
t0=$(date +%s); python -m pytest -q -m gpu -p no:cacheprovider > $OUT/gpu-tests.log 2>&1; echo "pytest -m gpu rc=$? $(( $(date +%s)-t0 )) s: $(tail -1 $OUT/gpu-tests.log)" | tee -a $S
grep -E "^(FAILED|ERROR)" $OUT/gpu-tests.log | head -20 | tee -a $S
for ex in saxpy transpose fir; do
  rm -rf results/$ex
  t0=$(date +%s); snakemake --cores 1 --configfile examples/$ex/config.yaml > $OUT/example-$ex.log 2>&1; rc=$?
  echo "example $ex: rc=$rc $(( $(date +%s)-t0 )) s: $(grep -E 'steps \(100%\) done' $OUT/example-$ex.log | tail -1)" | tee -a $S
  python - $ex <<'PY' 2>&1 | tee -a $S
import glob, json, sys
import pandas as pd
ex = sys.argv[1]
for f in glob.glob(f"results/{ex}/*/best.json"):
    d = pd.read_parquet(f.replace("best.json", "measurements.parquet"))
    b = json.load(open(f))
    entries = b["problems"]
    e = entries[0] if isinstance(entries, list) else entries
    sw = d[d.source.str.startswith("sweep:")]; st = d[d.source.str.startswith("study:")]
    opt = sw.bandwidth_gbs.max()
    first = next((i for i, v in enumerate(st.sort_values("trial").bandwidth_gbs, 1) if v >= 0.99 * opt), None)
    print(f"  {f}: rows {len(d)} {dict(d.status.value_counts())}; best params {e.get('params')}; sweep best {opt:.1f} GB/s; study best {st.bandwidth_gbs.max():.1f} ({st.bandwidth_gbs.max()/opt:.4f}), first within 1 % at evaluation {first} of {len(st)}")
PY
done
git ls-files -z | xargs -0 sha256sum > /tmp/after.sha
cmp -s /tmp/before.sha /tmp/after.sha && echo "tracked files unchanged" | tee -a $S || (echo "tracked files changed:"; diff /tmp/before.sha /tmp/after.sha | head) | tee -a $S
cp -r results/saxpy results/transpose results/fir $OUT/ 2>/dev/null; rm -f $OUT/*/*/*.db $OUT/*/*/*.journal 2>/dev/null
cat $S
