"""nvcc compilation: the cache key, the ptxas report, compile errors."""

from __future__ import annotations

import shutil
import threading

import pytest

from tuner.families import REGISTRY, Problem
from tuner.families.base import KERNELS_DIR
from tuner.measure.compile import (
    CompileError,
    compile_all,
    compile_stage_running,
    compile_variant,
    kernel_parameters,
    module_key,
    nvcc_command,
    parse_ptxas_report,
    wait_for_compile_stage,
)

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")

PTXAS = """ptxas info    : Compiling entry function 'reduce_shuffle' for 'sm_90'
ptxas info    : Function properties for reduce_shuffle
    16 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 40 registers, used 1 barriers, 32 bytes smem, 376 bytes cmem[0]
"""


def test_parse_ptxas_report():
    assert parse_ptxas_report(PTXAS) == {"registers": 40, "shared_bytes": 32, "spill_bytes": 20, "local_bytes": 16}


def test_parse_ptxas_without_smem():
    log = (
        "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\nptxas info    : Used 20 registers, used 1 barriers\n"
    )
    assert parse_ptxas_report(log) == {"registers": 20, "shared_bytes": 0, "spill_bytes": 0, "local_bytes": 0}


def test_runtime_parameters_share_a_module():
    reduce = REGISTRY["reduce"]
    problem = Problem("reduce", "int32", 1 << 20)
    base = {p.name: p.default for p in reduce.params}
    assert module_key(reduce, base, problem) == module_key(reduce, base | {"offset": 11, "grid_blocks_per_sm": 4}, problem)
    assert module_key(reduce, base, problem) != module_key(reduce, base | {"vector_width": 4}, problem)


@needs_nvcc
def test_compile_is_cached_and_reports_resources(tmp_path):
    reduce = REGISTRY["reduce"]
    problem = Problem("reduce", "float32", 1 << 20)
    cfg = {p.name: p.default for p in reduce.params} | {"vector_width": 4, "unroll": 4}
    first = compile_variant(reduce, cfg, problem, arch="sm_90", cache_dir=tmp_path)
    assert first.registers > 0 and first.spill_bytes == 0 and first.kernel == "reduce_shuffle"
    mtime = (tmp_path / f"reduce-{first.key}.cubin").stat().st_mtime_ns
    again = compile_variant(reduce, cfg, problem, arch="sm_90", cache_dir=tmp_path)
    assert again == first
    assert (tmp_path / f"reduce-{first.key}.cubin").stat().st_mtime_ns == mtime  # not rebuilt
    other_arch = compile_variant(reduce, cfg, problem, arch="sm_80", cache_dir=tmp_path)
    assert other_arch.key != first.key


@needs_nvcc
def test_compile_error_is_reported_and_not_cached(tmp_path, monkeypatch):
    reduce = REGISTRY["reduce"]
    problem = Problem("reduce", "int32", 1 << 20)
    cfg = {p.name: p.default for p in reduce.params}
    monkeypatch.setattr(type(reduce), "defines", lambda self, c, p: {"REDUCE_SHUFFLE": "", "ELEM": "no_such_type"})
    with pytest.raises(CompileError, match="nvcc failed"):
        compile_variant(reduce, cfg, problem, arch="sm_90", cache_dir=tmp_path)
    assert not list(tmp_path.glob("*.cubin"))
    results = compile_all(reduce, [cfg], problem, arch="sm_90", cache_dir=tmp_path)
    assert isinstance(next(iter(results.values())), CompileError)


