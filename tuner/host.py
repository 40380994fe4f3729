"""What this process may use of its host: its CPUs, and its console (where a
command's refusal is one line, ``OneLineParser``).

A SLURM job or a container is given some of a node's CPUs (its affinity, a
cpuset), while ``os.cpu_count()`` counts the node's: a job of 4 CPUs on a
128-core node that started 128 nvcc processes, 128 figure processes or 128
input threads would run them 32 to a CPU, and nvcc's at a few hundred MB each
would need tens of GB of the job's memory.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import NoReturn


def usable_cpus() -> int:
    """The CPUs this process may run on (at least 1)."""
    if hasattr(os, "process_cpu_count"):  # Python 3.13: the affinity where there is one
        return os.process_cpu_count() or 1
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0)) or 1
    return os.cpu_count() or 1


def usable_cpus_but_one() -> int:
    """``usable_cpus`` but one (at least 1), for nvcc processes that run while
    something beside them measures: the peaks beside the compile stage, the
    measuring thread beside a study's background compiles."""
    return max(1, usable_cpus() - 1)


def tolerant_console() -> None:
    """Print what the console's encoding lacks as an escape (``\\u2014``) rather
    than stop on it: a stage's lines hold a few characters beyond ASCII (a dash
    for a missing figure, ±), and under a Latin-1 or ASCII locale (``LANG``,
    ``PYTHONIOENCODING``) printing one raised UnicodeEncodeError after the GPU
    work it reports was done."""
    for stream in (sys.stdout, sys.stderr):
        if getattr(stream, "errors", None) == "strict" and hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")


class OneLineParser(argparse.ArgumentParser):
    """argparse whose refusals are one line on stderr and exit status 2, as
    every refusal of the project's commands is: no usage block before it.
    ``error`` is for how the command was written (it points to ``--help``),
    ``refuse`` for what a name or a file it names holds. Its subcommands'
    parsers are of this class too."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {' '.join(message.split())} (see {self.prog} --help)\n")

    def refuse(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {' '.join(message.split())}\n")
