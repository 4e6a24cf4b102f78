//! `bfq._native`: the Rust side of the `bfq` Python package.
//!
//! A thin layer over the workspace's crates: every check, every simulation and every table comes from `bfq-suite`
//! (`request.rs` for the options of `bfq run` and `bfq suite`, `report::csv::runs_table` for the columns of
//! `results.csv`), so the numbers and the error messages are those of the `bfq` command line by construction. What
//! this module adds is the Python edge: conversions, the GIL released while simulating, Ctrl-C checked between
//! simulations, progress callbacks, and the expansion of a sweep's grid into runs.

use bfq_suite::report::csv::{runs_table, Field};
use bfq_suite::report::outdir::ReportDir;
use bfq_suite::request::{suite_meta, write_report, RunChecker, RunRequest, SuiteRequest};
use bfq_suite::scenario::{Era, ScenarioError};
use bfq_suite::suite::{plan, run_jobs_until, Benchmark};
use bfq_suite::{Experiment, RunResult};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use pyo3::IntoPyObjectExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

/// How often the waiting thread looks for a Ctrl-C while simulations run.
const SIGNAL_POLL: Duration = Duration::from_millis(100);

/// A suite error as a Python exception: bad input is a `ValueError`, a failure of the simulator or of a real device
/// a `RuntimeError`; the message is the command line's, without its `bfq: ` prefix.
fn py_err(e: ScenarioError) -> PyErr {
    let msg = e.to_string();
    match e {
        ScenarioError::Sim(_) | ScenarioError::Real(_) => PyRuntimeError::new_err(msg),
        _ => PyValueError::new_err(msg),
    }
}

/// A JSON value as the Python value `json.loads` would give.
fn json_to_py<'py>(py: Python<'py>, v: &serde_json::Value) -> PyResult<Bound<'py, PyAny>> {
    use serde_json::Value;
    Ok(match v {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => b.into_bound_py_any(py)?,
        Value::Number(n) => match (n.as_u64(), n.as_i64(), n.as_f64()) {
            (Some(u), _, _) => u.into_bound_py_any(py)?,
            (None, Some(i), _) => i.into_bound_py_any(py)?,
            (None, None, f) => f.unwrap_or(f64::NAN).into_bound_py_any(py)?,
        },
        Value::String(s) => s.into_bound_py_any(py)?,
        Value::Array(a) => {
            let list = PyList::empty(py);
            for x in a {
                list.append(json_to_py(py, x)?)?;
            }
            list.into_any()
        }
        Value::Object(o) => {
            let d = PyDict::new(py);
            for (k, x) in o {
                d.set_item(k, json_to_py(py, x)?)?;
            }
            d.into_any()
        }
    })
}

/// A serialisable value as the Python value of its JSON.
fn to_py<'py, T: serde::Serialize>(py: Python<'py>, v: &T) -> PyResult<Bound<'py, PyAny>> {
    let value = serde_json::to_value(v).map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
    json_to_py(py, &value)
}

/// A table value as a Python value (`None` for a missing one).
fn field_to_py<'py>(py: Python<'py>, f: &Field) -> PyResult<Bound<'py, PyAny>> {
    match f {
        Field::Text(t) => t.into_bound_py_any(py),
        Field::Int(n) => n.into_bound_py_any(py),
        Field::Float(v) => v.into_bound_py_any(py),
        Field::Bool(b) => b.into_bound_py_any(py),
        Field::Missing => Ok(py.None().into_bound(py)),
    }
}

