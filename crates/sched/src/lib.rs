//! # bfq-sched
//!
//! Storage I/O scheduling policies as pure, clock-agnostic state machines: BFQ and its peers. A policy is told the
//! time on every call and never reads a clock, so the same code runs in the simulator's virtual time and in the
//! engine's real time.
//!
//! - [`cfq`]: Completely Fair Queueing.
//! - [`types`]: time, flow and request types.
//! - [`scheduler::Scheduler`]: the policy interface; [`driver::Driver`]: the dispatch loop under a tag limit.
//! - [`registry`]: build a policy by name with sysfs-style tunables.
//! - [`conformance`]: the randomized conformance checker every policy must pass.

#![warn(missing_docs)]

pub mod anticipatory;
pub mod bfq;
pub mod cfq;
pub mod conformance;
pub mod counter;
pub mod deadline;
pub mod device;
pub mod driver;
pub mod kyber;
pub mod legacy_alloc;
pub mod merge;
pub mod mq_deadline;
pub mod noop;
pub mod registry;
pub mod scheduler;
pub mod slab;
pub mod sorted;
pub mod tags;
pub mod text;
pub mod tick;
pub mod tunables;
pub mod types;
pub mod wrap;

pub use device::DeviceInfo;
pub use driver::Driver;
pub use registry::{build, find, policies, PolicyDesc};
pub use scheduler::{BlockLayer, InvariantViolation, Scheduler, BLK_MQ_RERUN_DELAY};
pub use tunables::{ConfigError, TunableSpec, TunableValues};
pub use types::*;
