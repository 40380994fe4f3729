"""The configuration, read and checked once, as typed, immutable settings.

``parse`` turns a config mapping (what Snakemake validated, or what ``load``
read from a file) into ``Settings``; every stage gets its own section of those
settings (``SweepSettings``, ``StudySettings``, ``RunSettings``) as JSON on its
command line and never reads ``config.yaml`` again. Every bad value stops the
run before any work with one line naming the key, the rule and the value::

    sweeps.reduce_ladder.sizes[0]: must be an integer from 1 to 4294967296 (...), got 1099511627776

The JSON schema (workflow/schemas/config.schema.yaml) states the structure;
``parse`` then applies the rules the schema cannot state, each parameter's one
acceptance rule (``Param.accepts``) among them, shared by sweeps and studies.
"""

from tuner.device.describe import DeviceFacts
from tuner.settings.model import STAGE_RUN_FIELDS, ConfigError, RunSettings, Settings, StudySettings, SweepSettings
from tuner.settings.overrides import typed_overrides
from tuner.settings.parse import check_arch, load, parse, schema_message, timing_options
from tuner.settings.yaml_file import read_yaml

__all__ = ["STAGE_RUN_FIELDS", "ConfigError", "check_arch", "DeviceFacts", "RunSettings", "Settings", "StudySettings", "SweepSettings",
           "load", "parse", "read_yaml", "schema_message", "timing_options", "typed_overrides"]  # fmt: skip
