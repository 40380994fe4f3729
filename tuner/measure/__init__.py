"""Measuring one configuration: nvcc and the cubin cache (``compile``), the one
timing function (``timing``), verify-then-time into one results row
(``bench``), and the bandwidth yardsticks (``peaks``). May import
``tuner.families``, ``tuner.device`` and ``tuner.data``; never the search or
the report.
"""
