"""The files the package reads at run time (kernels/, workflow/, the lessons'
config) are found in one place, tuner.resources: the checkout's own here, the
wheel's copies in an install (tests/test_wheel.py installs one). Where they are
missing, every command that needs them stops in one line saying so, before any
compile or GPU work (an install without them once compiled nothing, blaming the
kernel for a missing common.cuh, and read no config)."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from tuner import resources
from tuner.resources import resource_missing

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


def test_the_checkouts_folders_are_found_here():
    from tuner.families.base import KERNELS_DIR
    from tuner.settings.parse import SCHEMA

    assert resources.checkout_root() == ROOT and resources.root() == ROOT
    for path in (KERNELS_DIR, SCHEMA, resources.figure_list_file(), resources.workflow_snakefile(), resources.lessons_config()):
        assert resource_missing(path) is None and ROOT in path.parents
    assert resources.reference_results() == ROOT / "results" / "reference"


def test_an_installs_own_copies_come_before_a_checkout(tmp_path, monkeypatch):
    """A wheel's tuner/_resources is read wherever it is, and an install beside no checkout has no reference results."""
    package = tmp_path / "site-packages" / "tuner"
    (package / resources.BUNDLED_FOLDER / "kernels").mkdir(parents=True)
    monkeypatch.setattr(resources, "package_dir", lambda: package)
    assert resources.root() == package / resources.BUNDLED_FOLDER
    assert resources.kernels_dir() == package / resources.BUNDLED_FOLDER / "kernels"
    assert resources.checkout_root() is None and resources.reference_results() is None
    missing = resource_missing(resources.config_schema_file())
    assert missing.startswith(str(resources.config_schema_file())) and "\n" not in missing


def test_a_config_without_the_schema_beside_the_package_is_refused_in_one_line(tmp_path, monkeypatch):
    parse = importlib.import_module("tuner.settings.parse")  # the package's `parse` is the function of that name
    monkeypatch.setattr(parse, "SCHEMA", tmp_path / "workflow" / "schemas" / "config.schema.yaml")
    parse.config_schema.cache_clear()
    try:
        with pytest.raises(parse.ConfigError, match=r"config.schema.yaml: missing: .*from its wheel .*pip install -e") as caught:
            parse.parse({"results_dir": str(tmp_path / "results")})
        assert "\n" not in str(caught.value)
    finally:
        parse.config_schema.cache_clear()


def test_check_family_and_tune_without_the_kernels_folder_stop_before_compiling(tmp_path, monkeypatch):
    import tuner.api as api
    import tuner.check_family as check_family
    import tuner.measure.compile as compile_module

    gone = tmp_path / "site-packages" / "kernels"
    monkeypatch.setattr(check_family, "KERNELS_DIR", gone)
    monkeypatch.setattr(api, "KERNELS_DIR", gone)
    monkeypatch.setattr(compile_module, "_run_nvcc", lambda *a, **k: pytest.fail("nvcc ran"))
    with pytest.raises(check_family.FamilyDefect, match=r"kernels: missing: .*from its wheel .*pip install -e"):
        check_family.check(EXAMPLES / "saxpy" / "saxpy.py", say=lambda line: None)
    with pytest.raises(ValueError, match=r"kernels: missing: .*from its wheel .*pip install -e"):
        api.tune("reduce", n=1 << 20, results=str(tmp_path / "results"))


def test_an_installed_plug_in_that_fails_to_load_is_left_out_in_one_line(monkeypatch, capsys):
    # Every command imports tuner.families: one project's broken plug-in stopped report and best of all others.
    import tuner.families as families

    class Broken:
        name, value = "brokenplug", "brokenplug_missing:family"

        def load(self):
            raise ModuleNotFoundError("No module named 'brokenplug_missing'")

    monkeypatch.setattr(families, "entry_points", lambda group: [Broken()])
    monkeypatch.setattr(families, "UNLOADED", {})
    families._load_entry_points()
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "plug-in family 'brokenplug' (brokenplug_missing:family) left out" in err
    assert "No module named 'brokenplug_missing'" in families.UNLOADED["brokenplug"]
