"""Kernels found as their source names them: an ``extern "C"`` name, a C++
name (mangled by nvcc), a name in a namespace, an overload told apart, and a
template instance instantiated from its arguments, with no wrapper kernel."""

from __future__ import annotations

import shutil

import pytest

from tuner.measure import symbols
from tuner.measure.compile import CompileError, compile_source, kernel_parameters

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")

KERNELS = """
template <typename T, int BLOCK>
__global__ void block_sum(const T* x, T* out, int n) {
    __shared__ T partial[BLOCK];
    int i = blockIdx.x * BLOCK + threadIdx.x;
    partial[threadIdx.x] = i < n ? x[i] : T(0);
    __syncthreads();
    for (int k = BLOCK / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k) partial[threadIdx.x] += partial[threadIdx.x + k];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[blockIdx.x] = partial[0];
}
__global__ void plain(float* a) { a[threadIdx.x] = 1.0f; }
extern "C" __global__ void c_named(float* a) { a[threadIdx.x] = 2.0f; }
namespace inner { __global__ void scaled(float* a, unsigned factor) { a[threadIdx.x] *= factor; } }
__global__ void overloaded(float* a) { a[0] = 0; }
__global__ void overloaded(int* a) { a[0] = 0; }
"""


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    path = tmp_path_factory.mktemp("lookup") / "kernels.cu"
    path.write_text(KERNELS)
    return path


@pytest.fixture(scope="module")
def tmp_path(tmp_path_factory):
    """One cubin cache for the module: every plain name is looked up in one compiled module."""
    return tmp_path_factory.mktemp("cubins")


def compiled(source, kernel, tmp_path, defines=None):
    return compile_source(source, kernel, defines=defines or {}, arch="sm_90", cache_dir=tmp_path, prefix="lookup")


@needs_nvcc
@pytest.mark.parametrize(
    "kernel, symbol",
    [("plain", "_Z5plainPf"), ("c_named", "c_named"), ("inner::scaled", "_ZN5inner6scaledEPfj"),
     ("scaled", "_ZN5inner6scaledEPfj"), ("_Z10overloadedPi", "_Z10overloadedPi")],
    ids=["cpp", "extern-c", "qualified", "unqualified", "mangled"],
)  # fmt: skip
def test_a_kernel_is_found_by_the_name_its_source_gives_it(source, tmp_path, kernel, symbol):
    assert compiled(source, kernel, tmp_path).kernel == symbol


@needs_nvcc
def test_an_overloaded_name_is_one_line_listing_the_candidates(source, tmp_path):
    with pytest.raises(CompileError) as refused:
        compiled(source, "overloaded", tmp_path)
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith("kernels.cu: kernel 'overloaded' must name one kernel, it names 2: ['overloaded(float*)', 'overloaded(int*)']")
    assert "_Z10overloadedPf" in message and "_Z10overloadedPi" in message


@needs_nvcc
def test_a_missing_kernel_lists_the_kernels_there_are(source, tmp_path):
    with pytest.raises(CompileError, match=r"^kernels.cu has no kernel 'nowhere' \(its kernels: \[.*'plain\(float\*\)'"):
        compiled(source, "nowhere", tmp_path)


@needs_nvcc
def test_a_template_instance_is_instantiated_by_the_compile_and_keyed_by_it(source, tmp_path):
    """No source edit and no wrapper: the instance's own symbol, its own
    resources (256 floats of static shared memory), and a cubin of its own."""
    wide = compiled(source, "block_sum<float, 256>", tmp_path)
    narrow = compiled(source, "block_sum<float, 64>", tmp_path)
    assert wide.kernel == "_Z9block_sumIfLi256EEvPKT_PS0_i" and wide.shared_bytes == 256 * 4
    assert narrow.kernel == "_Z9block_sumIfLi64EEvPKT_PS0_i" and narrow.shared_bytes == 64 * 4
    assert wide.key != narrow.key and wide.cubin != narrow.cubin
    plain = compiled(source, "plain", tmp_path)
    assert plain.key not in (wide.key, narrow.key)
    # A type macro among the arguments is read through its define.
    doubled = compiled(source, "block_sum<real, 32>", tmp_path, defines={"real": "double"})
    assert doubled.kernel == "_Z9block_sumIdLi32EEvPKT_PS0_i" and doubled.shared_bytes == 32 * 8
    assert kernel_parameters(source, "block_sum<float, 256>", defines={}, arch="sm_90") == [("u", 64), ("u", 64), ("u", 32)]


