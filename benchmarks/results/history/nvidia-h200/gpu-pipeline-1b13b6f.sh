set -u
# The centre climb on one GPU: the convolution benchmark over 200 seeds on the host CPUs, then the shipped pipeline (the script of 7042512).
source .whl/setup.sh
t0=$SECONDS
python benchmarks/search.py --tables --hub hubdata/convolution_milo --seeds 200 --strategies ordinal_global --orders ascending --no-warm --merge benchmarks/results/search-hub-conv-200seeds.json --out benchmarks/results --name search-hub-conv-200seeds > $OUT/conv200.log 2>&1
echo "conv200 rc=$? $((SECONDS-t0)) s"
cp benchmarks/results/search-hub-conv-200seeds.* $OUT/
OUT=$OUT timeout 330 bash benchmarks/results/history/nvidia-h200/gpu-pipeline-7042512.sh > /dev/null 2>&1
cat $OUT/summary.txt
