# One device call: GPU tests, a study-only plug-in pipeline, a warm start across sizes, the header example on two targets.
set -u
S=$OUT/summary.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a $S
git log --oneline -1 | sed 's/^/device git HEAD: /' | tee -a $S
sha256sum tuner/search/warm.py tuner/data/export.py tuner/measure/bench.py tuner/families/base.py | tee -a $S
# 1. GPU tests
t0=$(date +%s); python -m pytest -q -m gpu -p no:cacheprovider > $OUT/gpu-tests.txt 2>&1; echo "gpu tests rc=$? $(( $(date +%s)-t0 )) s: $(tail -1 $OUT/gpu-tests.txt)" | tee -a $S
# 2. saxpy example as a study alone (no sweeps)
python - <<'PY'
import yaml, os
c = yaml.safe_load(open("examples/saxpy/config.yaml"))
c.pop("sweeps")
for s in c["studies"].values():
    s.pop("compare_with_sweep", None)
c["family_paths"] = [os.path.abspath(os.path.join("examples/saxpy", p)) for p in c.get("family_paths", [])]
c["results_dir"] = "/tmp/os-results"
yaml.safe_dump(c, open("/tmp/onlystudy.yaml", "w"))
c = yaml.safe_load(open("config.yaml"))
st = c["studies"]["reduce_int32"]; st.pop("compare_with_sweep", None); st.pop("budget_fraction", None)
st.update(n=16777216, warm_start="results/reference/nvidia-h100-80gb-hbm3", budget_trials=30)
c["studies"] = {"r24": st}; c["sweeps"] = {}; c["results_dir"] = "/tmp/warm-results"
yaml.safe_dump(c, open("/tmp/warm24.yaml", "w"))
PY
t0=$(date +%s); snakemake --cores 1 --configfile /tmp/onlystudy.yaml > $OUT/onlystudy.log 2>&1; echo "study-only saxpy pipeline rc=$? $(( $(date +%s)-t0 )) s: $(grep -E 'steps \(100%\) done|Error' $OUT/onlystudy.log | tail -1)" | tee -a $S
G=$(ls /tmp/os-results | head -1); ls /tmp/os-results/$G | tr '\n' ' ' | sed 's/^/study-only folder: /' | tee -a $S; echo | tee -a $S
python -m tuner best --results /tmp/os-results/$G --out-dir /tmp/os-best 2>&1 | tail -3 | tee -a $S
python - <<'PY' 2>&1 | tee -a $S
import pandas as pd, glob
d = pd.read_parquet(glob.glob("/tmp/os-results/*/measurements.parquet")[0])
print("study-only rows:", len(d), dict(d.source.value_counts()), "status:", dict(d.status.value_counts()), "git_commit:", sorted(d.git_commit.dropna().unique()))
PY
# 3. warm start from the H100 reference folder (its reduce_space sweep at 2^28) for a study at 2^24
t0=$(date +%s); (python -m tuner describe --config /tmp/warm24.yaml && python -m tuner tune r24 --config /tmp/warm24.yaml) > $OUT/warm24.log 2>&1; echo "warm start 2^24 rc=$? $(( $(date +%s)-t0 )) s" | tee -a $S
python - <<'PY' 2>&1 | tee -a $S
import pandas as pd, glob
f = glob.glob("/tmp/warm-results/*/studies/*.parquet"); d = pd.read_parquet(f[0])
ok = d[d.status == "ok"]
print("warm study rows:", len(d), "ok:", len(ok), "first 5 GB/s:", [round(x) for x in d.bandwidth_gbs.head(5)], "best:", round(ok.bandwidth_gbs.max()), "at trial", int(ok.loc[ok.bandwidth_gbs.idxmax(), "trial"]), "git_commit:", sorted(d.git_commit.unique()))
PY
grep -i "warm" $OUT/warm24.log | head -3 | tee -a $S
# 4. the header example, tuned (sm_90) and built for another GPU (defaults), both run here
python -m tuner best --results results/reference/nvidia-h100-80gb-hbm3 --out-dir /tmp/h100-best > /dev/null
nvcc -O3 -arch=sm_90 -I /tmp/h100-best examples/use_header/vector_add.cu -o /tmp/va-tuned && /tmp/va-tuned | sed 's/^/header tuned: /' | tee -a $S
nvcc -O3 -arch=sm_90 -DTUNER_TARGET_SM=80 -I /tmp/h100-best examples/use_header/vector_add.cu -o /tmp/va-default && /tmp/va-default | sed 's/^/header defaults: /' | tee -a $S
cp /tmp/os-best/best.json $OUT/onlystudy-best.json 2>/dev/null
