"""`tuner init`: the kernels and parameters read from a CUDA file (Kernel
Tuner's own examples among them), the skeleton, config and Snakefile written
into a folder, and the refusals (one line, nothing written). The written
folder run from an installed wheel: tests/test_wheel.py."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tuner import cli
from tuner.resources import lessons_config
from tuner.scaffold import SNAKEFILE_TEXT, InitRefused, init_folder
from tuner.scaffold.cuda_source import read_cuda_source, strip_comments

ROOT = Path(__file__).resolve().parents[1]
# Kernel Tuner's CUDA examples: test data beside the repository (absent from a fresh clone).
KERNEL_TUNER_EXAMPLES = next((p / "shared" / "kernel_tuner_examples" for p in ROOT.parents
                              if (p / "shared" / "kernel_tuner_examples").is_dir()), None)  # fmt: skip
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc says which identifiers a file leaves undefined")

SOURCE = r"""
// Two kernels: one extern "C" (in a block), one whose name C++ mangles.
#ifndef block_size_x
#define block_size_x 128
#endif
#ifndef ITEMS
  #define ITEMS 2  /* items per thread */
#endif
#define USE_CACHE read_only
#if defined(HAVE_THING) || USE_CACHE == 1
#define LOAD(p, i) __ldg(p + i)
#endif

__device__ void helper(float* p) { p[0] = 1.0f; }

extern "C" {
__global__ void __launch_bounds__(block_size_x) scale(float* out, const float* __restrict__ in, float* acc,
                                                      float* passed, float* unused, float alpha, int n) {
    int i = blockIdx.x * block_size_x + threadIdx.x;  // out[i] = 0 in a comment is no write
    if (i < n) { out[i] = alpha * in[i] * tile_factor; acc[i] += in[i]; }
    helper(passed);
}
}

