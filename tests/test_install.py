"""An install that is not editable holds the tuner package but not the source
checkout's kernels/ and workflow/schemas/ beside it: every command that needs
them stops in one line saying so, before any compile or GPU work (it compiled
nothing, blaming the kernel for a missing common.cuh, and read no config)."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from tuner.families.base import checkout_missing

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def test_the_checkouts_folders_are_found_here():
    from tuner.families.base import KERNELS_DIR
    from tuner.settings.parse import SCHEMA

    assert checkout_missing(KERNELS_DIR) is None and checkout_missing(SCHEMA) is None


def test_a_config_without_the_schema_beside_the_package_is_refused_in_one_line(tmp_path, monkeypatch):
    parse = importlib.import_module("tuner.settings.parse")  # the package's `parse` is the function of that name
    monkeypatch.setattr(parse, "SCHEMA", tmp_path / "workflow" / "schemas" / "config.schema.yaml")
    parse.config_schema.cache_clear()
    try:
        with pytest.raises(parse.ConfigError, match=r"config.schema.yaml: missing: .*pip install -e") as caught:
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
    with pytest.raises(check_family.FamilyDefect, match=r"kernels: missing: .*pip install -e"):
        check_family.check(EXAMPLES / "saxpy" / "saxpy.py", say=lambda line: None)
    with pytest.raises(ValueError, match=r"kernels: missing: .*pip install -e"):
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
