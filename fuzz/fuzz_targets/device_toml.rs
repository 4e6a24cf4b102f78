//! cargo-fuzz target `device_toml`: the body is `bfq_fuzz::device_toml` (crates/fuzz), which `cargo test` also replays.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| bfq_fuzz::device_toml(data));
