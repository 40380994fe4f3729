set -u
source .whl/setup.sh
S=$OUT/summary.txt
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a $S
rm -rf results/transpose-tiles
t0=$(date +%s); snakemake --cores 1 --configfile benchmarks/configs/transpose_tiles.yaml > $OUT/tiles.log 2>&1; echo "transpose_tiles rc=$? $(( $(date +%s)-t0 )) s: $(grep -E 'steps \(100%\) done' $OUT/tiles.log | tail -1)" | tee -a $S
python - <<'PY' 2>&1 | tee -a $S
import pandas as pd, glob
f = glob.glob("results/transpose-tiles/*/measurements.parquet")[0]
d = pd.read_parquet(f)
st = d[d.source == "study:transpose_tiles_search"].sort_values("trial"); sw = d[d.source == "sweep:transpose_tiles_space"]
opt = sw.bandwidth_gbs.max(); o = sw.loc[sw.bandwidth_gbs.idxmax()]
print(f"sweep: {len(sw)} rows {dict(sw.status.value_counts())}; optimum {opt:.1f} GB/s at {o.params if 'params' in o else ''}; {int((sw.bandwidth_gbs >= 0.99*opt).sum())} within 1 %")
first = next((i for i, v in enumerate(st.bandwidth_gbs, 1) if v >= 0.99 * opt), None)
print(f"study: {len(st)} rows; best {st.bandwidth_gbs.max():.1f} = {st.bandwidth_gbs.max()/opt:.4f}; first within 1 % at evaluation {first}")
print("study trajectory:", [round(v/opt, 3) for v in st.bandwidth_gbs])
PY
cp results/transpose-tiles/*/report.md $OUT/ 2>/dev/null
