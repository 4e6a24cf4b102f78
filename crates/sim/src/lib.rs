//! Deterministic discrete-event storage simulator.
#![warn(missing_docs)]
