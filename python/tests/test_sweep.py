"""Sweeps: grid expansion, the same frame on every backend and worker count, and bad grids refused up front."""

from __future__ import annotations

import time

import pandas as pd
import pytest

import bfq

# Short runs: throughput for 1-2 simulated seconds, and start-ups on an idle disk.
GRID = [
    {"device": ["seagate-hdd", "plextor-ssd"], "sched": "bfq", "workload": "5r5w-seq", "duration": [1, 2],
     "slice_idle": [0, 8], "low_latency": [False, True]},
    {"device": ["seagate-hdd", "plextor-ssd"], "sched": ["cfq", "noop"], "workload": "idle", "app": "bash"},
]
POINTS = 2 * 2 * 2 * 2 + 2 * 2


@pytest.fixture(scope="module")
def local_frame() -> pd.DataFrame:
    return bfq.sweep(GRID, seeds=[1, 5], progress=False)


def test_rows_follow_the_grid_with_seeds_innermost(local_frame):
    f = local_frame
    assert len(f) == POINTS * 2
    assert list(f["seed"][:4]) == [1, 5, 1, 5]
    # Columns: results.csv's, then the grid keys it does not hold, in first-seen order.
    assert [c for c in f.columns if not c.startswith("extra.")][-3:] == ["duration", "slice_idle", "low_latency"]
    first = f.iloc[0]
    assert (first["device"], first["scheduler"], first["duration"], first["slice_idle"], first["low_latency"]) == (
        "seagate-hdd", "bfq", 1, 0, False
    )
    assert first["tunables"] == "slice_idle=0;low_latency=0"
    # The last key varies fastest.
    assert list(f["low_latency"][:4:2]) == [False, True]
    tail = f.iloc[-1]
    assert (tail["device"], tail["scheduler"], tail["app"]) == ("plextor-ssd", "noop", "bash")
    assert pd.isna(tail["slice_idle"]) and pd.isna(tail["duration"])


def test_every_row_is_the_run_it_names(local_frame):
    for i in [0, 7, 13, len(local_frame) - 1]:
        row = local_frame.iloc[i]
        tune = [t for t in row["tunables"].split(";") if t]
        r = bfq.run(
            device=row["device"],
            sched=row["scheduler"],
            workload=row["workload"],
            app=row["app"] if isinstance(row["app"], str) else None,
            tune=tune,
            seed=int(row["seed"]),
            duration=None if pd.isna(row["duration"]) else float(row["duration"]),
        )
        assert r["throughput_mbps"] == row["throughput_mbps"]
        assert r["extra"]["block_requests"] == row["extra.block_requests"]


def test_local_frames_do_not_depend_on_the_worker_count(local_frame):
    one = bfq.sweep(GRID, seeds=[1, 5], workers=1, progress=False)
    pd.testing.assert_frame_equal(one, local_frame)


def test_dask_local_cluster_with_two_processes_gives_the_same_frame(local_frame):
    distributed = pytest.importorskip("dask.distributed")
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cluster, distributed.Client(cluster) as client:
        assert len(client.nthreads()) == 2
        for batch in [None, 1, 5]:
            frame = bfq.sweep(GRID, seeds=[1, 5], backend="dask", client=client, batch=batch, progress=False)
            pd.testing.assert_frame_equal(frame, local_frame)
        # Bad input is refused before anything is submitted, with the command line's message.
        with pytest.raises(ValueError, match="unknown scheduler 'fastest'"):
            bfq.sweep({"sched": ["bfq", "fastest"]}, backend="dask", client=client, progress=False)


def test_dask_without_a_client_starts_its_own_cluster(local_frame):
    pytest.importorskip("dask.distributed")
    small = [GRID[1]]
    want = local_frame[local_frame["workload"] == "idle"].reset_index(drop=True)
    got = bfq.sweep(small, seeds=[1, 5], backend="dask", workers=2, progress=False)
    pd.testing.assert_frame_equal(got[[c for c in want.columns if c in got.columns]], want[[c for c in want.columns if c in got.columns]])


def test_ray_gives_the_same_frame(local_frame):
    try:
        import ray
    except ImportError:
        pytest.skip("ray is not installed (pip install ray); the Ray backend is untested here")
    try:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    except Exception as e:  # pragma: no cover - depends on the machine
        pytest.skip(f"ray does not start on this machine: {e}")
    try:
        for batch in [None, 3]:
            frame = bfq.sweep(GRID, seeds=[1, 5], backend="ray", batch=batch, progress=False)
            pd.testing.assert_frame_equal(frame, local_frame)
    finally:
        ray.shutdown()


@pytest.mark.parametrize(
    "grid,kwargs,message",
    [
        ({"sched": ["bfq", "noop"], "slice_idle": 0}, {}, "noop has no tunable 'slice_idle'"),
        ({"sched": "bfq", "slice_idle": [0, -1]}, {}, "slice_idle"),
        ({"device": ["seagate-hdd", "floppy"]}, {}, "unknown device 'floppy'"),
        ({"workload": "3x"}, {}, "unknown workload `3x`"),
        ({"app": ["xterm", "emacs"]}, {}, "unknown application 'emacs'"),
        ({"duration": 0.5}, {}, "--duration 0.5 is too short"),
        ({"seed": [1, 2]}, {}, "seeds="),
        ({"device": 5}, {}, "takes text"),
        ({"sched": []}, {}, "has no values"),
        ({"sched": {"a": 1}}, {}, "not a string, a number"),
        ([], {}, "empty list"),
        ("bfq", {}, "give a dict"),
        ({"sched": "bfq"}, {"seeds": 0}, "seeds 0"),
        ({"sched": "bfq"}, {"seeds": []}, "seeds is empty"),
        ({"sched": "bfq"}, {"seeds": [-1]}, "seed -1"),
        ({"sched": "bfq"}, {"backend": "spark"}, "unknown backend 'spark'"),
        ({"sched": "bfq"}, {"batch": 0}, "batch 0"),
        ({"sched": "bfq", "x": list(range(10_000)), "y": list(range(10_000))}, {}, "more than 10000000"),
    ],
)
def test_bad_grids_are_refused_before_anything_runs(grid, kwargs, message):
    start = time.monotonic()
    with pytest.raises(ValueError) as e:
        bfq.sweep(grid, progress=False, **kwargs)
    assert message in str(e.value)
    assert time.monotonic() - start < 5


def test_the_messages_are_the_command_lines(cli):
    out = cli("run", "--sched", "noop", "--tune", "slice_idle=0")
    with pytest.raises(ValueError) as e:
        bfq.sweep({"sched": "noop", "slice_idle": 0}, progress=False)
    assert "bfq: " + str(e.value) == out.stderr.strip()
