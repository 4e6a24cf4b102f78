//! cargo-fuzz target `profile`: the body is `bfq_fuzz::profile` (crates/fuzz), which `cargo test` also replays.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| bfq_fuzz::profile(data));
