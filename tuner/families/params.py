"""Parameters several families share, with one rule each, so a block size or an
offset is checked (and explained in errors) the same way everywhere."""

from __future__ import annotations

from tuner.families.base import Param
from tuner.families.buffers import MAX_OFFSET_ELEMENTS

# Load paths for cache_hint, as the CACHE_HINT define: plain, read-only (__ldg), streaming (__ldcs).
CACHE_HINTS = {"none": 0, "ldg": 1, "stream": 2}


def block_size(default: int, values: tuple = (128, 256, 512, 1024)) -> Param:
    return Param("block_size", values, "threads per block", default=default,
                 rule=lambda b: isinstance(b, int) and b % 32 == 0 and 32 <= b <= 1024,
                 rule_text="a multiple of 32 from 32 to 1024")  # fmt: skip


def offset(values: tuple, doc: str) -> Param:
    return Param("offset", values, doc, default=0,
                 rule=lambda o: isinstance(o, int) and 0 <= o <= MAX_OFFSET_ELEMENTS,
                 rule_text=f"an integer from 0 to {MAX_OFFSET_ELEMENTS}")  # fmt: skip


def grid_blocks_per_sm(values: tuple, doc: str) -> Param:
    return Param("grid_blocks_per_sm", values, doc, default=0,
                 rule=lambda g: isinstance(g, int) and 0 <= g <= 64, rule_text="an integer from 0 to 64")  # fmt: skip


def cache_hint(values: tuple, doc: str) -> Param:
    return Param("cache_hint", values, doc, default="none",
                 rule=lambda h: h in CACHE_HINTS, rule_text=f"one of {list(CACHE_HINTS)}")  # fmt: skip
