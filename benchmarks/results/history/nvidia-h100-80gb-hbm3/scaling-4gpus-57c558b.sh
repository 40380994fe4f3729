source .whl/setup.sh
git rev-parse --short HEAD; nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c
python -c "import threadpoolctl; print('threadpoolctl', threadpoolctl.__version__)"
for i in 1 2 3; do
  echo "== run $i: python benchmarks/scaling.py --work /tmp/s$i --gpus 0,1,2,3 --budget 1536"
  timeout 170 python benchmarks/scaling.py --work /tmp/s$i --gpus 0,1,2,3 --budget 1536 > $OUT/run$i.txt 2>&1; echo "rc $?"
  tail -6 $OUT/run$i.txt
  grep -h "asks:" /tmp/s$i/*-gpus/tune.log | sed 's/.*; asks/asks/' >> $OUT/run$i.txt
  cp /tmp/s$i/scaling.json $OUT/scaling-run$i.json 2>/dev/null
done
grep -h "asks" $OUT/run1.txt
