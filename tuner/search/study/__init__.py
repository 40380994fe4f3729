"""A study: the search loop (``run``) around a sampler of
``tuner.search.samplers``, the ``DistinctSampler`` that makes every trial a
distinct claimed configuration (``distinct``), the claims every worker shares
(``claims``, ``claim_records``, ``claims_sql``) and their owners (``owners``),
the storages (``storage``, ``storage_spec``, ``storage_server``), a trial's
steps (``trials``), what a run did (``outcome``), warm starts (``warm``), one
BLAS thread while choosing (``blas``) and the time-energy study of two
objectives (``pareto``). Importing the package imports nothing: the settings
check storages (``storage_spec``) without Optuna."""
