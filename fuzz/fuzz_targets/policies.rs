//! cargo-fuzz target `policies`: the body is `bfq_fuzz::policies` (crates/fuzz), which `cargo test` also replays.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| bfq_fuzz::policies(data));
