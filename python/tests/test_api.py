"""The package against the `bfq` command line: listings, `run` against `bfq run --json`, `suite` against
`bfq suite`, bad input, the GIL and Ctrl-C."""

from __future__ import annotations

import filecmp
import inspect
import json
import os
import signal
import subprocess
import sys
import threading
import time

import pandas as pd
import pytest

import bfq

# (CLI arguments of `bfq run`, the same run as keyword arguments of bfq.run)
RUNS = [
    ([], {}),
    (
        ["--app", "xterm", "--tune", "slice_idle=0", "--tune", "low_latency=0"],
        {"app": "xterm", "tune": {"slice_idle": 0, "low_latency": False}},
    ),
    (
        ["--device", "plextor-ssd", "--sched", "cfq", "--workload", "5r5w-rand", "--duration", "3"],
        {"device": "plextor-ssd", "sched": "cfq", "workload": "5r5w-rand", "duration": 3},
    ),
    (
        ["--device", "nvme", "--sched", "noop", "--workload", "idle", "--app", "bash", "--seed", "7"],
        {"device": "nvme", "sched": "noop", "workload": "idle", "app": "bash", "seed": 7},
    ),
    (
        ["--sched", "deadline", "--workload", "1r-seq", "--profile", "paper", "--duration", "2.5",
         "--tune", "fifo_batch=8"],
        {"sched": "deadline", "workload": "1r-seq", "profile": "paper", "duration": 2.5, "tune": ["fifo_batch=8"]},
    ),
]


@pytest.mark.parametrize("args,kwargs", RUNS, ids=[" ".join(a) or "defaults" for a, _ in RUNS])
def test_run_gives_the_numbers_of_bfq_run_json(cli, args, kwargs):
    out = cli("run", "--json", *args)
    assert out.returncode == 0, out.stderr
    want = json.loads(out.stdout)
    got = bfq.run(**kwargs)
    assert got == want
    # Not only equal after parsing: the very text.
    assert bfq.run_json(**kwargs) + "\n" == out.stdout
    # And deterministic.
    assert bfq.run(**kwargs) == got


def test_run_defaults_are_the_command_lines():
    sig = inspect.signature(bfq.run)
    for key, value in bfq._native.run_defaults().items():
        if key == "duration":
            assert sig.parameters[key].default is None  # None: the command line's default
        else:
            assert sig.parameters[key].default == value, key


BAD_RUNS = [
    (["--sched", "fastest"], {"sched": "fastest"}),
    (["--device", "floppy"], {"device": "floppy"}),
    (["--workload", "3x"], {"workload": "3x"}),
    (["--app", "emacs"], {"app": "emacs"}),
    (["--tune", "slice_idle=-5"], {"tune": {"slice_idle": -5}}),
    (["--tune", "no_such_knob=1"], {"tune": ["no_such_knob=1"]}),
    (["--tune", "slice_idle=8.5"], {"tune": {"slice_idle": 8.5}}),
    (["--duration", "0"], {"duration": 0}),
    (["--duration", "0.5"], {"duration": 0.5}),
    (["--profile", "future"], {"profile": "future"}),
    (["--device", "floppy", "--sched", "fastest"], {"device": "floppy", "sched": "fastest"}),
]


@pytest.mark.parametrize("args,kwargs", BAD_RUNS, ids=[" ".join(a) for a, _ in BAD_RUNS])
def test_bad_run_input_raises_value_error_with_the_cli_message(cli, args, kwargs):
    out = cli("run", *args)
    assert out.returncode != 0
    line = out.stderr.strip()
    assert line.startswith("bfq: ") and "\n" not in line, line
    with pytest.raises(ValueError) as e:
        bfq.run(**kwargs)
    assert str(e.value) == line[len("bfq: "):]