/// Runs `jobs` on `threads` threads with the GIL released. Between simulations (and every [`SIGNAL_POLL`]) the
/// calling thread takes the GIL back to call `progress(done, total)` and to look for Ctrl-C. An interrupt (or an
/// exception from `progress`) starts no further simulation and returns at once with `KeyboardInterrupt`: the
/// simulations already running cannot be stopped half-way, so they finish in the background and their results
/// are dropped.
fn run_experiments(
    py: Python<'_>,
    jobs: Vec<Experiment>,
    threads: usize,
    progress: Option<&Bound<'_, PyAny>>,
) -> PyResult<Vec<RunResult>> {
    let progress: Option<Py<PyAny>> = progress.filter(|p| !p.is_none()).map(|p| p.clone().unbind());
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel::<Event>();
    let worker_stop = Arc::clone(&stop);
    // Not scoped: an interrupt must not wait for the simulations in progress.
    std::thread::Builder::new()
        .name("bfq-runs".into())
        .spawn(move || {
            let progress_tx = tx.clone();
            let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                run_jobs_until(&jobs, threads, &worker_stop, &|done, total| {
                    // The receiver is gone after an interrupt: nobody wants the progress any more.
                    let _ = progress_tx.send(Event::Progress(done, total));
                })
            }));
            let _ = tx.send(Event::Done(outcome.map_err(|_| ())));
        })
        .map_err(|e| PyRuntimeError::new_err(format!("cannot start the simulation thread: {e}")))?;
    py.detach(move || loop {
        let event = match rx.recv_timeout(SIGNAL_POLL) {
            Ok(Event::Done(Ok(r))) => return r.map_err(py_err),
            Ok(Event::Done(Err(()))) => {
                return Err(PyRuntimeError::new_err("a simulation panicked (see the message above)"))
            }
            Ok(Event::Progress(done, total)) => Some((done, total)),
            Err(mpsc::RecvTimeoutError::Timeout) => None,
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return Err(PyRuntimeError::new_err("the simulation thread ended without a result"))
            }
        };
        let checked = Python::attach(|py| -> PyResult<()> {
            if let (Some(cb), Some((done, total))) = (&progress, event) {
                cb.bind(py).call1((done, total))?;
            }
            py.check_signals()
        });
        if let Err(e) = checked {
            stop.store(true, Ordering::Relaxed);
            return Err(e);
        }
    })
}

/// What the simulation thread tells the waiting thread.
enum Event {
    /// `done` of `total` simulations have finished.
    Progress(usize, usize),
    /// Every simulation has ended (or one panicked).
    Done(Result<Result<Vec<RunResult>, ScenarioError>, ()>),
}

