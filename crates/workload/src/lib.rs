//! # bfq-workload
//!
//! Workload processes as state machines. A process is told what happened (it started, one of its operations
//! completed, its sleep ended) and the time, and answers with operations to issue, a time to sleep until, or exit.
//! The simulator executes processes in virtual time; the real targets execute the same processes on threads.

#![warn(missing_docs)]

pub mod process;

pub use process::*;