@needs_nvcc
def test_a_template_named_without_arguments_is_not_instantiated(source, tmp_path):
    with pytest.raises(CompileError, match=r"has no kernel 'block_sum'"):
        compiled(source, "block_sum", tmp_path)


def test_template_arguments_compare_however_they_are_spelled():
    entries = ["_Z9block_sumIfLi256EEvPKT_PS0_i", "_Z9block_sumIfLi64EEvPKT_PS0_i"]
    if symbols.demangled(tuple(entries))[entries[0]] == entries[0]:
        pytest.skip("no demangler (cu++filt or c++filt) here")
    assert symbols.resolve("block_sum<float, 256u>", entries, source="k.cu") == entries[0]
    assert symbols.resolve("block_sum< float,(int)64 >", entries, source="k.cu") == entries[1]
    assert symbols.resolve("block_sum<real, size>", entries, source="k.cu", defines={"real": "float", "size": "64"}) == entries[1]
    with pytest.raises(symbols.KernelLookupError, match="must name one kernel, it names 2"):
        symbols.resolve("block_sum", entries, source="k.cu")


def test_without_a_demangler_the_mangled_name_is_read(monkeypatch):
    monkeypatch.setattr(symbols, "_demangler", lambda: None)
    symbols.demangled.cache_clear()
    try:
        assert symbols.resolve("stencil_kernel", ["_Z14stencil_kernelPfS_", "other"], source="s.cu") == "_Z14stencil_kernelPfS_"
        assert symbols.resolve("ns::k", ["_ZN2ns1kEPf"], source="s.cu") == "_ZN2ns1kEPf"
        assert symbols.resolve("reduce<float, 4>", ["_Z6reduceIfLi4EEvPf", "_Z5plainPf"], source="s.cu") == "_Z6reduceIfLi4EEvPf"
    finally:
        symbols.demangled.cache_clear()


@pytest.mark.parametrize(
    "text, name",
    [("void block_sum<float, 256>(float const*, float*, int)", "block_sum<float, 256>"), ("plain(float*)", "plain"),
     ("(anonymous namespace)::k(int)", "(anonymous namespace)::k"), ("void ns::f<(Mode)1>(Pair<int, int>)", "ns::f<(Mode)1>")],
)  # fmt: skip
def test_the_function_name_is_read_out_of_a_demangled_signature(text, name):
    assert symbols.function_name(text) == name


@needs_nvcc
def test_an_unroll_factor_is_a_constexpr_the_pragma_reads(tmp_path):
    """``#pragma unroll loop_unroll_factor_0`` reads a C++ constant, not a macro
    (Kernel Tuner's convention): as a -D define it was an undefined identifier."""
    path = tmp_path / "unrolled.cu"
    path.write_text('extern "C" __global__ void unrolled(float* a, int n) {\n'
                    "    #pragma unroll loop_unroll_factor_0\n"
                    "    for (int i = threadIdx.x; i < n; i += 32) a[i] *= 2.0f;\n}\n")  # fmt: skip
    four = compile_source(path, "unrolled", defines={"loop_unroll_factor_0": "4"}, arch="sm_90", cache_dir=tmp_path, prefix="u")
    none = compile_source(path, "unrolled", defines={"loop_unroll_factor_0": "0"}, arch="sm_90", cache_dir=tmp_path, prefix="u")
    assert four.kernel == none.kernel == "unrolled" and four.key != none.key
    assert kernel_parameters(path, "unrolled", defines={"loop_unroll_factor_0": "4"}, arch="sm_90") == [("u", 64), ("u", 32)]
