"""The profile stage: hardware counters of chosen sweep configurations, read
with Nsight Compute (``ncu``) while the measuring harness launches each once
more after verification. ``stage`` runs ncu and joins, ``child`` is the
profiled process, ``ncu`` the command line and its CSV; the counters' schema
is ``tuner.data.counters``."""
