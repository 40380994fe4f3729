"""CUDA's own count of devices under CUDA_VISIBLE_DEVICES values, beside visible_order's."""

import json
import os
import subprocess
import sys

import pynvml

pynvml.nvmlInit()
uuids = [pynvml.nvmlDeviceGetUUID(pynvml.nvmlDeviceGetHandleByIndex(i)) for i in range(pynvml.nvmlDeviceGetCount())]
uuids = [u.decode() if isinstance(u, bytes) else u for u in uuids]
pynvml.nvmlShutdown()
u = uuids[0]
values = [
    "0",
    "",
    " 0",
    "0 ",
    "00",
    "+0",
    "0x0",
    "0a",
    "0;0",
    "0,0",
    "1",
    "-1,0",
    "1,0",
    "0,1",
    "\u00b2",
    "GPU-",
    u[:12],
    "GPU-" + u[4:12].upper(),
    "gpu-" + u[4:12],
    u[4:12],
    u,
]
CODE = r"""
import ctypes, json, os, sys
cuda = ctypes.CDLL("libcuda.so.1")
rc = cuda.cuInit(0)
n = ctypes.c_int(0)
if rc == 0:
    cuda.cuDeviceGetCount(ctypes.byref(n))
from tuner.device.describe import visible_order
print(json.dumps({"rc": rc, "cuda": n.value if rc == 0 else 0,
                  "ours": len(visible_order(json.loads(sys.argv[1]), os.environ["CUDA_VISIBLE_DEVICES"]))}))
"""
bad = 0
for v in values:
    out = subprocess.run(
        [sys.executable, "-c", CODE, json.dumps(uuids)],
        env={**os.environ, "CUDA_VISIBLE_DEVICES": v},
        capture_output=True,
        text=True,
    )
    try:
        r = json.loads(out.stdout.strip().splitlines()[-1])
    except Exception:
        print(repr(v), "error", out.stderr[-300:])
        bad += 1
        continue
    same = r["cuda"] == r["ours"]
    bad += not same
    print(
        f"{v!r:26} cuInit rc {r['rc']:3}  CUDA devices {r['cuda']}  visible_order {r['ours']}  {'same' if same else 'DIFFERENT'}"
    )
print(f"{len(uuids)} GPU(s) by NVML; {len(values) - bad} of {len(values)} values read as CUDA reads them")
