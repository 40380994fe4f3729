"""The profile stage: hardware counters of chosen sweep configurations, read
with Nsight Compute (``ncu``) while the measuring harness launches each once
more after verification. ``stage`` runs ncu and joins, ``child`` is the
profiled process, ``ncu`` the command line and its CSV; the counters' schema
is ``tuner.data.counters``."""

from __future__ import annotations

import argparse


def arguments(parser, needs_device, measuring_child) -> None:
    """The ``profile`` subcommand's arguments (``tuner/cli.py`` makes the
    parser; here, not in ``stage``, so building it imports no pandas)."""
    parser.add_argument("names", nargs="+", metavar="name", help="sweeps of the config that set profile: (all under one ncu)")
    needs_device(parser)
    measuring_child(parser)
    parser.add_argument("--measurements", help="the sweep's rows, for one sweep (default: results/<gpu>/sweeps/<name>.parquet)")
    parser.add_argument("--plan", help=argparse.SUPPRESS)  # the child's: what to profile, where to say what it did
    parser.add_argument("--manifest", help=argparse.SUPPRESS)
