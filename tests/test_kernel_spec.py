"""A kernel declared as a ``KernelSpec``: the family it makes (space, recipe,
harness bound through a stand-in GPU), the one line for each broken
declaration, and ``tuner check-family`` on good and broken families."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from tuner import cli
from tuner.families import REGISTRY, Constant, In, InOut, KernelSpec, Out, Param, Problem, Scalar
from tuner.families.spec import SpecError
from tuner.settings import ConfigError, parse

ROOT = Path(__file__).resolve().parents[1]

SCALE = """
extern "C" __global__ void scale(float* __restrict__ y, const float* __restrict__ x, float a, int n) {
    int i = blockIdx.x * (block_size_x * ITEMS) + threadIdx.x;
#pragma unroll
    for (int k = 0; k < ITEMS; ++k, i += block_size_x)
        if (i < n) y[i] = a * x[i];
}
"""


@pytest.fixture(autouse=True)
def registry_as_before():
    before = dict(REGISTRY.families)
    yield
    REGISTRY.families.clear()
    REGISTRY.families.update(before)


def scale_spec(path: Path, **changes) -> KernelSpec:
    arguments = dict(
        name="scale",
        source=path,
        kernel="scale",
        args=[Out("y"), In("x"), Scalar("a", 3.0, "float32"), Scalar("n", "n", "int32")],
        tune_params={"block_size_x": [128, 256], "ITEMS": [1, 2, 4]},
        restrictions=["block_size_x * ITEMS <= 512"],
        grid_div_x=["block_size_x", "ITEMS"],
        reference=lambda x, a: a * x.astype(np.float64),
    )
    return KernelSpec(**(arguments | changes))


@pytest.fixture
def source(tmp_path) -> Path:
    path = tmp_path / "scale.cu"
    path.write_text(SCALE)
    return path


class StandInGpu:
    """Records what a bound launch asks of the device."""

    sm_count = 132

    def __init__(self) -> None:
        self.calls = []

    def _buffer(self, nbytes):
        gpu = self

        class Buffer:
            def __init__(self):
                self.nbytes = nbytes

            def ptr(self, offset=0):
                return np.uintp(id(self) + offset)

        gpu.calls.append(("alloc", nbytes))
        return Buffer()

    def alloc(self, nbytes):
        return self._buffer(nbytes)

    def upload(self, array):
        return self._buffer(array.nbytes)

    def fill_bytes(self, ptr, value, nbytes):
        self.calls.append(("fill", value, nbytes))

    def copy(self, dst, src, nbytes):
        self.calls.append(("copy", nbytes))

    def set_constant(self, function, name, array):
        self.calls.append(("constant", name, array.size))

    def launcher(self, function, grid, block, *args, shared_bytes=0):
        self.calls.append(("launch", grid, block, args, shared_bytes))
        return lambda: None


def test_a_spec_makes_a_family_whose_space_recipe_and_bytes_follow_from_the_declaration(source):
    family = scale_spec(source)
    problem = Problem("scale", "float32", 1000)
    assert family.param_names == ("block_size_x", "ITEMS")
    assert len(family.space(problem)) == 5  # 256 x 4 breaks the restriction
    assert family.violations({"block_size_x": 256, "ITEMS": 4}, problem) == ["restriction 'block_size_x * ITEMS <= 512' does not hold"]
    assert family.defines({"block_size_x": 128, "ITEMS": 2}, problem) == {"block_size_x": "128", "ITEMS": "2"}
    assert family.arg_types == "PPfi"
    assert family.bytes_moved({"block_size_x": 128, "ITEMS": 2}, problem) == 2 * 4 * 1000
    assert family.device_bytes(problem) == 4 * 1000 + 4 * 1000 + 2 * 4 * 1000  # x, y, y's reference on the device
    inputs = family.make_inputs(problem, np.random.default_rng(1))
    assert set(inputs) == {"x"} and inputs["x"].dtype == np.float32 and np.abs(inputs["x"]).max() > 0
    np.testing.assert_allclose(family.reference(inputs, problem), 3.0 * inputs["x"], rtol=1e-6)


def test_binding_sets_the_grid_the_arguments_and_poisons_the_output(source):
    family = scale_spec(source)
    problem = Problem("scale", "float32", 1000)
    gpu = StandInGpu()
    buffers = family.allocate(problem, family.make_inputs(problem, np.random.default_rng(1)), gpu)
    launch = family.bind({"block_size_x": 128, "ITEMS": 2}, problem, buffers, object(), gpu)
    assert launch.grid == (4, 1, 1) and launch.block == (128, 1, 1)  # ceil(1000 / 256)
    (_, _, _, args, _) = next(c for c in gpu.calls if c[0] == "launch")
    assert [type(a) for a in args[2:]] == [np.float32, np.int32] and args[2] == 3.0 and args[3] == 1000
    assert ("fill", 0xFF, 4000) in gpu.calls  # y poisoned before the verification launch
    assert launch.restore is None and launch.output.count == 1000 and launch.output.tolerance == family.tolerance


def test_in_out_arrays_are_restored_before_every_launch_and_constants_uploaded(tmp_path):
    (tmp_path / "k.cu").write_text("")
    family = KernelSpec(
        name="accumulate", source=tmp_path / "k.cu", kernel="accumulate", dtypes=("int32",),
        args=[InOut("acc", shape=("n", "n")), Constant("weights", shape=7), Scalar("n", "n", "int32")],
        tune_params={"block_size_x": [32], "block_size_y": [4, 8]},
        problem_size=["n", "n"], reference=lambda acc, weights: acc + weights.sum(),
    )  # fmt: skip
    problem = Problem("accumulate", "int32", 100)
    gpu = StandInGpu()
    inputs = family.make_inputs(problem, np.random.default_rng(0))
    assert inputs["acc"].shape == (100, 100) and inputs["weights"].shape == (7,)
    buffers = family.allocate(problem, inputs, gpu)
    launch = family.bind({"block_size_x": 32, "block_size_y": 8}, problem, buffers, object(), gpu)
    assert launch.grid == (4, 13, 1) and launch.block == (32, 8, 1)
    assert ("constant", "weights", 7) in gpu.calls
    copies = sum(1 for c in gpu.calls if c[0] == "copy")
    launch.restore()
    assert sum(1 for c in gpu.calls if c[0] == "copy") == copies + 1
    assert launch.output.tolerance is None  # integers compare exactly
    verdict = family.verify(family.reference(inputs, problem) + 1, family.reference(inputs, problem), inputs)
    assert not verdict.ok and verdict.detail == "10000 elements differ"


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"restrictions": ["block_size * ITEMS <= 512"]}, r"restriction 1 'block_size \* ITEMS <= 512' names 'block_size', which is not one of"),
        ({"restrictions": ["block_size_x <="]}, r"restriction 1 must be a Python expression, got 'block_size_x <='"),
        ({"tune_params": {"block-size": [128]}}, r"parameter names must be ASCII C identifiers and no C\+\+ keyword .*, got 'block-size'"),
        ({"tune_params": {"block_size_x": [128], "template": [1]}}, r"parameter names must be ASCII C identifiers and no C\+\+ keyword .*, got 'template'"),
        ({"tune_params": {"block_size_x": [128], "é": [1]}}, r"parameter names must be ASCII C identifiers .*, got 'é'"),
        ({"tune_params": {"block_size_x": [128], "itemsize": [3]}}, r"tune_params: a parameter must not be named as the problem's \['dtype', 'itemsize', 'n', 'sm_count'\], got 'itemsize'"),
        ({"tune_params": {"block_size_x": [128], "S": ["$(touch /tmp/x)"]}}, r"tune_params\['S'\]: a value \(a -D define\) must hold none of \$ ` \" \\ , or control characters \(nvcc passes it through a shell\), got '\$\(touch /tmp/x\)'"),
        ({"tune_params": {"block_size_x": [128], "S": ["1,block_size_x=7"]}}, r"tune_params\['S'\]: a value \(a -D define\) must hold none of .* got '1,block_size_x=7'"),
        ({"type_macro": "T=1 `id`"}, r"type_macro must be an ASCII C identifier \(a -D name\), got 'T=1 `id`'"),
        ({"compile_flags": ["-DX=$(id)"]}, r"compile_flags: a flag must hold none of .* got '-DX=\$\(id\)'"),
        ({"tune_params": {"block_size_x": []}}, r"tune_params\['block_size_x'\] must be a non-empty list of values, got \[\]"),
        ({"tune_params": {"block_size_x": [128, 128]}}, r"tune_params\['block_size_x'\] lists a value twice: \[128, 128\]"),
        ({"tune_params": {"ITEMS": [1]}, "restrictions": [], "grid_div_x": ["ITEMS"]}, r"block must be given when tune_params has no block_size_x"),
        ({"reference": lambda z: z}, r"reference takes 'z', which is not an argument the kernel reads, n or a constant"),
        ({"args": [In("x"), Scalar("n", "n", "int32")]}, r"args must hold at least one Out or InOut array"),
        ({"args": [Out("y"), Scalar("a", 3.0, "float128")]}, r"scalar 'a': dtype must be one of \[.*\], got 'float128'"),
        ({"dtypes": ("float64",)}, r"dtypes must be among \[.*\], got 'float64'"),
        ({"source": "missing.cu"}, r"source must be an existing CUDA file, got '.*missing.cu'"),
        ({"grid_div_x": ["block_size_x * WIDTH"]}, r"grid_div_x 'block_size_x \* WIDTH' names 'WIDTH'"),
    ],
    ids=["unknown-name", "syntax", "define-name", "keyword-name", "non-ascii-name", "problem-name", "shell-in-define",
         "comma-in-define", "type-macro", "shell-in-flag", "no-values", "twice", "no-block", "reference-arg", "no-output",
         "scalar-dtype", "dtype", "source", "grid-name"],
)  # fmt: skip
def test_a_broken_declaration_is_one_line_naming_the_family_the_rule_and_the_value(source, changes, message):
    with pytest.raises(SpecError, match=r"^family 'scale': " + message):
        scale_spec(source, **changes)


@pytest.mark.parametrize("name", ["class", "x-y", "é"])
def test_a_param_object_is_held_to_the_same_name_rules_as_a_list_of_values(source, name):
    """A name declared through a Param becomes a -D define as a list's does: refused in the same one line."""
    message = (r"^family 'scale': parameter names must be ASCII C identifiers and no C\+\+ keyword \(they become -D defines "
               r"and names in best_configs.h\), got " + re.escape(repr(name)) + "$")  # fmt: skip
    with pytest.raises(SpecError, match=message):
        scale_spec(source, tune_params={"block_size_x": [128], name: [1, 2]})
    with pytest.raises(SpecError, match=message):
        scale_spec(source, tune_params={"block_size_x": [128], name: Param(name, (1, 2), "a define")})
    family = scale_spec(source, tune_params={"block_size_x": [128], "ITEMS": Param("ITEMS", (1, 2), "d")})
    assert family.param_names == ("block_size_x", "ITEMS")


