//! cargo-fuzz target `fiu`: the body is `bfq_fuzz::fiu` (crates/fuzz), which `cargo test` also replays.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| bfq_fuzz::fiu(data));
