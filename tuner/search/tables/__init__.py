"""Measured tables searched again: the community's brute-forced spaces
(``community``: Kernel Tuner caches, T4 and T1 files, as a ``Family``; their
restrictions through ``expressions``) and samplers replayed against a table
(``replay``; ``replay_study``: one study worker on a table, as a cluster job)."""