def test_a_reference_of_the_wrong_size_is_named(source):
    family = scale_spec(source, reference=lambda x: x[:10])
    problem = Problem("scale", "float32", 1000)
    with pytest.raises(SpecError, match=r"^family 'scale': reference for 'y' must have 1000 elements \(shape \(1000,\)\), got shape \(10,\)$"):
        family.reference(family.make_inputs(problem, np.random.default_rng(0)), problem)


# ---- check-family ------------------------------------------------------------

SPEC_FILE = """
import numpy as np
from tuner.families import In, KernelSpec, Out, Scalar

scale = KernelSpec(
    name="scale", source="scale.cu", kernel="scale",
    args=[Out("y"), In("x"), Scalar("a", 3.0, "float32"), Scalar("n", "n", "int32")],
    tune_params={"block_size_x": [128, 256], "ITEMS": [1, 2]},
    grid_div_x=["block_size_x", "ITEMS"],
    reference=lambda x, a: a * x.astype(np.float64),
)
"""


def write_family(folder: Path, spec: str = SPEC_FILE, kernel: str = SCALE) -> Path:
    (folder / "scale.cu").write_text(kernel)
    (folder / "scale.py").write_text(spec)
    return folder / "scale.py"


needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")


@needs_nvcc
def test_check_family_passes_a_good_family_one_line_per_step(tmp_path, capsys):
    assert cli.main(["check-family", str(write_family(tmp_path))]) == 0
    lines = capsys.readouterr().out.splitlines()
    steps = [line.split(":")[0] for line in lines if not line.startswith(" ")]
    assert steps == ["load", "space", "launch", "compile", "arguments", "reference", "pipeline"], lines
    assert "4 configurations, 4 feasible" in lines[1]
    assert lines[3].startswith("compile: 2 modules of a covering subset of 2 configurations")  # the two corners hold every value
    assert "'ITEMS'" in lines[-1] and "'block_size_x'" in lines[-1]


