//! cargo-fuzz target `tunables`: the body is `bfq_fuzz::tunables` (crates/fuzz), which `cargo test` also replays.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| bfq_fuzz::tunables(data));