/// Text items from a string (one item; commas are split by the suite) or a sequence of strings.
fn text_items(v: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<String>> {
    if let Ok(s) = v.cast::<PyString>() {
        return Ok(vec![s.to_cow()?.into_owned()]);
    }
    let mut out = Vec::new();
    for item in v
        .try_iter()
        .map_err(|_| PyValueError::new_err(format!("{what}: give a string or a list of strings")))?
    {
        let item = item?;
        match item.cast::<PyString>() {
            Ok(s) => out.push(s.to_cow()?.into_owned()),
            Err(_) => {
                return Err(PyValueError::new_err(format!(
                    "{what}: {} is not a string",
                    item.repr()?
                )))
            }
        }
    }
    Ok(out)
}

/// A tunable value as it is written on the command line: `True`/`False` as 1/0, anything else as `str()` gives it.
fn tunable_text(v: &Bound<'_, PyAny>) -> PyResult<String> {
    if let Ok(b) = v.cast::<PyBool>() {
        return Ok(if b.is_true() { "1" } else { "0" }.to_string());
    }
    Ok(v.str()?.to_cow()?.into_owned())
}

/// Tunables as `key=value` texts from a mapping `{key: value}` or a sequence of `"key=value"` strings.
fn tunables(v: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<String>> {
    let Some(v) = v.filter(|v| !v.is_none()) else {
        return Ok(Vec::new());
    };
    if let Ok(d) = v.cast::<PyDict>() {
        let mut out = Vec::new();
        for (k, x) in d.iter() {
            out.push(format!("{}={}", k.str()?.to_cow()?, tunable_text(&x)?));
        }
        return Ok(out);
    }
    text_items(v, "tune")
}

/// A whole number in `u64` from a Python value, or a `ValueError` naming the option.
fn whole<T: TryFrom<u64>>(v: &Bound<'_, PyAny>, option: &str) -> PyResult<T> {
    let bad = || {
        PyValueError::new_err(format!(
            "{option} {} is not a whole number in range",
            v.repr().map(|r| r.to_string()).unwrap_or_default()
        ))
    };
    if v.is_instance_of::<PyBool>() || !v.is_instance_of::<PyInt>() {
        return Err(bad());
    }
    let n: u64 = v.extract().map_err(|_| bad())?;
    T::try_from(n).map_err(|_| bad())
}

/// A number of seconds (int or float) as `f64`.
fn seconds(v: &Bound<'_, PyAny>, option: &str) -> PyResult<f64> {
    if v.is_instance_of::<PyBool>() || !(v.is_instance_of::<PyInt>() || v.is_instance_of::<PyFloat>()) {
        return Err(PyValueError::new_err(format!(
            "{option} {} is not a number of seconds",
            v.repr()?
        )));
    }
    v.extract()
}

/// The run asked for by the keyword arguments of `bfq.run` (`None` for the command line's default).
#[allow(clippy::too_many_arguments)]
fn run_request(
    device: Option<String>,
    sched: Option<String>,
    workload: Option<String>,
    app: Option<String>,
    tune: Option<&Bound<'_, PyAny>>,
    seed: Option<&Bound<'_, PyAny>>,
    duration: Option<&Bound<'_, PyAny>>,
    profile: Option<String>,
    cpu_time: bool,
) -> PyResult<RunRequest> {
    let d = RunRequest::default();
    Ok(RunRequest {
        device: device.unwrap_or(d.device),
        sched: sched.unwrap_or(d.sched),
        workload: workload.unwrap_or(d.workload),
        app,
        seed: match seed.filter(|s| !s.is_none()) {
            Some(s) => whole(s, "seed")?,
            None => d.seed,
        },
        tunables: tunables(tune)?,
        profile: profile.unwrap_or(d.profile),
        duration_s: match duration.filter(|s| !s.is_none()) {
            Some(s) => seconds(s, "duration")?,
            None => d.duration_s,
        },
        cpu_time,
        hz: d.hz,
    })
}

/// One simulated run, as `bfq run --json` (see `bfq.run`).
#[pyfunction]
#[pyo3(signature = (device=None, sched=None, workload=None, app=None, tune=None, seed=None, duration=None, profile=None, cpu_time=false))]
#[allow(clippy::too_many_arguments)]
fn run<'py>(
    py: Python<'py>,
    device: Option<String>,
    sched: Option<String>,
    workload: Option<String>,
    app: Option<String>,
    tune: Option<&Bound<'py, PyAny>>,
    seed: Option<&Bound<'py, PyAny>>,
    duration: Option<&Bound<'py, PyAny>>,
    profile: Option<String>,
    cpu_time: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let req = run_request(device, sched, workload, app, tune, seed, duration, profile, cpu_time)?;
    let exp = req.experiment().map_err(py_err)?;
    let mut results = run_experiments(py, vec![exp], 1, None)?;
    let r = results
        .pop()
        .ok_or_else(|| PyRuntimeError::new_err("the run gave no result"))?;
    to_py(py, &r)
}

/// The text `bfq run --json` prints for the same run.
#[pyfunction]
#[pyo3(signature = (device=None, sched=None, workload=None, app=None, tune=None, seed=None, duration=None, profile=None, cpu_time=false))]
#[allow(clippy::too_many_arguments)]
fn run_json(
    py: Python<'_>,
    device: Option<String>,
    sched: Option<String>,
    workload: Option<String>,
    app: Option<String>,
    tune: Option<&Bound<'_, PyAny>>,
    seed: Option<&Bound<'_, PyAny>>,
    duration: Option<&Bound<'_, PyAny>>,
    profile: Option<String>,
    cpu_time: bool,
) -> PyResult<String> {
    let req = run_request(device, sched, workload, app, tune, seed, duration, profile, cpu_time)?;
    let exp = req.experiment().map_err(py_err)?;
    let mut results = run_experiments(py, vec![exp], 1, None)?;
    let r = results
        .pop()
        .ok_or_else(|| PyRuntimeError::new_err("the run gave no result"))?;
    Ok(bfq_suite::request::result_json(&r))
}

/// The defaults of `bfq run`, as a dict of `bfq.run`'s keyword arguments.
#[pyfunction]
fn run_defaults(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let d = RunRequest::default();
    let out = PyDict::new(py);
    out.set_item("device", d.device)?;
    out.set_item("sched", d.sched)?;
    out.set_item("workload", d.workload)?;
    out.set_item("app", d.app)?;
    out.set_item("seed", d.seed)?;
    out.set_item("duration", d.duration_s)?;
    out.set_item("profile", d.profile)?;
    Ok(out)
}

/// A runs table as `(columns, values per column)`.
fn table_to_py<'py>(py: Python<'py>, header: Vec<String>, rows: &[Vec<Field>]) -> PyResult<Bound<'py, PyTuple>> {
    let columns = PyList::empty(py);
    for i in 0..header.len() {
        let col = PyList::empty(py);
        for row in rows {
            col.append(field_to_py(py, row.get(i).unwrap_or(&Field::Missing))?)?;
        }
        columns.append(col)?;
    }
    PyTuple::new(py, [header.into_bound_py_any(py)?, columns.into_any()])
}

