//! # bfq-sim
//!
//! A deterministic discrete-event storage simulator: calibrated device models ([`device`]), a host model (page cache,
//! readahead, dirty writeback) and an event engine that runs any bfq-sched policy and bfq-workload processes in
//! virtual time (integer nanoseconds, ties broken by sequence number).

#![warn(missing_docs)]

pub mod device;
pub mod event;
pub mod host;
pub mod metrics;
pub mod sim;

pub use sim::{HostConfig, Pid, SimError, Simulation};
