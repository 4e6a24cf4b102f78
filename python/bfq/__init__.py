"""BFQ and its peer I/O schedulers on bfq's deterministic storage simulator, from Python.

A thin layer over the Rust crates of the ``bfq`` project: every check, simulation and table is the one the
``bfq`` command line uses, so the same inputs give the same numbers and the same error messages.

>>> import bfq
>>> r = bfq.run(device="seagate-hdd", sched="bfq", workload="10r-seq", app="xterm")
>>> round(r["startup_s"], 2)  # doctest: +SKIP
0.85

What exists: :func:`schedulers`, :func:`devices`, :func:`workloads`, :func:`apps`, :func:`benchmarks`.
What runs: :func:`run` (one simulation, as ``bfq run --json``), :func:`suite` (one benchmark, as ``bfq suite``,
as a DataFrame), :func:`sweep` (a grid of runs with seeds, on this machine's cores, on Dask or on Ray).

Bad input raises :class:`ValueError` with the command line's one-line message; the GIL is released while
simulating, and Ctrl-C interrupts between simulations.
"""

from __future__ import annotations

from ._api import apps, benchmarks, devices, run, run_json, schedulers, suite, workloads
from ._sweep import sweep
from ._native import __version__

__all__ = [
    "__version__",
    "apps",
    "benchmarks",
    "devices",
    "run",
    "run_json",
    "schedulers",
    "suite",
    "sweep",
    "workloads",
]