@needs_nvcc
@pytest.mark.parametrize(
    "spec, kernel, message",
    [
        (SPEC_FILE, SCALE.replace("y[i] = a * x[i];", "y[i] = a * x[i]"), r"every module must compile with nvcc for sm_90; 2 of 2 did not, e.g. .*error"),
        (SPEC_FILE.replace("a * x.astype(np.float64)", "x[: n // 2]").replace("lambda x, a:", "lambda x, n:"), SCALE,
         r"inputs and reference must run for scale-float32-n1048613, got SpecError: .*reference for 'y' must have 1048613 elements"),
        (SPEC_FILE.replace('Scalar("n", "n", "int32")', 'Scalar("n", "n", "uint64")'), SCALE,
         r"argument 3 \(n\) must match kernel 'scale''s parameter 3; declared a 64-bit integer or pointer, the kernel takes a 32-bit integer"),
        (SPEC_FILE.replace('Scalar("a", 3.0, "float32"), ', "").replace("lambda x, a: a *", "lambda x: 3.0 *"), SCALE,
         r"the arguments must match kernel 'scale''s parameters; declared 3 \(PPi\), the kernel takes 4"),
    ],
    ids=["does-not-compile", "wrong-reference", "argument-type", "argument-count"],
)  # fmt: skip
def test_check_family_names_each_defect_in_one_line(tmp_path, capsys, spec, kernel, message):
    with pytest.raises(SystemExit) as stop:
        cli.main(["check-family", str(write_family(tmp_path, spec, kernel))])
    assert stop.value.code == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("check-family: family 'scale': "), err
    assert __import__("re").search(message, err[0]), err[0]