@pytest.mark.parametrize(
    "kwargs",
    [{"seed": -1}, {"seed": 1.5}, {"tune": 5}, {"duration": "long"}, {"tune": [1]}],
)
def test_values_of_the_wrong_type_are_value_errors(kwargs):
    with pytest.raises(ValueError):
        bfq.run(**kwargs)


def test_listings_match_the_command_line(cli):
    out = cli("schedulers")
    assert out.returncode == 0
    text = out.stdout
    scheds = bfq.schedulers()
    assert [s["name"] for s in scheds] == [
        line.split(":")[0].split(" ")[0] for line in text.splitlines() if line and not line.startswith(" ")
    ]
    blocks = [b.splitlines() for b in text.strip().split("\n\n")]
    assert len(blocks) == len(scheds)
    for s, block in zip(scheds, blocks):
        assert block[0].startswith(s["name"]) and s["summary"] in block[0]
        for t in s["tunables"]:
            line = next(l for l in block[1:] if l.strip().startswith(t["name"] + " "))
            assert t["range"] in line and t["default_text"] in line, (s["name"], t["name"])
            if t["default"] is not None:
                assert t["min"] <= t["default"] <= t["max"]
    helptext = cli("run", "--help").stdout
    for d in bfq.devices():
        assert d["name"] in helptext
        assert d["model"] in {"hdd", "raid1", "ssd", "flash", "nvme", "array"}
        assert d["parameters"]["model"] == d["model"]
    for w in bfq.workloads():
        assert bfq.run(workload=w["name"], duration=1, sched="noop")["workload"] == w["name"]
    names = {a["name"] for a in bfq.apps()}
    assert {"bash", "xterm", "lowriter", "oowriter"} <= names
    for a in bfq.apps():
        assert (a["alias_of"] is None) == (a["profile"] == a["name"])
    assert [b["name"] for b in bfq.benchmarks()] == [
        "throughput", "startup", "video", "fairness", "interleaved", "iozone"
    ]


SUITE_ARGS = ["suite", "startup", "--target", "sim:seagate-hdd,plextor-ssd", "--sched", "bfq,noop",
              "--workloads", "idle,10r-seq", "--reps", "1", "--seed", "3"]


def test_suite_writes_the_same_report_and_rows_as_bfq_suite(cli, tmp_path):
    # The report records the command line; the package records the equivalent one, so with the same arguments
    # in the same order every file is byte-identical.
    (tmp_path / "cli").mkdir()
    (tmp_path / "py").mkdir()
    out = cli(*SUITE_ARGS, "--out", "report", cwd=tmp_path / "cli")
    assert out.returncode == 0, out.stderr
    cwd = os.getcwd()
    os.chdir(tmp_path / "py")
    try:
        frame = bfq.suite(
            "startup",
            targets="sim:seagate-hdd,plextor-ssd",
            scheds=["bfq", "noop"],
            workloads="idle,10r-seq",
            reps=1,
            seed=3,
            out="report",
            progress=False,
        )
    finally:
        os.chdir(cwd)
    assert frame.attrs["report_dir"] == "report"
    a, b = tmp_path / "cli" / "report", tmp_path / "py" / "report"
    names = sorted(os.listdir(a))
    assert names == sorted(os.listdir(b))
    assert "results.csv" in names and "report.html" in names
    match, mismatch, errors = filecmp.cmpfiles(a, b, names, shallow=False)
    assert mismatch == [] and errors == []
    # The frame holds exactly results.csv's columns and values.
    csv = pd.read_csv(a / "results.csv", keep_default_na=False, dtype=str)
    assert list(frame.columns) == list(csv.columns)
    assert len(frame) == len(csv) == 2 * 2 * 2
    for col in frame.columns:
        for got, want in zip(frame[col], csv[col]):
            if want == "":
                assert got is None or got == "" or (isinstance(got, float) and pd.isna(got)), (col, got)
            elif isinstance(got, bool):
                assert str(got).lower() == want, col
            elif isinstance(got, float):
                assert got == float(want), col
            else:
                assert str(got) == want, col


