"""Sweeps: the cartesian product of a grid of run parameters with seeds, on local cores, Dask or Ray."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, List, Mapping, Optional, Sequence, Tuple, Union

from . import _native
from ._api import _frame
from ._progress import Progress

if TYPE_CHECKING:
    import pandas

#: One grid: each key maps to one value or a list of values. Keys: ``device``, ``sched``, ``workload``, ``app``,
#: ``duration``, ``profile``; any other key is a scheduler tunable (``slice_idle``).
Grid = Mapping[str, Any]
#: A run as shipped to a worker (plain values; see ``_native.SweepPlan.specs``).
Spec = Tuple[Any, ...]

#: Batches per worker when ``batch`` is not given: enough to balance uneven run times, few enough that each task
#: holds many simulations (a simulation takes from a few ms, an idle-disk start-up, to about a second).
BATCHES_PER_WORKER = 4
#: Fewest simulations in a batch when ``batch`` is not given, so that every task is well above 10 ms of work.
MIN_BATCH = 8


def run_batch(specs: List[Spec]) -> List[str]:
    """Runs one batch of a sweep on one thread and returns each result as JSON text.

    This is the task every backend ships to its workers; it is importable (``bfq._sweep.run_batch``) so that Dask
    and Ray workers, which import ``bfq`` themselves, can run it.
    """
    return _native.run_specs(specs, 1, None)


def default_batch(runs: int, workers: int) -> int:
    """The batch size used when none is given: ``runs`` split into about ``BATCHES_PER_WORKER`` batches per
    worker, each of at least ``MIN_BATCH`` simulations (or all of them, if fewer)."""
    per_task = -(-runs // max(1, workers * BATCHES_PER_WORKER))
    return max(1, min(runs, max(MIN_BATCH, per_task)))


def _chunks(specs: List[Spec], size: int) -> List[List[Spec]]:
    return [specs[i : i + size] for i in range(0, len(specs), size)]


def _run_dask(specs: List[Spec], client: Any, batch: Optional[int], workers: Optional[int], bar: Progress) -> List[str]:
    from dask.distributed import Client, LocalCluster, as_completed

    own: List[Any] = []
    if client is None:
        cluster = LocalCluster(
            n_workers=workers or os.cpu_count() or 1,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
        )
        client = Client(cluster)
        own = [client, cluster]
    try:
        nworkers = max(1, sum(client.nthreads().values()))
        chunks = _chunks(specs, batch or default_batch(len(specs), nworkers))
        futures = [client.submit(run_batch, c, pure=False) for c in chunks]
        index = {f.key: i for i, f in enumerate(futures)}
        out: List[Optional[List[str]]] = [None] * len(chunks)
        try:
            for fut in as_completed(futures):
                i = index[fut.key]
                out[i] = fut.result()
                bar.advance(len(chunks[i]))
        except BaseException:
            client.cancel(futures)
            raise
        return [r for part in out for r in (part or [])]
    finally:
        for thing in own:
            thing.close()


def _run_ray(specs: List[Spec], client: Any, batch: Optional[int], workers: Optional[int], bar: Progress) -> List[str]:
    import ray

    if not ray.is_initialized():
        if client is not None:
            ray.init(address=client, include_dashboard=False, log_to_driver=False)
        else:
            ray.init(num_cpus=workers or os.cpu_count() or 1, include_dashboard=False, log_to_driver=False)
    nworkers = max(1, int(ray.available_resources().get("CPU", 1)))
    chunks = _chunks(specs, batch or default_batch(len(specs), nworkers))
    task = ray.remote(num_cpus=1)(run_batch)
    refs = [task.remote(c) for c in chunks]
    index = {r: i for i, r in enumerate(refs)}
    out: List[Optional[List[str]]] = [None] * len(chunks)
    pending = list(refs)
    try:
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            for r in ready:
                i = index[r]
                out[i] = ray.get(r)
                bar.advance(len(chunks[i]))
    except BaseException:
        for r in pending:
            ray.cancel(r)
        raise
    return [r for part in out for r in (part or [])]


def sweep(
    grid: Union[Grid, Sequence[Grid]],
    seeds: Union[int, Sequence[int]] = 1,
    backend: str = "local",
    client: Any = None,
    batch: Optional[int] = None,
    workers: Optional[int] = None,
    progress: bool = True,
) -> "pandas.DataFrame":
    """Runs every combination of ``grid`` with every seed and returns one row per simulation.

    Args:
        grid: a dict of run parameters, each one value or a list of values, e.g.
            ``{"device": ["seagate-hdd", "plextor-ssd"], "sched": "bfq", "slice_idle": [0, 8], "app": "xterm"}``;
            or a list of such dicts, whose products are concatenated (to give a tunable to one scheduler only).
            Keys: ``device``, ``sched``, ``workload``, ``app``, ``duration`` and ``profile`` as in :func:`bfq.run`
            (with its defaults); any other key is a scheduler tunable, which that scheduler must have.
        seeds: a count ``n`` (seeds 1 to n) or a list of seeds; every point runs once per seed.
        backend: ``"local"`` (this machine's cores, in threads with the GIL released), ``"dask"`` (a
            ``dask.distributed`` cluster) or ``"ray"``.
        client: for ``"dask"``, the ``dask.distributed.Client`` to use (a laptop's LocalCluster, SLURM, Kubernetes,
            ...); ``None`` starts a LocalCluster of ``workers`` single-threaded processes and closes it afterwards.
            For ``"ray"``, the address passed to ``ray.init`` when Ray is not initialised yet.
        batch: simulations per task on Dask and Ray (default: about four tasks per worker, at least
            ``MIN_BATCH`` simulations each). The local backend schedules single simulations.
        workers: threads (local), LocalCluster processes (dask, no client) or CPUs (ray, not initialised);
            default every core.
        progress: show progress (tqdm if installed, else a line on standard error).

    Returns:
        A :class:`pandas.DataFrame` with one row per (point, seed): points in grid order (the last key varying
        fastest), seeds innermost. Its columns are those of ``results.csv`` (see :func:`bfq.suite`), then one per
        grid key results.csv does not hold (each tunable, ``duration``, ``profile``) with the point's value. Every
        value depends only on the grid and the seeds, never on the backend, the batches or the number of workers.

    Raises:
        ValueError: a bad grid, or a point ``bfq run`` would refuse (checked before anything runs), with the
            command line's message.
        KeyboardInterrupt: Ctrl-C; local runs finish the simulations in progress, Dask and Ray tasks are
            cancelled.
    """
    if backend not in ("local", "dask", "ray"):
        raise ValueError(f"unknown backend '{backend}': use local, dask or ray")
    if batch is not None and (isinstance(batch, bool) or not isinstance(batch, int) or batch < 1):
        raise ValueError(f"batch {batch!r}: give a whole number of simulations per task, at least 1")
    plan = _native.plan_sweep(grid, seeds)
    specs = plan.specs()
    with Progress(len(specs), f"bfq sweep ({backend})", enabled=progress) as bar:
        if backend == "local":
            results = _native.run_specs(specs, workers or os.cpu_count() or 1, bar)
        elif backend == "dask":
            results = _run_dask(specs, client, batch, workers, bar)
        else:
            results = _run_ray(specs, client, batch, workers, bar)
    columns, values = plan.frame(results)
    return _frame(columns, values)