def test_a_declaration_that_breaks_a_rule_is_refused_at_load_with_its_file(tmp_path, capsys):
    spec = SPEC_FILE.replace("lambda x, a:", "lambda x, b:")
    with pytest.raises(SystemExit):
        cli.main(["check-family", str(write_family(tmp_path, spec))])
    err = capsys.readouterr().err.strip()
    assert err.startswith("check-family: family_paths: ") and err.endswith(
        "scale.py: family 'scale': reference takes 'b', which is not an argument the kernel reads, n or a constant (known: ['a', 'dtype', 'n', 'x'])"
    ), err


def test_check_family_refuses_a_parameter_default_outside_its_values_at_load(tmp_path, capsys):
    (tmp_path / "scale.cu").write_text(SCALE)
    (tmp_path / "odd.py").write_text(
        (ROOT / "tests" / "data" / "faulty_family" / "faulty.py").read_text().replace('"faulty"', '"odd"').replace(
            "(an illegal address)\", default=0", "(an illegal address)\", default=7"
        )
    )
    shutil.copy(ROOT / "tests" / "data" / "faulty_family" / "faulty.cu", tmp_path / "faulty.cu")
    with pytest.raises(SystemExit):
        cli.main(["check-family", str(tmp_path / "odd.py")])
    err = capsys.readouterr().err.strip()
    assert err.endswith("family 'odd': parameter 'reach''s default must be one of [0, 1], got 7"), err