/// Runs one benchmark as `bfq suite` does; returns `(columns, values per column, report files or None)`.
#[pyfunction]
#[pyo3(signature = (benchmark, targets=None, scheds=None, workloads=None, apps=None, reps=None, profile=None, seed=None, tune=None, duration=None, file_size=None, cpu_time=false, allow_device=false, app_cmd=None, file_scale=None, warmup=None, jobs=None, out=None, progress=None))]
#[allow(clippy::too_many_arguments)]
fn suite<'py>(
    py: Python<'py>,
    benchmark: String,
    targets: Option<&Bound<'py, PyAny>>,
    scheds: Option<&Bound<'py, PyAny>>,
    workloads: Option<&Bound<'py, PyAny>>,
    apps: Option<&Bound<'py, PyAny>>,
    reps: Option<&Bound<'py, PyAny>>,
    profile: Option<String>,
    seed: Option<&Bound<'py, PyAny>>,
    tune: Option<&Bound<'py, PyAny>>,
    duration: Option<&Bound<'py, PyAny>>,
    file_size: Option<&Bound<'py, PyAny>>,
    cpu_time: bool,
    allow_device: bool,
    app_cmd: Option<String>,
    file_scale: Option<f64>,
    warmup: Option<&Bound<'py, PyAny>>,
    jobs: Option<&Bound<'py, PyAny>>,
    out: Option<PathBuf>,
    progress: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyTuple>> {
    let given = |v: Option<&Bound<'py, PyAny>>| v.filter(|v| !v.is_none()).cloned();
    let mut req = SuiteRequest::new(&benchmark);
    if let Some(t) = given(targets) {
        req.targets = text_items(&t, "targets")?;
    }
    if let Some(s) = given(scheds) {
        req.schedulers = text_items(&s, "scheds")?;
    }
    req.workloads = given(workloads).map(|w| text_items(&w, "workloads")).transpose()?;
    req.apps = given(apps).map(|a| text_items(&a, "apps")).transpose()?;
    // As typed: the suite's own message names a repetition count that is not a number.
    req.reps = given(reps).map(|r| r.str().map(|s| s.to_string())).transpose()?;
    req.profile = profile;
    if let Some(s) = given(seed) {
        req.seed = whole(&s, "seed")?;
    }
    req.tunables = tunables(tune)?;
    req.duration_s = given(duration).map(|d| seconds(&d, "duration")).transpose()?;
    req.file_size_mib = given(file_size).map(|f| whole(&f, "file_size")).transpose()?;
    req.cpu_time = cpu_time;
    req.allow_device = allow_device;
    req.app_cmd = app_cmd;
    req.file_scale = file_scale;
    req.warmup_s = given(warmup).map(|w| seconds(&w, "warmup")).transpose()?;
    let jobs_requested: Option<usize> = given(jobs).map(|j| whole(&j, "jobs")).transpose()?;

    let cfg = req.config().map_err(py_err)?;
    let planned = plan(&cfg).map_err(py_err)?;
    // Checked before any run, as the command line does: a bad directory must not throw away the work.
    let report = out
        .as_ref()
        .map(|o| ReportDir::prepare(o).map_err(|e| PyValueError::new_err(e.to_string())))
        .transpose()?;
    let threads = SuiteRequest::threads(&cfg, jobs_requested, planned.len()).map_err(py_err)?;
    let results = run_experiments(py, planned, threads, progress)?;
    let files = match (report, &out) {
        (Some(dir), Some(o)) => {
            let meta = suite_meta(&cfg, req.command_line(Some(&o.to_string_lossy())));
            let files = write_report(dir, o, &results, &meta).map_err(py_err)?;
            Some(
                files
                    .iter()
                    .map(|f| f.to_string_lossy().into_owned())
                    .collect::<Vec<_>>(),
            )
        }
        _ => None,
    };
    let (header, rows) = runs_table(&results);
    let table = table_to_py(py, header, &rows)?;
    PyTuple::new(
        py,
        [table.get_item(0)?, table.get_item(1)?, files.into_bound_py_any(py)?],
    )
}

/// A value of a sweep's grid.
#[derive(Debug, Clone, PartialEq)]
enum Param {
    None,
    Bool(bool),
    Int(i64),
    Float(f64),
    Text(String),
}

