"""Families of one's own, outside the package: found through ``family_paths``,
checked, compiled and given their own result columns, with no stage changed."""

from __future__ import annotations

from pathlib import Path

import pytest

from tuner.data import results
from tuner.families import REGISTRY, Problem
from tuner.settings import ConfigError, Settings, parse

FAULTY_DIR = Path(__file__).parent / "data" / "faulty_family"
FAULTY = FAULTY_DIR / "faulty.py"


@pytest.fixture(autouse=True)
def registry_as_before():
    """Plug-ins registered by a test leave with it."""
    before = dict(REGISTRY.families)
    yield
    REGISTRY.families.clear()
    REGISTRY.families.update(before)


def plugin_config(tmp_path: Path) -> dict:
    return {
        "results_dir": str(tmp_path / "results"),
        "gpu": "test-gpu",
        "family_paths": [str(FAULTY)],
        "sweeps": {
            "faults": {
                "family": "faulty",
                "dtypes": ["float32"],
                "sizes": [4096],
                "params": {"reach": [0, 1], "block_size": [128, 256]},
            }
        },
    }


def test_a_family_file_is_registered_checked_and_carried_to_the_stages(tmp_path):
    settings = parse(plugin_config(tmp_path))
    assert "faulty" in REGISTRY.names()
    assert len(REGISTRY["faulty"].space(Problem("faulty", "float32", 4096), settings.sweeps["faults"].domains())) == 4
    again = Settings.from_stage_json(settings.stage_json("sweep", "faults"))
    assert again.run.family_paths == (str(FAULTY.resolve()),)
    bad = plugin_config(tmp_path)
    bad["sweeps"]["faults"]["params"]["reach"] = [2]
    with pytest.raises(ConfigError, match=r"^sweeps\.faults\.params\.reach\[0\]: must be one of \[0, 1\], got 2$"):
        parse(bad)


def test_a_missing_family_file_or_a_folder_is_one_line(tmp_path):
    config = plugin_config(tmp_path) | {"family_paths": [str(tmp_path / "nowhere.py")]}
    with pytest.raises(ConfigError, match=r"^family_paths: must name Python files that define families, got '.*nowhere.py'$"):
        parse(config)
    config = plugin_config(tmp_path) | {"family_paths": [str(FAULTY_DIR)]}
    with pytest.raises(ConfigError, match=r"^family_paths: must name Python files .*, a folder \(name the family's .py file in it\)$"):
        parse(config)


def test_family_paths_are_relative_to_the_config_file_and_only_named_files_are_imported(tmp_path, monkeypatch):
    import shutil

    import yaml

    from tuner.settings import load

    folder = tmp_path / "mine"
    shutil.copytree(FAULTY_DIR, folder)
    (folder / "script.py").write_text("raise SystemExit('a script beside the family must not run')\n")
    config = plugin_config(tmp_path) | {"family_paths": ["faulty.py"]}
    (folder / "config.yaml").write_text(yaml.safe_dump(config))
    monkeypatch.chdir(tmp_path)  # not the config's folder
    settings = load(folder / "config.yaml")
    assert settings.run.family_paths == (str((folder / "faulty.py").resolve()),)
    assert "faulty" in REGISTRY.names()


