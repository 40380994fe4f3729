# What made this folder (on the device, from the project root; /tmp/keep/hard is this folder).
C=benchmarks/configs/reduce_hard_2e24.yaml
mkdir -p /tmp/keep/hard
sed "s#^results_dir: results#results_dir: /tmp/hard#" $C > /tmp/hard.yaml
python -m tuner describe --config /tmp/hard.yaml > /tmp/keep/hard/describe.log 2>&1
# The study first, from an empty cubin cache (it compiles ahead while it measures), then the exhaustive sweep.
( time python -m tuner tune reduce_hard_2e24 --config /tmp/hard.yaml ) > /tmp/keep/hard/tune.log 2>&1
( time python -m tuner compile --config /tmp/hard.yaml ) > /tmp/keep/hard/compile.log 2>&1
( time python -m tuner sweep reduce_hard_2e24 --config /tmp/hard.yaml ) > /tmp/keep/hard/sweep.log 2>&1
cp /tmp/hard/*/sweeps/reduce_hard_2e24.parquet /tmp/keep/hard/sweep.parquet; cp /tmp/hard/*/studies/reduce_hard_2e24.parquet /tmp/keep/hard/study.parquet
python - <<'PY' | tee /tmp/keep/hard/summary.txt
import glob
import pandas as pd
s = pd.read_parquet(glob.glob("/tmp/hard/*/sweeps/reduce_hard_2e24.parquet")[0])
t = pd.read_parquet(glob.glob("/tmp/hard/*/studies/reduce_hard_2e24.parquet")[0]).sort_values("trial").reset_index(drop=True)
ok = s[s.status == "ok"]; best = ok.bandwidth_gbs.max(); within = int((ok.bandwidth_gbs >= 0.99 * best).sum())
print(f"sweep: {len(s)} rows, {len(ok)} ok, optimum {best:.1f} GB/s, {within} within 1 %")
print(f"study: {len(t)} rows, {(t.status == 'ok').sum()} ok, best {t.bandwidth_gbs.max():.1f} GB/s = {t.bandwidth_gbs.max() / best:.4f} of the sweep's optimum")
hits = t.index[(t.status == "ok") & (t.bandwidth_gbs >= 0.99 * best)]
if len(hits):
    row = t.loc[hits[0]]
    print(f"first study row within 1 % of the sweep's optimum: evaluation {hits[0] + 1}, {row.stage_elapsed_s:.1f} s after the tune command started (compile {t.compile_s[: hits[0] + 1].sum():.1f} s up to it), {row.bandwidth_gbs:.1f} GB/s")
else:
    print("no study row within 1 % of the sweep's optimum")
PY
tail -4 /tmp/keep/hard/tune.log; tail -4 /tmp/keep/hard/sweep.log
