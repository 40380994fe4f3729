"""On the GPU: outputs compared on the device give the host's verdicts, on
right outputs, on one changed element and on outputs never written."""

from __future__ import annotations

import numpy as np
import pytest

from tuner.families import REGISTRY, Problem
from tuner.measure.compile import compile_variant

pytestmark = pytest.mark.gpu

N = (1 << 20) + 37  # not a multiple of any block x unroll x vector width

CASES = [
    ("vector_add", "int8", {"vector_width": 4, "offset": 11}),
    ("vector_add", "float16", {"vector_width": 8, "offset": 11}),
    ("vector_add", "float32", {"vector_width": 4}),
    ("vector_add", "int32", {}),
    ("copy", "float32", {"variant": "copy", "offset": 3}),
    ("offset", "float32", {"variant": "write_offset", "offset": 11}),
    ("offset", "float32", {"variant": "read_offset", "offset": 11}),
    ("layout", "float32", {"variant": "aos"}),
    ("layout", "float32", {"variant": "soa"}),
]


def bound(bench, family_name, dtype, changes):
    family = REGISTRY[family_name]
    problem = Problem(family_name, dtype, N)
    session = bench.problem(family, problem)
    cfg = {p.name: p.default for p in family.params} | changes
    assert not family.violations(cfg, problem), family.violations(cfg, problem)
    compiled = compile_variant(family, cfg, problem, arch=bench.gpu.arch, cache_dir=bench.cache_dir)
    function = bench.gpu.function(compiled.cubin, compiled.kernel, family.arg_types)
    launch = family.bind(cfg, problem, session.buffers, function, bench.gpu)
    assert launch.output is not None, f"{family_name} {cfg} should be checked on the device"
    return family, session, launch


def host_verdict(family, session, launch):
    return family.verify(launch.fetch(), session.expected, session.inputs)


@pytest.mark.parametrize(("family_name", "dtype", "changes"), CASES, ids=[f"{f}-{d}-{i}" for i, (f, d, _) in enumerate(CASES)])
def test_device_verdicts_match_the_host(bench, family_name, dtype, changes):
    family, session, launch = bound(bench, family_name, dtype, changes)
    gpu, output = bench.gpu, launch.output
    gpu.synchronize()
    # Never written: the poison fails both ways.
    unwritten = session.verdict(launch)
    assert not unwritten.ok and not host_verdict(family, session, launch).ok

    launch.run()
    gpu.synchronize()
    on_device, on_host = session.verdict(launch), host_verdict(family, session, launch)
    assert on_device.ok and on_host.ok, (on_device, on_host)
    assert on_device.error == pytest.approx(on_host.error, rel=1e-6, abs=1e-12)

    # One element changed far beyond any rounding: both fail, and agree on how much.
    index = output.count // 3
    address = int(output.ptr) + index * output.dtype.itemsize
    current = np.empty(1, output.dtype)
    gpu.cuda.memcpy_dtoh(current, address)
    changed = (~current.view(f"u{output.dtype.itemsize}")).view(output.dtype) if output.tolerance is None else current + 1000
    gpu.cuda.memcpy_htod(address, changed.astype(output.dtype))
    on_device, on_host = session.verdict(launch), host_verdict(family, session, launch)
    assert not on_device.ok and not on_host.ok, (on_device, on_host)
    if output.tolerance is None:
        assert on_device.error == on_host.error == 1.0
    else:
        assert on_device.error == pytest.approx(on_host.error, rel=1e-6)


def test_the_host_path_stays_available(bench):
    """With check_on_device off, the same launch is fetched and verified on the host."""
    family, session, launch = bound(bench, "vector_add", "float32", {})
    launch.run()
    bench.gpu.synchronize()
    bench.check_on_device = False
    try:
        fetched = []
        original = launch.fetch
        launch.fetch = lambda: fetched.append(1) or original()
        assert session.verdict(launch).ok and fetched == [1]
    finally:
        bench.check_on_device = True
