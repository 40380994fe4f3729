#!/bin/bash
# Fill .whl/ with what the offline GPU machine lacks: first the shared wheels
# (../shared/device/fetch-wheels.sh: its pinned list, the PyCUDA wheel built
# there, setup.sh), then this project's own list, device-wheels.txt beside this
# script (the shared list plus the report's and the benchmarks' packages),
# downloaded the same way: Python 3.12 x86_64 wheels, no dependencies resolved.
# Run from the project root:
#   bash workflow/envs/fetch-wheels.sh
# Then start each command on the GPU machine with
#   source .whl/setup.sh &&
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
SHARED=${SHARED_DEVICE:-$(cd "$HERE/../.." && pwd)/../shared/device}
[ -f "$SHARED/fetch-wheels.sh" ] || { echo "no $SHARED/fetch-wheels.sh (set SHARED_DEVICE to the folder that holds it)"; exit 1; }
bash "$SHARED/fetch-wheels.sh"
# connection_pool has no wheel on the index: the shared folder carries it (copied by the script above).
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64 \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux_2_12_x86_64 \
  --platform manylinux2010_x86_64 --platform manylinux_2_5_x86_64 --platform manylinux1_x86_64 --platform any \
  -d .whl $(grep -v '^#' "$HERE/device-wheels.txt" | grep -v '^connection_pool' | grep -v '^$') 2>&1 | grep -v '^WARNING' || true
echo "wheels in .whl: $(ls .whl/*.whl | wc -l), $(du -sh .whl | cut -f1)"
