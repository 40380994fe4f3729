#!/usr/bin/env bash
# The wheel on a GPU machine, away from the checkout: install dist/tuner-*.whl
# (built elsewhere with `python -m build`) into a folder of its own, then in
# /tmp/x, a folder outside the checkout, `tuner init --kernel` on a kernel of
# one's own (examples/saxpy/saxpy.cu, copied there), the user's edits (the
# reference, and the values of VEC), check-family on the GPU, `snakemake
# --cores 1` to the report, and the notebook call. Prints each step's wall,
# best.json and best_configs.h; writes the same to $OUT/wheel-install-gpu.txt.
#
# From the project root, with the offline machine's wheels in .whl/ and the
# wheel in dist/:   bash benchmarks/wheel_install_gpu.sh
# BUILD_PYCUDA=1 also times a build of PyCUDA from a pycuda-*.tar.gz in dist/.
set -euo pipefail
ROOT=$(pwd)
OUT=${OUT:-/tmp/wheel-install-gpu}
mkdir -p "$OUT"
exec > >(tee "$OUT/wheel-install-gpu.txt") 2>&1

wheel=$(ls "$ROOT"/dist/tuner-*-py3-none-any.whl 2>/dev/null | tail -1 || true)
[ -n "$wheel" ] || { echo "no dist/tuner-*-py3-none-any.whl: build it first (python -m build) and carry dist/"; exit 1; }

step() {  # step NAME COMMAND...: run it, print its wall
    local start end
    start=$(date +%s.%N)
    echo "+ ${*:2}"
    "${@:2}"
    end=$(date +%s.%N)
    awk -v name="$1" -v s="$start" -v e="$end" 'BEGIN { printf "wall %s: %.1f s\n", name, e - s }'
}

# The dependencies the machine lacks, from .whl/ into /tmp/site; setup.sh also puts the checkout
# on PYTHONPATH, which this test must not have: the path is the wheels and the installed package only.
# shellcheck disable=SC1091
source .whl/setup.sh
TARGET=/tmp/tuner-wheel
rm -rf "$TARGET"
step install python3 -m pip install -q --no-index --no-deps --no-compile --target "$TARGET" "$wheel"
export PYTHONPATH="$TARGET:/tmp/site"
export PATH="$TARGET/bin:/tmp/site/bin:$PATH"
python3 --version
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || true

rm -rf /tmp/x && mkdir -p /tmp/x
cp "$ROOT/examples/saxpy/saxpy.cu" /tmp/x/
cd /tmp/x
python3 - <<'EOF'
import tuner, tuner.resources as r
print(f"tuner {tuner.__version__} from {tuner.__file__}; its files: {r.root()}; checkout: {r.checkout_root()}")
assert r.checkout_root() is None and str(r.root()).startswith("/tmp/tuner-wheel/"), "the package must come from the wheel"
EOF
tuner check-install || true

step init tuner init --kernel saxpy.cu
# What a user does next: write the reference, and give VEC the values to try.
python3 - <<'EOF'
from pathlib import Path
spec = Path("saxpy.py")
text = spec.read_text()
reference = '    raise NotImplementedError("saxpy.py: write saxpy_reference, what saxpy computes, in numpy")'
assert reference in text and '"VEC": [4],' in text
spec.write_text(text.replace(reference, '    return a * x.astype("float64") + y').replace('"VEC": [4],', '"VEC": [4, 1, 2],'))
EOF
cat saxpy.py config.yaml Snakefile

step check-family python3 -m tuner check-family saxpy.py --gpu
step snakemake snakemake --cores 1
gpu_dir=$(dirname "$(ls results/*/best.json)")
echo "== $gpu_dir/best.json"; cat "$gpu_dir/best.json"
echo "== $gpu_dir/best_configs.h"; cat "$gpu_dir/best_configs.h"
echo "== $gpu_dir/report"; ls "$gpu_dir/report"
python3 - "$gpu_dir" <<'EOF'
import sys
import pandas as pd
rows = pd.read_parquet(f"{sys.argv[1]}/measurements.parquet")
print(rows.groupby(["source", "status"]).size().to_string())
EOF
mkdir -p "$OUT/x"
cp -r saxpy.py config.yaml Snakefile "$gpu_dir/best.json" "$gpu_dir/best_configs.h" "$gpu_dir/report/report.md" "$gpu_dir/logs" "$OUT/x/"

# The notebook call, from the same folder: the same measuring, in one process.
step notebook python3 - <<'EOF'
import tuner
from tuner.families import REGISTRY, load_family_paths

load_family_paths(["saxpy.py"])
tuned = tuner.tune(REGISTRY["saxpy"], {"VEC": [4], "block_size_x": [128, 256]}, n=1 << 24, results="results-notebook")
print(f"tuner.tune: {len(tuned.rows)} rows, {(tuned.rows.status == 'ok').sum()} ok, best {tuned.best} "
      f"at {tuned.best_row['bandwidth_gbs']:.0f} GB/s, in {tuned.folder}")
EOF

if [ "${BUILD_PYCUDA:-0}" = 1 ]; then
    sdist=$(ls "$ROOT"/dist/pycuda-*.tar.gz 2>/dev/null | tail -1 || true)
    if [ -n "$sdist" ]; then
        nproc
        step pycuda-build python3 -m pip wheel -q --no-deps --no-build-isolation --no-index -w /tmp/pycuda-wheel "$sdist"
    else
        echo "BUILD_PYCUDA=1: no dist/pycuda-*.tar.gz carried; skipped"
    fi
fi