@pytest.mark.parametrize(
    "change, message",
    [
        ('dtypes = ("float32",)', r"family 'faulty': dtypes must be among \[.*\], got 'float64'"),
        ('"1: store 2^40 elements past the output (an illegal address)", default=0', r"parameter 'reach''s default must be one of \[0, 1\], got 5"),
        ("import numpy as np", r"failed to import: ZeroDivisionError: division by zero"),
        ("from pathlib import Path", r"failed to import: SystemExit: 0"),
        ('name = "faulty"', r"must define a family \(a Family subclass or a KernelSpec\), got none"),
    ],
    ids=["unknown-dtype", "default-outside-values", "import-error", "exit-at-import", "no-family"],
)
def test_a_broken_plugin_family_is_one_line_naming_its_file(tmp_path, change, message):
    text = FAULTY.read_text()
    replacement = {
        'dtypes = ("float32",)': 'dtypes = ("float64",)',
        '"1: store 2^40 elements past the output (an illegal address)", default=0': '"1: store 2^40 elements past the output (an illegal address)", default=5',
        "import numpy as np": "import numpy as np\n1 / 0",
        "from pathlib import Path": "from pathlib import Path\nimport sys\nsys.exit(0)",
        'name = "faulty"': "",
    }[change]
    assert change in text, change
    if change == 'name = "faulty"':  # no family at all: the class is gone
        text = text[: text.index("class ")]
    else:
        text = text.replace(change, replacement)
    (tmp_path / "faulty.cu").write_text((FAULTY_DIR / "faulty.cu").read_text())
    (tmp_path / "faulty.py").write_text(text)
    config = plugin_config(tmp_path) | {"family_paths": [str(tmp_path / "faulty.py")]}
    with pytest.raises(ConfigError, match=r"^family_paths: .*faulty.py.*" + message):
        parse(config)


def test_plugin_parameters_get_their_own_result_column(tmp_path):
    parse(plugin_config(tmp_path))
    frame = results.to_frame([{"family": "faulty", "reach": 1, "block_size": 128, "status": "ok"}])
    assert str(frame["reach"].dtype) == "Int64" and frame["reach"].iloc[0] == 1
    assert list(frame.columns).index("reach") < list(frame.columns).index("config_key")


def test_the_schema_follows_the_families_of_the_rows_not_those_loaded(tmp_path):
    parse(plugin_config(tmp_path))  # the plug-in is loaded in this process
    built_in = results.to_frame([{"family": "reduce", "status": "ok"}])
    assert "reach" not in built_in.columns
    assert "reach" in results.to_frame([{"family": "reduce", "status": "ok"}], families=[REGISTRY["faulty"]]).columns
    assert "reach" not in results.columns([REGISTRY["reduce"]]) and "reach" in results.columns([REGISTRY["faulty"]])


def test_a_plugin_family_compiles_with_nvcc(tmp_path):
    import shutil

    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not installed")
    from tuner.measure.compile import compile_variant

    parse(plugin_config(tmp_path))
    family = REGISTRY["faulty"]
    compiled = compile_variant(
        family, {"block_size": 128, "reach": 1}, Problem("faulty", "float32", 4096), arch="sm_90", cache_dir=tmp_path
    )
    assert compiled.kernel == "faulty_copy" and Path(compiled.cubin).stat().st_size > 0


def test_files_with_plugin_columns_read_back_without_the_plugin(tmp_path):
    import pandas as pd

    frame = results.to_frame([{"family": "reduce", "status": "ok"}])
    frame.insert(5, "colour", pd.Series(["red"], dtype="string"))
    frame.to_parquet(tmp_path / "rows.parquet")
    back = results.read(tmp_path / "rows.parquet")
    assert back["colour"].iloc[0] == "red" and list(back.columns).index("colour") < list(back.columns).index("config_key")
    with pytest.raises(ValueError, match=r"columns outside the schema: \['colour'\]"):
        results.to_frame(frame)


def test_the_compile_stage_fails_when_a_variant_does_not_compile(tmp_path, capsys, monkeypatch):
    import shutil

    import yaml

    from tuner import cli

    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not installed")
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "faulty.cu").write_text(
        (FAULTY_DIR / "faulty.cu").read_text().replace("#if REACH", "#if REACH\n    this does not compile;")
    )
    (broken / "faulty.py").write_text(FAULTY.read_text().replace('name = "faulty"', 'name = "broken"'))
    config = plugin_config(tmp_path) | {"family_paths": [str(broken / "faulty.py")]}
    config["sweeps"]["faults"]["family"] = "broken"
    path = tmp_path / "broken.yaml"
    path.write_text(yaml.safe_dump(config))
    out = tmp_path / "compile.parquet"
    with pytest.raises(SystemExit, match=r"^error: 2 of 4 modules failed to compile for sm_90; nothing written$"):
        cli.main(["compile", "--config", str(path), "--arch", "sm_90", "--out", str(out)])
    assert "compile error: broken float32" in capsys.readouterr().err
    assert not out.exists()
