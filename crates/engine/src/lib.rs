//! Real I/O engine (io_uring); filled by the engine issue.
#![warn(missing_docs)]
