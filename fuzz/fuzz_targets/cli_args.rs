//! cargo-fuzz target `cli_args`: the body is `bfq_fuzz::cli_args` (crates/fuzz), which `cargo test` also replays.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| bfq_fuzz::cli_args(data));