impl Param {
    fn from_py(v: &Bound<'_, PyAny>, key: &str) -> PyResult<Param> {
        Ok(if v.is_none() {
            Param::None
        } else if let Ok(b) = v.cast::<PyBool>() {
            Param::Bool(b.is_true())
        } else if v.is_instance_of::<PyInt>() {
            Param::Int(v.extract()?)
        } else if v.is_instance_of::<PyFloat>() {
            Param::Float(v.extract()?)
        } else if let Ok(s) = v.cast::<PyString>() {
            Param::Text(s.to_cow()?.into_owned())
        } else {
            return Err(PyValueError::new_err(format!(
                "grid key '{key}': {} is not a string, a number, a bool or None",
                v.repr()?
            )));
        })
    }

    /// The value in a table column.
    fn field(&self) -> Field {
        match self {
            Param::None => Field::Missing,
            Param::Bool(b) => Field::Bool(*b),
            Param::Int(i) => match u64::try_from(*i) {
                Ok(u) => Field::Int(u),
                Err(_) => Field::Float(*i as f64),
            },
            Param::Float(f) => Field::Float(*f),
            Param::Text(t) => Field::Text(t.clone()),
        }
    }

    /// The value as a tunable's text (as `bfq.run`'s `tune` writes it).
    fn tunable_text(&self) -> String {
        match self {
            Param::None => "None".into(),
            Param::Bool(b) => if *b { "1" } else { "0" }.into(),
            Param::Int(i) => i.to_string(),
            Param::Float(f) => format!("{f:?}"),
            Param::Text(t) => t.clone(),
        }
    }

    fn text(&self, key: &str) -> PyResult<String> {
        match self {
            Param::Text(t) => Ok(t.clone()),
            other => Err(PyValueError::new_err(format!(
                "grid key '{key}' takes text, not {other:?}"
            ))),
        }
    }
}

/// Grid keys that set a run's options rather than a tunable; every other key is a scheduler tunable.
const RUN_KEYS: [&str; 6] = ["device", "sched", "workload", "app", "duration", "profile"];
/// Grid keys whose value is already a column of `results.csv` (under its own name there).
const RESULT_KEYS: [&str; 4] = ["device", "sched", "workload", "app"];

/// Most simulations one sweep may plan (ten million: hours of a large cluster's time); more is surely a typing
/// mistake, refused before memory is spent on it.
const MAX_SWEEP_RUNS: usize = 10_000_000;

/// One point of a sweep with one seed.
struct Point {
    req: RunRequest,
    params: Vec<(String, Param)>,
}

/// The runs of a sweep: the cartesian product of each grid (grids in order, keys in order, the last key varying
/// fastest), each point once per seed (seeds innermost). Built and checked by `plan_sweep`.
#[pyclass(frozen, module = "bfq._native")]
struct SweepPlan {
    points: Vec<Point>,
    /// The columns added to the results table: grid keys results.csv does not hold, in first-seen order.
    param_columns: Vec<String>,
}

/// A run as it travels to a worker (a plain tuple, cheap to pickle).
type Spec = (String, String, String, Option<String>, Vec<String>, u64, f64, String);

fn spec_of(r: &RunRequest) -> Spec {
    (
        r.device.clone(),
        r.sched.clone(),
        r.workload.clone(),
        r.app.clone(),
        r.tunables.clone(),
        r.seed,
        r.duration_s,
        r.profile.clone(),
    )
}

fn request_of(s: Spec) -> RunRequest {
    let (device, sched, workload, app, tunables, seed, duration_s, profile) = s;
    RunRequest {
        device,
        sched,
        workload,
        app,
        seed,
        tunables,
        profile,
        duration_s,
        cpu_time: false,
        hz: None,
    }
}

#[pymethods]
impl SweepPlan {
    /// Number of simulations.
    fn __len__(&self) -> usize {
        self.points.len()
    }

    /// The runs as plain tuples, in row order, for `run_specs`.
    fn specs(&self) -> Vec<Spec> {
        self.points.iter().map(|p| spec_of(&p.req)).collect()
    }

