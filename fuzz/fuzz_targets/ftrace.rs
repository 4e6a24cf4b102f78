//! cargo-fuzz target `ftrace`: the body is `bfq_fuzz::ftrace` (crates/fuzz), which `cargo test` also replays.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| bfq_fuzz::ftrace(data));
