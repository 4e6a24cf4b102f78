//! cargo-fuzz target `blktrace`: the body is `bfq_fuzz::blktrace` (crates/fuzz), which `cargo test` also replays.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| bfq_fuzz::blktrace(data));
