source .whl/setup.sh
echo "CUDA_VISIBLE_DEVICES=[${CUDA_VISIBLE_DEVICES-unset}]"
nvidia-smi --query-gpu=name,uuid --format=csv,noheader
U=$(nvidia-smi --query-gpu=uuid --format=csv,noheader | head -1)
for v in unset 0 1 "${U:0:12}" ""; do
  if [ "$v" = unset ]; then env -u CUDA_VISIBLE_DEVICES python -c "from tuner.device.describe import probe_devices as p; print('unset', p())"
  else CUDA_VISIBLE_DEVICES="$v" python -c "from tuner.device.describe import probe_devices as p; print(repr('$v'), p())"; fi
done
python -m tuner describe 2>&1 | tail -1
python -m pytest -q -p no:cacheprovider tests/test_visible_devices.py 2>&1 | tail -1
