"""The measuring stages, one module each: ``sweep`` (every feasible
configuration of a sweep) and ``tune`` (an Optuna study on one or more GPUs);
the profile stage is ``tuner.profile.stage``. Each loads its settings once
(the command line hands them over), chooses and records in its own process,
which never touches CUDA, and measures in one restartable measuring process
per GPU (``tuner.measure.remote``)."""
