#!/bin/bash
# Fill .whl/ in the current checkout with what an offline GPU machine needs to run the yardstick
# benchmarks: the pins of benchmarks/device-wheels.txt (Python 3.12 x86_64 manylinux wheels,
# without their dependencies: the list names every one), the PyCUDA wheel built against CUDA 13.0
# and setup.sh from ../shared. Small enough to carry beside the working tree (64 MiB in all);
# --all first fetches the whole shared set (../shared/device/fetch-wheels.sh: Optuna, Snakemake,
# for the pipeline), which is not. Run from anywhere in the checkout:
#   bash benchmarks/fetch-device-wheels.sh [--all]
# then carry ".whl" in the device call and start its command with
#   source .whl/setup.sh &&
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SHARED=${SHARED_DIR:-$ROOT/../shared}
cd "$ROOT"
if [ ! -f "$SHARED/device/setup.sh" ]; then
  echo "error: $SHARED/device/setup.sh not found: set SHARED_DIR to the shared folder (with device/ and wheels/)" >&2
  exit 2
fi
if [ "${1:-}" = "--all" ]; then
  bash "$SHARED/device/fetch-wheels.sh"
fi
mkdir -p .whl
GITDIR=$(git rev-parse --git-dir 2>/dev/null || true)
if [ -n "$GITDIR" ]; then mkdir -p "$GITDIR/info"; grep -qx "/.whl/" "$GITDIR/info/exclude" 2>/dev/null || echo "/.whl/" >> "$GITDIR/info/exclude"; fi
PINS=$(grep -v '^\s*#' benchmarks/device-wheels.txt | grep -v '^\s*$')
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64 \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform any \
  -d .whl $PINS 2>&1 | grep -v '^WARNING' || true
cp "$SHARED"/wheels/pycuda-*.whl .whl/
cp "$SHARED/device/setup.sh" .whl/setup.sh
missing=0
for pin in $PINS; do
  name=$(echo "${pin%%==*}" | tr 'A-Z-' 'a-z_')
  ls .whl/ | tr 'A-Z' 'a-z' | grep -q "^${name}-${pin##*==}-" || { echo "missing wheel: $pin" >&2; missing=1; }
done
[ "$missing" = 0 ] || exit 1
echo "wheels in .whl: $(ls .whl/*.whl | wc -l), $(du -sh .whl | cut -f1)"
