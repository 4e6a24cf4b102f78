"""Times one 200-simulation sweep three ways and checks they agree: ``bfq.sweep`` on the local cores, on a
``dask.distributed.LocalCluster`` of 2 worker processes, and the ``bfq`` command line running the same 200
simulations (``bfq run --json``, 2 at a time through ``xargs -P 2``).

    BFQ_BIN=target/release/bfq python python/examples/sweep_timing.py

Asserts that the Dask frame equals the local one and that every CLI result equals its row, then prints the wall
times and the CPU times (user + system) each spent: the CPU time depends much less than the wall time on what else
the machine runs (docs/PERFORMANCE.md records them).
"""

from __future__ import annotations

import json
import os
import resource
import shlex
import subprocess
import tempfile
import time

import pandas as pd

import bfq

SCHEDS = ["cfq", "noop", "deadline", "mq-deadline", "kyber", "anticipatory"]
GRID = [
    {"device": ["seagate-hdd", "plextor-ssd"], "sched": "bfq", "slice_idle": [0, 8], "low_latency": [0, 1]},
    {"device": ["seagate-hdd", "plextor-ssd"], "sched": SCHEDS},
]
COMMON = {"workload": "10r-seq", "app": "xterm"}
SEEDS = 10  # 2 devices x 10 configurations x 10 seeds = 200 simulations


def cpu(who: int) -> float:
    """User + system CPU seconds of this process (with its threads) or of its waited-for children."""
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime


def worker_cpu() -> float:
    """User + system CPU seconds of the calling (Dask worker) process."""
    import psutil

    t = psutil.Process().cpu_times()
    return t.user + t.system


def main() -> None:
    grid = [{**g, **COMMON} for g in GRID]
    bin_ = os.environ.get("BFQ_BIN", "target/release/bfq")

    t, c = time.monotonic(), cpu(resource.RUSAGE_SELF)
    local = bfq.sweep(grid, seeds=SEEDS, workers=2, progress=False)
    t_local, c_local = time.monotonic() - t, cpu(resource.RUSAGE_SELF) - c
    assert len(local) == 200

    from dask.distributed import Client, LocalCluster

    t = time.monotonic()
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        with Client(cluster) as client:
            t_up = time.monotonic() - t
            before = client.run(worker_cpu)
            t, c = time.monotonic(), cpu(resource.RUSAGE_SELF)
            dask = bfq.sweep(grid, seeds=SEEDS, backend="dask", client=client, progress=False)
            t_dask, c_driver = time.monotonic() - t, cpu(resource.RUSAGE_SELF) - c
            after = client.run(worker_cpu)
            c_workers = sum(after[w] - before[w] for w in after)
    pd.testing.assert_frame_equal(dask, local)

    # The same simulations through the command line.
    plan = bfq._native.plan_sweep(grid, SEEDS)
    lines = []
    for device, sched, workload, app, tunables, seed, duration, profile in plan.specs():
        args = [bin_, "run", "--json", "--device", device, "--sched", sched, "--workload", workload,
                "--seed", str(seed), "--duration", str(duration), "--profile", profile]
        if app is not None:
            args += ["--app", app]
        for kv in tunables:
            args += ["--tune", kv]
        lines.append(" ".join(shlex.quote(a) for a in args))
    with tempfile.TemporaryDirectory() as d:
        script = os.path.join(d, "runs.sh")
        with open(script, "w") as f:
            for i, line in enumerate(lines):
                f.write(f"{line} > {d}/{i:04d}.json\n")
        t, c = time.monotonic(), cpu(resource.RUSAGE_CHILDREN)
        subprocess.run(f"xargs -d '\\n' -P 2 -n 1 sh -c < {shlex.quote(script)}", shell=True, check=True)
        t_cli, c_cli = time.monotonic() - t, cpu(resource.RUSAGE_CHILDREN) - c
        for i in range(len(lines)):
            with open(os.path.join(d, f"{i:04d}.json")) as f:
                r = json.load(f)
            row = local.iloc[i]
            assert (r["scheduler"], r["seed"], r["throughput_mbps"]) == (
                row["scheduler"], row["seed"], row["throughput_mbps"]
            ), i
            assert r["startup_s"] == (None if pd.isna(row["startup_s"]) else row["startup_s"]), i

    print(f"200 simulations, wall (CPU) seconds: local, 2 threads {t_local:.1f} ({c_local:.1f}); "
          f"dask LocalCluster, 2 processes {t_dask:.1f} (workers {c_workers:.1f} + driver {c_driver:.1f}), "
          f"plus {t_up:.1f} to start the cluster; CLI, 2 processes at a time {t_cli:.1f} ({c_cli:.1f})")
    print("frames identical (local vs dask), and every CLI result equals its row")


if __name__ == "__main__":
    main()