def test_suite_frame_matches_single_runs():
    frame = bfq.suite("throughput", scheds="bfq,deadline", workloads="1r-seq", duration=2, reps=2, progress=False)
    assert len(frame) == 4
    for _, row in frame.iterrows():
        r = bfq.run(sched=row["scheduler"], workload="1r-seq", duration=2, seed=int(row["seed"]))
        assert r["throughput_mbps"] == row["throughput_mbps"]


@pytest.mark.parametrize(
    "args,kwargs",
    [
        (["suite", "bogus"], {"benchmark": "bogus"}),
        (["suite", "startup", "--reps", "0"], {"benchmark": "startup", "reps": 0}),
        (["suite", "startup", "--reps", "many"], {"benchmark": "startup", "reps": "many"}),
        (["suite", "throughput", "--apps", "xterm"], {"benchmark": "throughput", "apps": "xterm"}),
        (["suite", "startup", "--sched", "bfq,zzz"], {"benchmark": "startup", "scheds": "bfq,zzz"}),
        (["suite", "startup", "--target", "sim:floppy"], {"benchmark": "startup", "targets": ["sim:floppy"]}),
        (["suite", "startup", "--duration", "5"], {"benchmark": "startup", "duration": 5}),
        (["suite", "throughput", "--file-scale", "0.5"], {"benchmark": "throughput", "file_scale": 0.5}),
        (["suite", "video", "--jobs", "0"], {"benchmark": "video", "jobs": 0}),
    ],
)
def test_bad_suite_input_raises_value_error_with_the_cli_message(cli, tmp_path, args, kwargs):
    out = cli(*args, "--out", str(tmp_path / "r"))
    assert out.returncode != 0
    line = out.stderr.strip().splitlines()[-1]
    assert line.startswith("bfq: "), out.stderr
    with pytest.raises(ValueError) as e:
        bfq.suite(progress=False, **kwargs)
    assert str(e.value) == line[len("bfq: "):]


def test_the_gil_is_released_while_simulating():
    done = threading.Event()
    result = {}

    def work():
        # Ten random readers on the SSD for 5 simulated seconds: 369 577 device requests, 0.17 s of CPU
        # (`bfq run --device plextor-ssd --workload 10r-rand --sched noop --duration 5 --json`, session 9).
        result["r"] = bfq.run(device="plextor-ssd", workload="10r-rand", sched="noop", duration=5)
        done.set()

    t = threading.Thread(target=work)
    t.start()
    ticks = 0
    while not done.is_set():
        ticks += 1
        time.sleep(0.001)
    t.join()
    assert result["r"]["device"] == "plextor-ssd"
    # Holding the GIL, the run would have stopped this loop for its whole length: a tick or two before and after
    # it. Released, the loop ticks about once a millisecond while the run lasts.
    assert ticks >= 10, ticks


CTRL_C = """
import sys, time, bfq
print("started", flush=True)
try:
    bfq.{call}
except KeyboardInterrupt:
    print("interrupted", flush=True)
    sys.exit(3)
print("finished", flush=True)
"""


@pytest.mark.parametrize(
    "call",
    [
        "sweep({'sched': ['bfq', 'cfq'], 'app': 'lowriter', 'workload': '10r-seq'}, seeds=200, workers=1, progress=False)",
        "suite('startup', apps='lowriter', reps=100, jobs=1, progress=False)",
        "run(sched='noop', workload='10r-seq', duration=3000)",
    ],
    ids=["sweep", "suite", "run"],
)
def test_ctrl_c_interrupts(call):
    proc = subprocess.Popen(
        [sys.executable, "-c", CTRL_C.format(call=call)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "started"
    time.sleep(1.0)
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    waited = time.monotonic() - sent
    assert "interrupted" in out, (out, err)
    assert proc.returncode == 3
    # Hundreds of simulations (or one of tens of seconds) were left: the interrupt returned at once, without
    # waiting for them.
    assert waited < 5, waited