    /// The sweep's table from the results of `run_specs` (JSON texts, in row order): the columns of results.csv,
    /// then one column per grid key results.csv does not hold (tunables, duration, profile).
    fn frame<'py>(&self, py: Python<'py>, results: Vec<String>) -> PyResult<Bound<'py, PyTuple>> {
        if results.len() != self.points.len() {
            return Err(PyValueError::new_err(format!(
                "{} results for {} runs",
                results.len(),
                self.points.len()
            )));
        }
        let parsed = results
            .iter()
            .map(|j| serde_json::from_str::<RunResult>(j))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| PyRuntimeError::new_err(format!("a result does not parse: {e}")))?;
        let (mut header, mut rows) = runs_table(&parsed);
        for (row, p) in rows.iter_mut().zip(&self.points) {
            for key in &self.param_columns {
                let v = p
                    .params
                    .iter()
                    .find(|(k, _)| k == key)
                    .map_or(Field::Missing, |(_, v)| v.field());
                row.push(v);
            }
        }
        header.extend(self.param_columns.iter().cloned());
        table_to_py(py, header, &rows)
    }
}

/// Expands `grid` (a dict of key -> value or list of values, or a list of such dicts) with `seeds` into a checked
/// [`SweepPlan`]; every point is checked as `bfq run` would check it, before anything runs.
///
/// `seeds` is a count `n` (seeds 1 to n) or a list of seeds.
#[pyfunction]
fn plan_sweep(grid: &Bound<'_, PyAny>, seeds: &Bound<'_, PyAny>) -> PyResult<SweepPlan> {
    let seeds: Vec<u64> = if seeds.is_instance_of::<PyInt>() && !seeds.is_instance_of::<PyBool>() {
        let n: u64 = whole(seeds, "seeds")?;
        if n > MAX_SWEEP_RUNS as u64 {
            return Err(PyValueError::new_err(format!(
                "seeds {n}: a sweep runs at most {MAX_SWEEP_RUNS} simulations"
            )));
        }
        if n == 0 {
            return Err(PyValueError::new_err(
                "seeds 0: give a count of at least 1, or a list of seeds",
            ));
        }
        (1..=n).collect()
    } else {
        let mut out = Vec::new();
        for s in seeds
            .try_iter()
            .map_err(|_| PyValueError::new_err("seeds: give a count, or a list of seeds"))?
        {
            out.push(whole(&s?, "seed")?);
        }
        out
    };
    if seeds.is_empty() {
        return Err(PyValueError::new_err(
            "seeds is empty: give a count (1 for seed 1) or a list of seeds",
        ));
    }
    let grids: Vec<Bound<'_, PyDict>> = if let Ok(d) = grid.cast::<PyDict>() {
        vec![d.clone()]
    } else if let Ok(l) = grid.cast::<PyList>() {
        l.iter()
            .map(|g| {
                g.cast::<PyDict>()
                    .cloned()
                    .map_err(|_| PyValueError::new_err("grid: give a dict, or a list of dicts"))
            })
            .collect::<PyResult<_>>()?
    } else {
        return Err(PyValueError::new_err("grid: give a dict, or a list of dicts"));
    };
    if grids.is_empty() {
        return Err(PyValueError::new_err("grid is an empty list: give at least one dict"));
    }
    let mut param_columns: Vec<String> = Vec::new();
    let mut points = Vec::new();
    let mut checker = RunChecker::default();
    for g in &grids {
        let mut axes: Vec<(String, Vec<Param>)> = Vec::new();
        for (k, v) in g.iter() {
            let key: String = k.extract().map_err(|_| {
                PyValueError::new_err(format!(
                    "grid key {} is not a string",
                    k.repr().map(|r| r.to_string()).unwrap_or_default()
                ))
            })?;
            if key == "seed" || key == "seeds" {
                return Err(PyValueError::new_err(
                    "grid key 'seed': give the seeds with sweep(..., seeds=...)",
                ));
            }
            if key == "tune" || key == "cpu_time" {
                return Err(PyValueError::new_err(format!(
                    "grid key '{key}' is not sweepable: name each tunable as a key of its own, e.g. {{'slice_idle': [0, 8]}}"
                )));
            }
            let values: Vec<Param> = if v.is_instance_of::<PyList>()
                || v.is_instance_of::<PyTuple>()
                || v.is_instance_of::<pyo3::types::PyRange>()
            {
                v.try_iter()?
                    .map(|x| Param::from_py(&x?, &key))
                    .collect::<PyResult<_>>()?
            } else {
                vec![Param::from_py(&v, &key)?]
            };
            if values.is_empty() {
                return Err(PyValueError::new_err(format!("grid key '{key}' has no values")));
            }
            if !RESULT_KEYS.contains(&key.as_str()) && !param_columns.contains(&key) {
                param_columns.push(key.clone());
            }
            axes.push((key, values));
        }
        // The cartesian product, the last axis fastest.
        let total = axes
            .iter()
            .try_fold(1usize, |acc, (_, v)| acc.checked_mul(v.len()))
            .filter(|t| t.saturating_mul(seeds.len()).saturating_add(points.len()) <= MAX_SWEEP_RUNS)
            .ok_or_else(|| {
                PyValueError::new_err(format!(
                    "the grid asks for more than {MAX_SWEEP_RUNS} simulations: split it"
                ))
            })?;
        for n in 0..total {
            let mut rest = n;
            let mut chosen: Vec<(String, Param)> = vec![(String::new(), Param::None); axes.len()];
            for (i, (key, values)) in axes.iter().enumerate().rev() {
                chosen[i] = (key.clone(), values[rest % values.len()].clone());
                rest /= values.len();
            }
            let mut req = RunRequest::default();
            for (key, value) in &chosen {
                match key.as_str() {
                    "device" => req.device = value.text(key)?,
                    "sched" => req.sched = value.text(key)?,
                    "workload" => req.workload = value.text(key)?,
                    "app" => {
                        req.app = match value {
                            Param::None => None,
                            v => Some(v.text(key)?),
                        }
                    }
                    "duration" => {
                        req.duration_s = match value {
                            Param::Int(i) => *i as f64,
                            Param::Float(f) => *f,
                            other => {
                                return Err(PyValueError::new_err(format!(
                                    "grid key 'duration' takes seconds, not {other:?}"
                                )))
                            }
                        }
                    }
                    "profile" => req.profile = value.text(key)?,
                    tunable => req.tunables.push(format!("{tunable}={}", value.tunable_text())),
                }
            }
            debug_assert!(RUN_KEYS.iter().all(|k| !k.is_empty()));
            checker.check(&req).map_err(py_err)?;
            for &seed in &seeds {
                points.push(Point {
                    req: RunRequest { seed, ..req.clone() },
                    params: chosen.clone(),
                });
            }
        }
    }
    Ok(SweepPlan { points, param_columns })
}

