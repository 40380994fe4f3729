"""Choosing what to measure, in three subpackages that import one way
(``tables`` -> ``study`` -> ``samplers``):

* ``samplers``: the search strategies, one registry (``samplers.registry``)
  and a module per strategy (the project's own ``ordinal`` and
  ``interactions``, Optuna's, brute force);
* ``study``: an Optuna study whose workers share per-configuration claims
  (``study.run``), the claims, their owners, the storages, the trials, warm
  starts and the time-energy study (``study.pareto``);
* ``tables``: the community's measured tables (Kernel Tuner caches, T4, T1)
  as families, and samplers replayed against tables (``tables.replay``).

Measurement reaches them as a ``measure(cfg) -> row`` callable, so nothing
here needs a GPU. The sweeps' row store is the sweep stage's
(``tuner.stages.sweep_store``).
"""
