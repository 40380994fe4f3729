set -u
source .whl/setup.sh
git add -A >/dev/null 2>&1
S=$OUT/summary.txt
git ls-files -z | xargs -0 sha256sum > /tmp/before.sha
for ex in saxpy transpose fir; do
  rm -rf results/nvidia-* results/.reference-reports results/.finished-reports
  t0=$(date +%s); snakemake --cores 1 --configfile examples/$ex/config.yaml > $OUT/example-$ex.log 2>&1; rc=$?
  echo "example $ex: rc=$rc $(( $(date +%s)-t0 )) s: $(grep -E 'steps \(100%\) done' $OUT/example-$ex.log | tail -1)" | tee -a $S
  python -c "
import glob, pandas as pd
f=[p for p in glob.glob('results/*/measurements.parquet') if '/reference/' not in p][0]
d=pd.read_parquet(f); print('  rows', len(d), dict(d.status.value_counts()), 'sources', sorted(d.source.unique()))" 2>&1 | tee -a $S
done
python -m pytest -q -m gpu -p no:cacheprovider -rs 2>&1 | grep -E "SKIPPED|passed" | tee -a $S
git ls-files -z | xargs -0 sha256sum > /tmp/after.sha
cmp -s /tmp/before.sha /tmp/after.sha && echo "tracked files unchanged" | tee -a $S || (echo "tracked files changed:"; diff /tmp/before.sha /tmp/after.sha | head) | tee -a $S
