//! cargo-fuzz target `blkparse`: the body is `bfq_fuzz::blkparse` (crates/fuzz), which `cargo test` also replays.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| bfq_fuzz::blkparse(data));