/// Runs `specs` (from `SweepPlan.specs`) on `threads` threads with the GIL released, calling `progress(done,
/// total)` after each; returns each result as JSON text, in the order of `specs`.
#[pyfunction]
#[pyo3(signature = (specs, threads=1, progress=None))]
fn run_specs(
    py: Python<'_>,
    specs: Vec<Spec>,
    threads: usize,
    progress: Option<&Bound<'_, PyAny>>,
) -> PyResult<Vec<String>> {
    let jobs = specs
        .into_iter()
        .map(|s| request_of(s).experiment())
        .collect::<Result<Vec<_>, _>>()
        .map_err(py_err)?;
    let threads = bfq_suite::limits::jobs(threads).map_err(|e| PyValueError::new_err(e.to_string()))?;
    let threads = bfq_suite::limits::worker_threads(threads, jobs.len());
    let results = run_experiments(py, jobs, threads, progress)?;
    results
        .iter()
        .map(|r| serde_json::to_string(r).map_err(|e| PyRuntimeError::new_err(e.to_string())))
        .collect()
}

/// Every policy with its tunables (see `bfq.schedulers`).
#[pyfunction]
fn schedulers(py: Python<'_>) -> PyResult<Bound<'_, PyList>> {
    let out = PyList::empty(py);
    for p in bfq_sched::policies() {
        let d = PyDict::new(py);
        d.set_item("name", p.name)?;
        d.set_item("aliases", p.aliases.to_vec())?;
        d.set_item("summary", p.summary)?;
        let tunables = PyList::empty(py);
        for t in p.tunables {
            let td = PyDict::new(py);
            td.set_item("name", t.name)?;
            let default = match t.default {
                bfq_sched::tunables::DefaultValue::Fixed(v) => Some(v),
                bfq_sched::tunables::DefaultValue::Device(..) => None,
            };
            td.set_item("default", default)?;
            td.set_item("default_text", t.default_text())?;
            td.set_item("min", t.min)?;
            td.set_item("max", t.max)?;
            td.set_item("unit", t.unit)?;
            td.set_item("range", t.range_text())?;
            td.set_item("doc", t.doc)?;
            tunables.append(td)?;
        }
        d.set_item("tunables", tunables)?;
        out.append(d)?;
    }
    Ok(out)
}

/// Every device preset with its model's parameters (see `bfq.devices`).
#[pyfunction]
fn devices(py: Python<'_>) -> PyResult<Bound<'_, PyList>> {
    let out = PyList::empty(py);
    for name in bfq_sim::device::preset_names() {
        let Some(cfg) = bfq_sim::device::preset(name) else {
            continue;
        };
        let info = cfg.build().info();
        let params = to_py(py, &cfg)?;
        let d = PyDict::new(py);
        d.set_item("name", *name)?;
        d.set_item("model", params.get_item("model")?)?;
        d.set_item("rotational", info.rotational)?;
        d.set_item("queue_depth", info.queue_depth)?;
        d.set_item("nr_requests", info.nr_requests)?;
        d.set_item("max_sectors", info.max_sectors)?;
        d.set_item("capacity_sectors", info.capacity_sectors)?;
        d.set_item("parameters", params)?;
        out.append(d)?;
    }
    Ok(out)
}

/// The named background workloads (see `bfq.workloads`).
#[pyfunction]
fn workloads(py: Python<'_>) -> PyResult<Bound<'_, PyList>> {
    let out = PyList::empty(py);
    let mut names: Vec<&str> = Vec::new();
    for b in [Benchmark::Startup, Benchmark::Throughput] {
        for w in b.default_workloads() {
            if !names.contains(w) {
                names.push(w);
            }
        }
    }
    for name in names {
        let spec =
            bfq_workload::workloads::WorkloadSpec::parse(name).map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
        let d = PyDict::new(py);
        d.set_item("name", name)?;
        d.set_item("canonical", spec.name())?;
        d.set_item("readers", spec.readers)?;
        d.set_item("writers", spec.writers)?;
        d.set_item("pattern", spec.pattern_name())?;
        d.set_item("max_processes", bfq_workload::workloads::MAX_WORKLOAD_PROCESSES)?;
        out.append(d)?;
    }
    Ok(out)
}

/// The built-in application profiles (see `bfq.apps`).
#[pyfunction]
fn apps(py: Python<'_>) -> PyResult<Bound<'_, PyList>> {
    let out = PyList::empty(py);
    for name in bfq_workload::profile::SYNTHETIC_NAMES {
        let Some(spec) = bfq_workload::profile::synthetic_spec(name) else {
            continue;
        };
        let d = PyDict::new(py);
        d.set_item("name", name)?;
        d.set_item("profile", &spec.name)?;
        d.set_item("alias_of", (spec.name != name).then_some(spec.name.clone()))?;
        d.set_item("requests", spec.requests)?;
        d.set_item("bytes", spec.bytes)?;
        d.set_item("random_fraction", spec.random_fraction)?;
        out.append(d)?;
    }
    Ok(out)
}

/// The benchmarks of `bfq suite` with their defaults (see `bfq.benchmarks`).
#[pyfunction]
fn benchmarks(py: Python<'_>) -> PyResult<Bound<'_, PyList>> {
    let out = PyList::empty(py);
    for b in Benchmark::ALL {
        let d = PyDict::new(py);
        d.set_item("name", b.name())?;
        d.set_item("default_workloads", b.default_workloads().to_vec())?;
        d.set_item("default_reps", bfq_suite::suite::default_reps(b, Era::Current))?;
        d.set_item("default_reps_paper", bfq_suite::suite::default_reps(b, Era::Paper))?;
        out.append(d)?;
    }
    Ok(out)
}

/// The `bfq._native` module.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add_function(wrap_pyfunction!(run_json, m)?)?;
    m.add_function(wrap_pyfunction!(run_defaults, m)?)?;
    m.add_function(wrap_pyfunction!(suite, m)?)?;
    m.add_function(wrap_pyfunction!(plan_sweep, m)?)?;
    m.add_function(wrap_pyfunction!(run_specs, m)?)?;
    m.add_function(wrap_pyfunction!(schedulers, m)?)?;
    m.add_function(wrap_pyfunction!(devices, m)?)?;
    m.add_function(wrap_pyfunction!(workloads, m)?)?;
    m.add_function(wrap_pyfunction!(apps, m)?)?;
    m.add_function(wrap_pyfunction!(benchmarks, m)?)?;
    m.add_class::<SweepPlan>()?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