def test_space_and_verify_see_a_family_of_ones_own(tmp_path, capsys):
    assert cli.main(["space", "--family-path", str(write_family(tmp_path)), "--n", "4096"]) == 0
    (line,) = capsys.readouterr().out.strip().splitlines()
    assert line.split()[:2] == ["scale", "float32"] and "space=     4" in line
    with pytest.raises(SystemExit) as stop:
        cli.main(["space", "--n", "0"])
    assert stop.value.code == 2 and "argument --n: must be an integer >= 1, got 0" in capsys.readouterr().err


def test_a_profile_keeps_a_plugin_familys_own_parameters():
    import json

    from tuner.data.counters import to_profile_frame

    key = json.dumps({"PAD": 1, "TILE": 32})
    frame = to_profile_frame([{"family": "transpose", "config_key": key, "TILE": 32, "PAD": 1}])
    columns = list(frame.columns)
    assert frame.loc[0, "TILE"] == 32 and frame.loc[0, "PAD"] == 1
    assert columns.index("TILE") < columns.index("config_key")


@pytest.mark.parametrize(
    "params, message",
    [('"status": [1, 2]', "parameter 'status' must not be named as a column of the results table (its own data: status), got it"),
     ('"n_items": [2**70, 1]', "parameter 'n_items': values must fit 64 bits (a results column), got 1180591620717411303424"),
     ('"tile": ["a", "b"]', "parameter 'tile': values must be integers, as the results column tile of built-in families is, got 'a'")],
    ids=["a-results-column", "beyond-64-bits", "a-built-in-column-of-another-type"],
)  # fmt: skip
def test_a_parameter_the_results_table_cannot_hold_is_refused_before_any_work(tmp_path, capsys, params, message):
    """A parameter is a column of the results: one named as the row's own data (its status,
    its family) would be written over, and the store would set every measured row aside."""
    spec = SPEC_FILE.replace('"ITEMS": [1, 2]}', '"ITEMS": [1, 2], ' + params + "}")
    with pytest.raises(SystemExit):
        cli.main(["check-family", str(write_family(tmp_path, spec))])
    err = capsys.readouterr().err.strip()
    assert err.startswith("check-family: ") and err.endswith(f"scale.py: family 'scale': {message}"), err
    config = {"results_dir": str(tmp_path / "results"), "gpu": "test-gpu", "family_paths": [str(tmp_path / "scale.py")],
              "sweeps": {"s": {"family": "scale", "dtypes": ["float32"], "sizes": [4096]}}}  # fmt: skip
    with pytest.raises(ConfigError, match=r"^family_paths: family 'scale': " + re.escape(message) + "$"):
        parse(config)


@needs_nvcc
def test_a_parameter_of_fractional_values_goes_through_every_stage(tmp_path, capsys):
    """A float parameter is a number column of the results (as text it no longer was the parameter's value)."""
    spec = SPEC_FILE.replace('"ITEMS": [1, 2]}', '"ITEMS": [1, 2], "P": [0.5, 1e300]}')
    assert cli.main(["check-family", str(write_family(tmp_path, spec))]) == 0
    assert "exported ({'ITEMS': 2, 'P': 1e+300, 'block_size_x': 256})" in capsys.readouterr().out


@pytest.mark.parametrize(
    "grid, message",
    [(["0"], "grid must be one to three whole numbers of at least 1, got [0]"),
     (["-5"], "grid must be one to three whole numbers of at least 1, got [-5]"),
     (["n / 400"], "grid must be one to three whole numbers of at least 1, got [2.5]"),
     (["1", "1", "1", "2"], "grid must be one to three whole numbers of at least 1, got [1, 1, 1, 2]"),
     (["1e308 * 10"], "grid must be one to three whole numbers of at least 1, got [inf]"),
     (["1e308 * 10 - 1e308 * 10"], "grid must be one to three whole numbers of at least 1, got [nan]")],
    ids=["zero", "negative", "fraction", "four-dimensions", "infinite", "nan"],
)  # fmt: skip
def test_a_launch_shape_the_spec_gets_wrong_is_said_never_changed(source, grid, message):
    """A grid of 0 or 2.5 used to launch as 1 or 2; now it is the configuration's launch error, in one line."""
    family = scale_spec(source, grid=grid)
    problem = Problem("scale", "float32", 1000)
    gpu = StandInGpu()
    buffers = family.allocate(problem, family.make_inputs(problem, np.random.default_rng(1)), gpu)
    with pytest.raises(SpecError, match=r"^family 'scale': " + re.escape(message) + "$"):
        family.bind({"block_size_x": 128, "ITEMS": 2}, problem, buffers, object(), gpu)
    whole = scale_spec(source, grid=["n / 500"]).bind({"block_size_x": 128, "ITEMS": 2}, problem, buffers, object(), gpu)
    assert whole.grid == (2, 1, 1)  # 2.0 is a whole number


