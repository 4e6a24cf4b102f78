//! Benchmark suite; filled by the suite issue.
#![warn(missing_docs)]
