//! # bfq-workload
//!
//! Workload processes as state machines. A process is told what happened (it started, one of its operations
//! completed, its sleep ended) and the time, and answers with operations to issue, a time to sleep until, or exit.
//! The simulator executes processes in virtual time; the real targets execute the same processes on threads.
//!
//! Standard processes: fio-like [`readers`] and [`writers`] (engine in [`fio`]), application start-up replay
//! ([`startup`], profiles in [`profile`], recorded from block traces by [`record`]), a [`video`] player and its
//! [`noise`], [`interleaved`] readers, periodic [`sync`], an [`iozone`]-style throughput test, and the named
//! background workloads of the S suite ([`workloads`]), and block traces replayed as flows ([`trace`]). Randomness comes only from seeded streams ([`rng`]).

#![warn(missing_docs)]

pub mod fio;
pub mod interleaved;
pub mod iozone;
pub mod noise;
pub mod process;
pub mod profile;
pub mod readers;
pub mod record;
pub mod rng;
pub mod startup;
pub mod sync;
pub mod trace;
pub mod video;
pub mod workloads;
pub mod writers;

#[cfg(test)]
mod test_exec;

pub use process::*;
