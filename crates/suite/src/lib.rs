//! # bfq-suite
//!
//! The benchmark suite: scenarios, benchmarks, targets, statistics and reports.

#![warn(missing_docs)]

pub mod benchmarks;
pub mod claims_doc;
pub mod cmdline;
pub mod experiment;
pub mod limits;
pub mod real;
pub mod replay;
pub mod report;
pub mod reproduce;
pub mod request;
pub mod result;
pub mod scenario;
pub mod stats;
pub mod suite;
pub mod target;
pub mod timeline;
pub mod validate;

pub use experiment::{Experiment, RealOptions, Settings, Work};
pub use result::{Benchmark, Measured, RunResult};
