"""The config schema's timing block is TimingOptions' own: every option, its
type, default and bounds, and a value out of bounds refused in the same words
by the schema (a config) and by TimingOptions (Python)."""

from __future__ import annotations

from dataclasses import fields

import pytest

from tuner.measure.timing import TimingOptions
from tuner.settings import ConfigError
from tuner.settings.parse import check_schema, config_schema


def test_every_option_is_in_the_schema_with_its_default():
    block = config_schema()["$defs"]["timing"]
    assert block["additionalProperties"] is False
    defaults = {f.name: f.default for f in fields(TimingOptions)}
    assert {name: entry["default"] for name, entry in block["properties"].items()} == defaults
    kinds = {"integer": int, "number": float, "boolean": bool}
    assert all(type(defaults[name]) is kinds[entry["type"]] for name, entry in block["properties"].items())


@pytest.mark.parametrize(
    "option, value",
    [("warmup", -1), ("min_samples", 1), ("min_time_s", -0.5), ("max_time_s", 0), ("target_rel_spread", 0),
     ("hold_us", 10_001), ("hold_us", -1), ("throttle_ratio", 1), ("throttle_ratio", -0.1)],
)  # fmt: skip
def test_out_of_bounds_is_refused_alike_by_the_schema_and_the_options(option, value):
    with pytest.raises(ValueError) as python:
        TimingOptions(**{option: value})
    with pytest.raises(ConfigError) as config:
        check_schema({"results_dir": "results", "timing": {option: value}})
    assert str(config.value) == str(python.value).replace(f"timing.{option} ", f"timing.{option}: ")


def test_values_within_bounds_pass_both():
    edges = {"warmup": 0, "min_samples": 2, "max_samples": 2, "min_time_s": 0, "hold_us": 10_000, "throttle_ratio": 0}
    check_schema({"results_dir": "results", "timing": edges})
    assert TimingOptions(**edges).hold_us == 10_000