# ---- constants, init's context, templates, limits ------------------------------


def test_a_parameter_of_one_value_is_a_constant_shapes_init_the_reference_and_the_launch_read(tmp_path):
    """The convolution's filter size is a constant, not encoded in n."""
    (tmp_path / "k.cu").write_text("")
    seen = {}

    def image(rng, shape, dtype, n, FILTER, WIDTH):
        seen.update(n=n, FILTER=FILTER, WIDTH=WIDTH)
        return rng.random(shape).astype(dtype)

    def reference(picture, weights, FILTER, HEIGHT, WIDTH):
        padded = picture.astype(np.float64)
        return sum(padded[i : i + HEIGHT, j : j + WIDTH] * weights[i, j] for i in range(FILTER) for j in range(FILTER))

    family = KernelSpec(
        name="blur", source=tmp_path / "k.cu", kernel="blur",
        args=[Out("out", ("HEIGHT", "WIDTH")), In("picture", ("HEIGHT + FILTER - 1", "WIDTH + FILTER - 1"), init=image),
              Constant("weights", ("FILTER", "FILTER")), Scalar("taps", "FILTER * FILTER", "int32")],
        tune_params={"block_size_x": [16, 32], "block_size_y": [4, 8], "FILTER": [5], "HEIGHT": [40], "WIDTH": [64]},
        problem_size=["WIDTH", "HEIGHT"], reference=reference,
    )  # fmt: skip
    assert family.constants == {"FILTER": 5, "HEIGHT": 40, "WIDTH": 64}
    problem = Problem("blur", "float32", 7)  # n reads nothing here: the sizes are the kernel's own
    inputs = family.make_inputs(problem, np.random.default_rng(0))
    assert inputs["picture"].shape == (44, 68) and inputs["weights"].shape == (5, 5)
    assert seen == {"n": 7, "FILTER": 5, "WIDTH": 64}
    expected = family.reference(inputs, problem)
    assert expected.shape == (40 * 64,)
    assert np.isclose(expected[0], (inputs["picture"][:5, :5].astype(np.float64) * inputs["weights"]).sum())
    cfg = {"block_size_x": 32, "block_size_y": 8, "FILTER": 5, "HEIGHT": 40, "WIDTH": 64}
    assert family.defines(cfg, problem)["FILTER"] == "5"  # still a -D define for the kernel
    gpu = StandInGpu()
    launch = family.bind(cfg, problem, family.allocate(problem, inputs, gpu), object(), gpu)
    assert launch.grid == (2, 5, 1)
    assert next(c for c in gpu.calls if c[0] == "launch")[3][-1] == 25