__global__ void mangled(int* counts, unsigned long long size) { counts[threadIdx.x] = 0; }
"""


@pytest.fixture
def cuda_file(tmp_path) -> Path:
    path = tmp_path / "src" / "scale_ops.cu"
    path.parent.mkdir()
    path.write_text(SOURCE)
    return path


def test_kernels_their_arguments_and_roles(cuda_file):
    source = read_cuda_source(cuda_file, nvcc=None)
    scale, mangled = source.kernels
    assert (scale.name, scale.extern_c, mangled.name, mangled.extern_c) == ("scale", True, "mangled", False)
    roles = {a.name: (a.role, a.numpy_dtype) for a in scale.args}
    assert roles == {"out": ("out", "float32"), "in": ("in", "float32"), "acc": ("inout", "float32"),
                     "passed": ("inout", "float32"), "unused": ("in", "float32"), "alpha": ("scalar", "float32"),
                     "n": ("scalar", "int32")}  # fmt: skip
    assert [(a.name, a.role, a.numpy_dtype) for a in mangled.args] == [("counts", "out", "int32"), ("size", "scalar", "uint64")]


def test_the_names_a_compile_line_sets(cuda_file):
    knobs = {k.name: (k.default, k.how) for k in read_cuda_source(cuda_file, nvcc=None).knobs}
    # HAVE_THING is only asked whether it is defined; USE_CACHE is the file's own macro, read_only the name it tests.
    assert knobs == {"block_size_x": ("128", "#ifndef default"), "ITEMS": ("2", "#ifndef default"),
                     "read_only": (None, "#if test")}  # fmt: skip


@needs_nvcc
def test_nvcc_names_the_identifiers_left_undefined(cuda_file):
    source = read_cuda_source(cuda_file, nvcc="nvcc")
    assert [k.name for k in source.knobs if k.how == "undefined identifier"] == ["tile_factor"] and not source.notes


@needs_nvcc
@pytest.mark.skipif(KERNEL_TUNER_EXAMPLES is None, reason="Kernel Tuner's examples (../shared/kernel_tuner_examples) are absent")
@pytest.mark.parametrize("example", ["matmul", "convolution", "reduction", "spmv", "stencil"])
def test_what_kernel_tuners_own_scripts_tune_is_found(example):
    """Each parameter the example's tuning script names is one of the file's knobs, and its outputs are written ones."""
    tuned = set(re.findall(r'tune_params\["(\w+)"\]', (KERNEL_TUNER_EXAMPLES / f"{example}.py").read_text()))
    source = read_cuda_source(KERNEL_TUNER_EXAMPLES / f"{example}.cu")
    assert tuned and tuned <= {k.name for k in source.knobs}, (tuned, source.knobs)
    outputs = {"matmul": {"C"}, "convolution": {"output"}, "reduction": {"sum_global"}, "spmv": {"y"}, "stencil": {"x_new"}}
    kernel = source.kernels[0]
    assert {a.name for a in kernel.args if a.role == "out"} == outputs[example]


def test_comments_go_and_strings_stay():
    text = 'a // one\nb /* two\nthree */ c "x // y" \'/\''
    assert strip_comments(text) == 'a  \nb \n c "x // y" \'/\''


def test_init_writes_a_skeleton_a_config_and_a_snakefile(cuda_file, tmp_path):
    folder = tmp_path / "mine"
    written = init_folder(folder, kernel=cuda_file, nvcc=None)
    assert [p.name for p in written.files] == ["scale_ops.py", "config.yaml", "Snakefile"]
    assert (folder / "Snakefile").read_text() == SNAKEFILE_TEXT
    text = (folder / "scale_ops.py").read_text()
    assert "source='../src/scale_ops.cu',  # relative to this file" in text  # beside the folder: they move together
    assert 'In("in_"),' in text and "def scale_reference(in_, acc, passed, unused, alpha, n):" in text and 'InOut("acc"),' in text and 'Scalar("n", "n", "int32")' in text
    assert '"block_size_x": [128, 32, 64, 256, 512, 1024]' in text and '"ITEMS": [2]' in text and '"read_only": [0, 1]' in text
    assert text.count("raise NotImplementedError") == text.count("KernelSpec(") == 2  # one per kernel
    assert [d.family for d in written.kernels] == ["scale", "mangled"]
    assert any('kernel mangled is not extern "C"' in note for note in written.notes)
    config = yaml.safe_load((folder / "config.yaml").read_text())
    assert config["family_paths"] == ["scale_ops.py"] and config["results_dir"] == "results"
    assert config["sweeps"]["scale_space"] == {"family": "scale", "dtypes": ["float32"], "sizes": [1 << 24], "params": "declared",
                                               "timing": {"max_time_s": 0.3}}  # fmt: skip
    assert config["studies"]["scale_search"]["compare_with_sweep"] == "scale_space"
    # The pipeline reads it as it reads any config: every rule checked, the skeleton loaded (in a process of its own,
    # so this one's registry of families stays as the other tests expect it).
    check = ("from tuner.settings import load; s = load('config.yaml'); "
             "print(sorted(s.sweeps), sorted(s.studies), [s.study(n).budget_trials for n in sorted(s.studies)]); "
             "print(s.sweep('scale_space').domains())")  # fmt: skip
    proc = subprocess.run([sys.executable, "-c", check], cwd=folder, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    # Each: block_size_x 6 x ITEMS 1 x read_only 2 = 12 configurations (the knobs no kernel names go to both), half studied.
    assert proc.stdout.split("\n")[0] == "['mangled_space', 'scale_space'] ['mangled_search', 'scale_search'] [6, 6]"
    # The sweep is every value the skeleton declares (params: declared), as the config's header says, not its defaults alone.
    assert proc.stdout.split("\n")[1] == "{'block_size_x': [128, 32, 64, 256, 512, 1024], 'ITEMS': [2], 'read_only': [0, 1]}"


def test_a_snakefile_snakefmt_leaves_as_it_is(tmp_path):
    if shutil.which("snakefmt") is None:
        pytest.skip("snakefmt is not installed (the test extra holds it)")
    (tmp_path / "Snakefile").write_text(SNAKEFILE_TEXT)
    proc = subprocess.run(["snakefmt", "--check", str(tmp_path / "Snakefile")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_an_existing_file_is_kept_and_nothing_is_written(cuda_file, tmp_path):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "Snakefile").write_text("# mine\n")
    with pytest.raises(InitRefused) as refused:
        init_folder(folder, kernel=cuda_file, nvcc=None)
    assert str(refused.value) == (f"{folder / 'Snakefile'}: exists; init writes scale_ops.py, config.yaml, Snakefile and "
                                  f"replaces none (--force replaces them)")  # fmt: skip
    assert sorted(p.name for p in folder.iterdir()) == ["Snakefile"] and (folder / "Snakefile").read_text() == "# mine\n"
    init_folder(folder, kernel=cuda_file, nvcc=None, force=True)
    assert (folder / "Snakefile").read_text() == SNAKEFILE_TEXT and (folder / "scale_ops.py").is_file()


def test_the_lessons_alone_and_beside_a_kernel(cuda_file, tmp_path):
    init_folder(tmp_path / "lessons")
    assert (tmp_path / "lessons" / "config.yaml").read_text() == lessons_config().read_text()
    init_folder(tmp_path / "both", kernel=cuda_file, lessons=True, nvcc=None)
    both = yaml.safe_load((tmp_path / "both" / "config.yaml").read_text())
    lessons = yaml.safe_load(lessons_config().read_text())
    assert set(both["sweeps"]) == set(lessons["sweeps"]) | {"scale_space", "mangled_space"}
    assert set(both["studies"]) == set(lessons["studies"]) | {"scale_search", "mangled_search"}
    assert both["timing"] == lessons["timing"] and both["family_paths"] == ["scale_ops.py"]


@pytest.mark.parametrize("text, refusal", [
    ("__device__ float twice(float x) { return 2 * x; }\n", "must hold a __global__ kernel, got none"),
    ('extern "C" __global__ void k(int n, float a) { }\n', "kernel k must take an array (a pointer) whose output tuner verifies"),
])  # fmt: skip
def test_a_file_without_a_kernel_to_tune_is_refused_in_one_line(tmp_path, text, refusal):
    path = tmp_path / "k.cu"
    path.write_text(text)
    with pytest.raises(InitRefused, match=re.escape(refusal)) as refused:
        init_folder(tmp_path / "mine", kernel=path, nvcc=None)
    assert "\n" not in str(refused.value) and not (tmp_path / "mine").exists()


def test_a_missing_kernel_file_and_a_file_for_a_folder_are_refused(tmp_path):
    with pytest.raises(InitRefused, match=r"--kernel: must name an existing CUDA file, got '.*nothing.cu'"):
        init_folder(tmp_path / "mine", kernel=tmp_path / "nothing.cu")
    (tmp_path / "file").write_text("")
    with pytest.raises(InitRefused, match=r"FOLDER: must be a folder .* a file"):
        init_folder(tmp_path / "file")


def test_a_built_in_familys_name_is_not_taken(tmp_path):
    path = tmp_path / "vector_add.cu"
    path.write_text('extern "C" __global__ void vector_add(float* c, const float* a, const float* b, int n) '
                    "{ int i = blockIdx.x * block_size_x + threadIdx.x; if (i < n) c[i] = a[i] + b[i]; }\n")  # fmt: skip
    written = init_folder(tmp_path / "mine", kernel=path, nvcc=None)
    assert [d.family for d in written.kernels] == ["my_vector_add"]
    text = (tmp_path / "mine" / "vector_add.py").read_text()
    assert 'kernel="vector_add"' in text and "runtime_params=['block_size_x']" in text  # no define names it here


def test_the_command_line(cuda_file, tmp_path, capsys):
    folder = tmp_path / "mine"
    assert cli.main(["init", str(folder), "--kernel", str(cuda_file)]) == 0
    out = capsys.readouterr().out
    assert f"wrote {folder / 'scale_ops.py'}" in out and f"cd {folder} && snakemake --cores 1" in out
    with pytest.raises(SystemExit) as exit_:
        cli.main(["init", str(folder), "--kernel", str(cuda_file)])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.startswith("init: ") and err.count("\n") == 1