@pytest.mark.parametrize(
    "defines, output, message",
    [({"S": "$(touch {marker})"}, "k.cubin", "-DS: a define must hold none of $ ` \" \\ , or control characters"),
     ({"S": "`touch {marker}`"}, "k.cubin", "-DS: a define must hold none of"),
     ({"S": "1,block_size_x=7"}, "k.cubin", "-DS: a define must hold none of"),
     ({"S=1 -o /tmp/x S": "1"}, "k.cubin", "-DS=1 -o /tmp/x S: a define must be a C identifier"),
     ({"S": "1"}, "r$(touch {marker})/k.cubin", "nvcc's command line: an argument must hold none of")],
    ids=["dollar", "backtick", "comma", "name", "output-path"],
)  # fmt: skip
def test_nvcc_is_never_given_what_its_shell_would_run(tmp_path, defines, output, message):
    """nvcc runs its steps through a shell with each argument in double quotes: a
    define or path with $( ), backticks or a comma (another define) is refused,
    and nothing runs (the marker file is never made)."""
    marker = tmp_path / "ran"
    defines = {k.replace("{marker}", str(marker)): v.replace("{marker}", str(marker)) for k, v in defines.items()}
    source = tmp_path / "k.cu"
    source.write_text('extern "C" __global__ void k() {}\n')
    with pytest.raises(CompileError) as refused:
        nvcc_command(source, defines, (), "sm_90", tmp_path / output.replace("{marker}", str(marker)))
    assert str(refused.value).startswith(message.replace("{marker}", str(marker)))
    assert not marker.exists()


@needs_nvcc
def test_nvcc_output_that_is_not_utf8_is_a_compile_error(tmp_path):
    """A source of its own bytes (Latin-1 text in an #error) echoed by nvcc is a compile error, not a crash."""
    source = tmp_path / "k.cu"
    source.write_bytes(b'#error VEC=3 n\xe9cessite une autre largeur\nextern "C" __global__ void k() {}\n')
    with pytest.raises(CompileError, match="nvcc failed for k.cu"):
        kernel_parameters(source, "k", defines={}, arch="sm_90")


@needs_nvcc
def test_a_tmpdir_that_does_not_exist_does_not_fail_the_compile(tmp_path, monkeypatch):
    # nvcc writes its intermediate files to TMPDIR as given (Python falls back to /tmp): a cluster's
    # missing scratch folder failed every compile, stored as each configuration's compile_error.
    monkeypatch.setenv("TMPDIR", str(tmp_path / "no-such-scratch"))
    reduce = REGISTRY["reduce"]
    problem = Problem("reduce", "int32", 1 << 20)
    cfg = {p.name: p.default for p in reduce.params}
    assert compile_variant(reduce, cfg, problem, arch="sm_90", cache_dir=tmp_path / "cubins").registers > 0
    source = KERNELS_DIR / reduce.source
    assert kernel_parameters(source, reduce.kernel_name(cfg), defines=reduce.defines(cfg, problem), arch="sm_90")


@pytest.mark.parametrize("folder", ["plug,in", "o'brien"])
def test_an_include_folder_nvcc_would_split_or_quote_is_refused_in_one_line(tmp_path, folder):
    source = tmp_path / folder / "k.cu"
    with pytest.raises(CompileError, match=r"include folder .*must hold none of ' or ,"):
        nvcc_command(source, {}, (), "sm_90", tmp_path / "k.cubin")


def test_a_measuring_stage_waits_while_the_compile_stage_holds_the_cache(tmp_path):
    """The compile stage runs beside the peaks: a sweep or study that starts meanwhile measures
    nothing until the stage's nvcc processes are done; with no stage, it does not wait."""
    assert wait_for_compile_stage(tmp_path / "cubins") == 0.0
    holding, release = threading.Event(), threading.Event()

    def compile_stage() -> None:
        with compile_stage_running(tmp_path / "cubins"):
            holding.set()
            release.wait(10)

    stage = threading.Thread(target=compile_stage)
    stage.start()
    assert holding.wait(10)
    waiter = threading.Thread(target=wait_for_compile_stage, args=(tmp_path / "cubins",))
    waiter.start()
    waiter.join(0.3)
    assert waiter.is_alive()  # blocked on the stage's lock
    release.set()
    waiter.join(10)
    stage.join(10)
    assert not waiter.is_alive()
    assert wait_for_compile_stage(tmp_path / "cubins") < 1.0  # the lock file stays; nothing holds it