def test_init_sees_n_the_constants_and_the_arrays_made_before_it(tmp_path):
    """CSR offsets and column indices made from each other, not re-derived from a shape."""
    (tmp_path / "k.cu").write_text("")

    def offsets(rng, shape, dtype, n, PER_ROW):
        return np.arange(n + 1, dtype=dtype) * PER_ROW

    def columns(rng, shape, dtype, rows, COLS):
        assert rows[-1] == shape[0]
        return rng.integers(0, COLS, shape[0]).astype(dtype)

    def everything(rng, shape, dtype, **context):
        assert set(context) == {"n", "itemsize", "PER_ROW", "COLS", "block_size_x", "rows", "cols"}
        return np.ones(shape, dtype)

    family = KernelSpec(
        name="spmv", source=tmp_path / "k.cu", kernel="spmv",
        args=[Out("y"), In("rows", "n + 1", "int32", init=offsets), In("cols", "n * PER_ROW", "int32", init=columns),
              In("values", "n * PER_ROW", init=everything), In("x", "COLS"), Scalar("n", "n", "int32")],
        tune_params={"block_size_x": [64], "PER_ROW": [3], "COLS": [50]},
        reference=lambda rows, cols, values, x, n: np.add.reduceat(values * x[cols], rows[:-1]),
    )  # fmt: skip
    problem = Problem("spmv", "float32", 20)
    inputs = family.make_inputs(problem, np.random.default_rng(0))
    assert list(inputs["rows"][:3]) == [0, 3, 6] and inputs["cols"].max() < 50 and inputs["x"].shape == (50,)
    assert family.reference(inputs, problem).shape == (20,)


@pytest.mark.parametrize(
    "init, message",
    [(lambda rng, shape, dtype, x: x, r"init of 'w' takes 'x', which must be n, itemsize, a constant or an array made before it "
      r"\(known: \['ITEMS', 'itemsize', 'n'\]\)"),
     ("zeros", r"init of 'w' must be a function \(rng, shape, dtype\), got 'zeros'")],
    ids=["a-later-array", "not-callable"],
)  # fmt: skip
def test_an_init_that_asks_for_what_is_not_made_yet_is_refused_at_load(source, init, message):
    args = [Out("y"), In("w", init=init), In("x"), Scalar("a", 3.0, "float32"), Scalar("n", "n", "int32")]
    with pytest.raises(SpecError, match=r"^family 'scale': " + message):
        scale_spec(source, args=args, tune_params={"block_size_x": [128, 256], "ITEMS": [1]}, restrictions=[])


def test_a_template_kernel_is_named_for_each_configuration(source):
    family = scale_spec(source, kernel="scale<float, block_size_x * ITEMS, ITEMS == 1, unsigned int>")
    problem = Problem("scale", "float32", 1000)
    assert family.kernel_name({"block_size_x": 128, "ITEMS": 2}) == "scale<float, 256, false, unsigned int>"
    assert family.kernel_name({"block_size_x": 256, "ITEMS": 1}) == "scale<float, 256, true, unsigned int>"
    from tuner.measure.compile import module_key

    one, other = ({"block_size_x": 128, "ITEMS": 1}, {"block_size_x": 128, "ITEMS": 2})
    assert module_key(family, one, problem) != module_key(family, other, problem)
    plain = scale_spec(source, kernel="ns::scale")
    assert plain.kernel_name(one) == "ns::scale"


@pytest.mark.parametrize("kernel", ["scale(", "scale<float", "scale<, 4>", 'scale"x', "", 7])
def test_a_kernel_name_that_is_no_cpp_name_is_refused_at_load(source, kernel):
    with pytest.raises(SpecError, match=r"^family 'scale': kernel"):
        scale_spec(source, kernel=kernel)


def test_a_launch_over_the_devices_limits_is_infeasible_before_compiling(source):
    """stencil's 256 x 32 block is 8,192 threads: never compiled, said so."""
    family = scale_spec(source, tune_params={"block_size_x": [32, 256], "block_size_y": [4, 32], "ITEMS": [1]}, restrictions=[],
                        problem_size=["n", "n // 4"], grid_div_y=["block_size_y"])  # fmt: skip
    problem = Problem("scale", "float32", 1000)
    assert family.violations({"block_size_x": 256, "block_size_y": 32, "ITEMS": 1}, problem) == [
        "threads per block must be at most 1024 (CUDA's limit), got 8192 (block 256x32x1)"]
    assert family.violations({"block_size_x": 32, "block_size_y": 32, "ITEMS": 1}, problem) == []
    assert len(family.space(problem)) == 3
    tall = Problem("scale", "float32", 4 * 4 * 70_000)  # a grid of 70,000 blocks in y
    assert family.violations({"block_size_x": 32, "block_size_y": 4, "ITEMS": 1}, tall) == [
        "grid y must be at most 65535 (CUDA's limit), got 70000"]
