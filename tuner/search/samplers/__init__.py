"""Search strategies: the registry (``registry``: name to factory, imported
without Optuna) and a module per strategy (``ordinal``, ``interactions``,
``brute_force``, ``optuna_builtin``), with what the project's own sampler is
made of (``ordinal_grid``, ``ordinal_history``, ``feasible_draws``) and the
protocols a sampler may implement for the study (``space_aware``). Nothing
here knows claims or storages (``tuner.search.study``)."""
