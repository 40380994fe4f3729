"""Choosing what to measure: exhaustive sweeps with a durable row store
(``sweep``), Optuna studies with per-configuration claims shared by workers
(``study``, ``claims``), and sampler replays against measured tables
(``replay``). Measurement reaches them as a ``measure(cfg) -> row`` callable,
so nothing here needs a GPU. May import ``tuner.families`` and ``tuner.data``.
"""
