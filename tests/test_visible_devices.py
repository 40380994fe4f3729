"""The devices a config is checked against are the ones CUDA will use: NVML
numbers every GPU of the host, CUDA only those CUDA_VISIBLE_DEVICES lists."""

from __future__ import annotations

import sys
import types

import pytest

from tuner.device import describe
from tuner.device.describe import visible_order

UUIDS = ["GPU-aaaa-0000", "GPU-bbbb-1111", "GPU-cccc-2222", "GPU-cccd-3333"]


@pytest.mark.parametrize(
    "listed, order",
    [
        (None, [0, 1, 2, 3]),
        ("2", [2]),
        ("3,0", [3, 0]),
        (" 1 , 2 ", [1, 2]),
        ("GPU-bbbb", [1]),  # a unique prefix
        ("GPU-ccc", []),  # not unique: no device, as CUDA
        ("0,9,1", [0]),  # the list ends at the first entry naming no device
        ("1,1,2", []),  # a device named twice: CUDA fails to start, no device
        ("0,0", []),
        ("GPU-BBBB", [1]),  # the hex digits in either case
        ("GPU-", []),  # no digits: no device
        ("gpu-bbbb", []),
        ("+1", [1]),  # an index is its leading digits, as strtol reads them
        ("0x2", [0]),
        ("2a", [2]),
        ("1;0", [1]),
        ("\u00b2", []),  # a superscript two is no digit to CUDA
        ("", []),
        ("-1", []),
        ("MIG-1234abcd", [0, 1, 2, 3]),
    ],
)
def test_the_visible_devices_in_cudas_order(listed, order):
    assert visible_order(UUIDS, listed) == order


def test_the_facts_a_config_is_checked_against_are_the_visible_devices(monkeypatch):
    cards = [("NVIDIA A100-SXM4-40GB", 40, (8, 0)), ("NVIDIA H100 80GB HBM3", 80, (9, 0))]
    fake = types.SimpleNamespace(
        nvmlInit=lambda: None,
        nvmlShutdown=lambda: None,
        nvmlDeviceGetCount=lambda: len(cards),
        nvmlDeviceGetHandleByIndex=lambda i: i,
        nvmlDeviceGetUUID=lambda h: f"GPU-{h}{h}{h}",
        nvmlDeviceGetName=lambda h: cards[h][0],
        nvmlDeviceGetMemoryInfo=lambda h: types.SimpleNamespace(total=cards[h][1] << 30),
        nvmlDeviceGetCudaComputeCapability=lambda h: cards[h][2],
    )
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    facts = describe.probe_devices()
    assert facts.count == 1 and facts.names == ("NVIDIA H100 80GB HBM3",) and facts.capability_of(0) == "9.0"
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    facts = describe.probe_devices()
    assert facts.count == 2 and facts.names[0].startswith("NVIDIA A100")
