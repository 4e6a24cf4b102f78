//! cargo-fuzz target `msr`: the body is `bfq_fuzz::msr` (crates/fuzz), which `cargo test` also replays.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| bfq_fuzz::msr(data));
