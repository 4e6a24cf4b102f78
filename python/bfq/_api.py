"""What exists, one run, and one benchmark suite: typed wrappers over :mod:`bfq._native`."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence, Union

from . import _native
from ._progress import Progress

if TYPE_CHECKING:
    import pandas

#: A string, or a sequence of strings (each may itself be comma-separated, as on the command line).
Names = Union[str, Sequence[str]]
#: Scheduler tunables: ``{"slice_idle": 0, "low_latency": False}`` or ``["slice_idle=0", "low_latency=0"]``.
Tunables = Union[Mapping[str, Union[int, float, bool, str]], Sequence[str]]

_DEFAULTS = _native.run_defaults()


def schedulers() -> List[Dict[str, Any]]:
    """Every scheduling policy, as ``bfq schedulers`` lists them.

    Each is a dict with ``name``, ``aliases``, ``summary`` and ``tunables``: a list of dicts with ``name``,
    ``default`` (an int, or ``None`` when it depends on the device, then ``default_text`` says how), ``min``,
    ``max``, ``unit``, ``range`` (as text) and ``doc``. Tunables are named and in the units of the kernel's sysfs.
    """
    return _native.schedulers()


def devices() -> List[Dict[str, Any]]:
    """Every simulated device preset (docs/DEVICES.md).

    Each is a dict with ``name``, ``model`` (``hdd``, ``raid1``, ``ssd``, ``flash``, ``nvme``, ``array``),
    ``rotational``, ``queue_depth``, ``nr_requests``, ``max_sectors``, ``capacity_sectors`` and ``parameters`` (the
    model's fields, as a device TOML file writes them). A path to such a TOML file is accepted wherever a device name is.
    """
    return _native.devices()


def workloads() -> List[Dict[str, Any]]:
    """The named background workloads of the benchmarks.

    Each is a dict with ``name`` (``10r-seq``), ``canonical`` (``10r0w-seq``), ``readers``, ``writers``,
    ``pattern`` (``seq`` or ``rand``) and ``max_processes``. Any name of the grammar ``idle`` or
    ``<N>r<M>w-seq|rand`` (``3r2w-rand``, ``4w``) is accepted, with N and M up to ``max_processes``.
    """
    return _native.workloads()


def apps() -> List[Dict[str, Any]]:
    """The built-in application profiles whose cold-cache start-up is measured (docs/PROFILES.md).

    Each is a dict with ``name``, ``profile`` (the profile it names), ``alias_of`` (``None``, or the name it is an
    alias of), ``requests``, ``bytes`` and ``random_fraction``. A path to a profile file (``bfq record``) is
    accepted wherever an application name is.
    """
    return _native.apps()


def benchmarks() -> List[Dict[str, Any]]:
    """The benchmarks of :func:`suite` with ``name``, ``default_workloads``, ``default_reps`` and
    ``default_reps_paper`` (the repetitions with ``profile="paper"``)."""
    return _native.benchmarks()


def run(
    device: str = _DEFAULTS["device"],
    sched: str = _DEFAULTS["sched"],
    workload: str = _DEFAULTS["workload"],
    app: Optional[str] = None,
    tune: Optional[Tunables] = None,
    seed: int = _DEFAULTS["seed"],
    duration: Optional[float] = None,
    profile: str = _DEFAULTS["profile"],
    cpu_time: bool = False,
) -> Dict[str, Any]:
    """Runs one simulated experiment, as ``bfq run --json`` does, and returns its result.

    Args:
        device: a device preset (see :func:`devices`) or a device TOML file.
        sched: a scheduler name (see :func:`schedulers`).
        workload: the background workload (see :func:`workloads`).
        app: an application whose cold-cache start-up is measured (see :func:`apps`), or a profile file; without
            one the run measures throughput only.
        tune: scheduler tunables, e.g. ``{"slice_idle": 0, "low_latency": False}`` (booleans are written 1/0).
        seed: the seed of every random stream.
        duration: simulated seconds of a throughput run (default 20, as the command line's).
        profile: the settings era, ``"current"`` (S 3.6), ``"s2013"`` (S of November 2013, seed 004's)
            or ``"paper"`` (SYSTOR'12).
        cpu_time: also measure the wall-clock time spent inside the policy (the result is then not reproducible).

    Returns:
        A dict with the fields of ``bfq run --json``: ``benchmark``, ``target``, ``device``, ``scheduler``,
        ``tunables``, ``workload``, ``app``, ``rep``, ``seed``, ``startup_s`` (``None`` without an application or
        when it did not start within 60 s), ``timed_out``, ``throughput_mbps``, ``read_mbps``, ``write_mbps``,
        ``sched_cpu_ns_per_request`` and ``extra`` (a dict of further quantities).

    Raises:
        ValueError: bad input, with the command line's one-line message.
        RuntimeError: the simulator could not run the experiment (e.g. the files do not fit on the device).
        KeyboardInterrupt: Ctrl-C (the GIL is released while simulating).
    """
    return _native.run(device, sched, workload, app, tune, seed, duration, profile, cpu_time)


def run_json(
    device: str = _DEFAULTS["device"],
    sched: str = _DEFAULTS["sched"],
    workload: str = _DEFAULTS["workload"],
    app: Optional[str] = None,
    tune: Optional[Tunables] = None,
    seed: int = _DEFAULTS["seed"],
    duration: Optional[float] = None,
    profile: str = _DEFAULTS["profile"],
    cpu_time: bool = False,
) -> str:
    """Like :func:`run`, but returns the exact text ``bfq run --json`` prints (without its final newline)."""
    return _native.run_json(device, sched, workload, app, tune, seed, duration, profile, cpu_time)


def _frame(columns: List[str], values: List[List[Any]]) -> "pandas.DataFrame":
    import pandas

    return pandas.DataFrame({name: col for name, col in zip(columns, values)}, columns=columns)


def suite(
    benchmark: str,
    targets: Optional[Names] = None,
    scheds: Optional[Names] = None,
    workloads: Optional[Names] = None,
    apps: Optional[Names] = None,
    reps: Optional[int] = None,
    profile: Optional[str] = None,
    seed: int = 1,
    tune: Optional[Tunables] = None,
    duration: Optional[float] = None,
    file_size: Optional[int] = None,
    cpu_time: bool = False,
    jobs: Optional[int] = None,
    out: Optional[Union[str, "os.PathLike[str]"]] = None,
    progress: bool = True,
    allow_device: bool = False,
    app_cmd: Optional[str] = None,
    file_scale: Optional[float] = None,
    warmup: Optional[float] = None,
) -> "pandas.DataFrame":
    """Runs one benchmark as ``bfq suite`` does and returns one row per run, with the columns of ``results.csv``.

    Args:
        benchmark: ``throughput``, ``startup``, ``video``, ``fairness``, ``interleaved`` or ``iozone``
            (see :func:`benchmarks`).
        targets: ``sim:<device>`` (or a bare device name), ``engine:<dir>`` or ``kernel:<dir>``; default
            ``sim:seagate-hdd``. Real targets need root (docs/REAL.md).
        scheds: schedulers; default bfq, cfq, deadline and noop.
        workloads: the benchmark's workloads or parameters; default the benchmark's own.
        apps: applications of the startup benchmark; default xterm.
        reps: repetitions (1..=100); repetition i uses seed + i. Default the benchmark's.
        profile: ``"current"``, ``"s2013"`` or ``"paper"`` (throughput and startup only).
        seed: the seed of the first repetition.
        tune: tunables, each applied to every chosen scheduler that has the key.
        duration: measured simulated seconds (not for startup and iozone).
        file_size: iozone file size per thread, MiB.
        cpu_time: measure the policy's wall-clock CPU time (column ``sched_cpu_ns_per_request``).
        jobs: worker threads (default: every core).
        out: write the report (results.json and .csv, tables, charts, report.html) into this directory, as
            ``bfq suite --out`` does; its path is then in ``frame.attrs["report_dir"]`` and the files written in
            ``frame.attrs["report_files"]``.
        progress: show progress (tqdm if installed, else a line on standard error).
        allow_device, app_cmd, file_scale, warmup: the options of the real targets (``bfq suite --help``).

    Returns:
        A :class:`pandas.DataFrame`: the columns of results.csv (``benchmark``, ``target``, ``device``,
        ``scheduler``, ``tunables`` joined with ``;``, ``workload``, ``app``, ``rep``, ``seed``, ``startup_s``,
        ``timed_out``, ``throughput_mbps``, ``read_mbps``, ``write_mbps``, ``sched_cpu_ns_per_request``, then
        ``extra.<key>`` for each further quantity), missing values as NaN/None.

    Raises:
        ValueError: bad input, with the command line's one-line message.
        KeyboardInterrupt: Ctrl-C (the running simulations finish, no other starts).
    """
    bar = Progress(0, f"bfq suite {benchmark}", enabled=False)

    def report(done: int, total: int) -> None:
        nonlocal bar
        if bar.total != total:
            bar = Progress(total, f"bfq suite {benchmark}", enabled=progress)
        bar(done, total)

    out_path = None if out is None else os.fspath(out)
    try:
        columns, values, files = _native.suite(
            benchmark,
            targets=targets,
            scheds=scheds,
            workloads=workloads,
            apps=apps,
            reps=reps,
            profile=profile,
            seed=seed,
            tune=tune,
            duration=duration,
            file_size=file_size,
            cpu_time=cpu_time,
            allow_device=allow_device,
            app_cmd=app_cmd,
            file_scale=file_scale,
            warmup=warmup,
            jobs=jobs,
            out=out_path,
            progress=report,
        )
    finally:
        bar.close()
    frame = _frame(columns, values)
    if files is not None:
        frame.attrs["report_dir"] = out_path
        frame.attrs["report_files"] = files
    return frame
