//! Workload processes as state machines; filled by the simulator issue.
#![warn(missing_docs)]
