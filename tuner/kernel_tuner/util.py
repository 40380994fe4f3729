"""What Kernel Tuner scripts import from ``kernel_tuner.util``: the compact
text of a result (``get_config_string``) and the markers of a failed
configuration (``ErrorConfig`` and its kinds)."""

from __future__ import annotations

from typing import Any, Iterable, Mapping


class ErrorConfig(str):
    """A failed configuration's marker in ``result["__error__"]`` (its text is its kind)."""

    def __str__(self) -> str:
        return type(self).__name__

    def __repr__(self) -> str:
        return type(self).__name__


class InvalidConfig(ErrorConfig):
    """The configuration could not be made (Kernel Tuner's marker)."""


class CompilationFailedConfig(ErrorConfig):
    """nvcc rejected the configuration."""


class RuntimeFailedConfig(ErrorConfig):
    """The launch or its timing failed."""


class WrongResultConfig(ErrorConfig):
    """The output did not match the answer (Kernel Tuner stops the run there; the pipeline records it and goes on)."""


def get_config_string(
    params: Mapping[str, Any], keys: Iterable[str] | None = None, units: Mapping[str, str] | None = None
) -> str:
    """``name=value, ...`` of ``params`` (floats to 3 decimals), only ``keys`` where given; Kernel Tuner's format."""
    keys = list(keys) if keys else list(params)
    items = []
    for key, value in params.items():
        if key in keys:
            text = f"{round(value, 3):.3f}" if isinstance(value, float) else str(value)
            unit = units.get(key, "") if isinstance(units, Mapping) and not isinstance(value, ErrorConfig) else ""
            items.append(f"{key}={text}{unit}")
    return ", ".join(items)
