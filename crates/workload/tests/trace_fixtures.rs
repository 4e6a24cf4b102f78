//! The committed trace fixture (fixtures/traces/README.md: fio on a `bfq loopdev` device, recorded by the kernel's
//! blktrace code) read in both of its forms: blktrace's binary per-CPU files and blkparse's text of the same files
//! must give the same requests.

use bfq_sched::Direction;
use bfq_workload::trace::{blkparse, blktrace, ParseOptions, TraceEvent, TraceFormat};
use std::path::PathBuf;

fn fixture(name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/traces")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn binary_and_text_forms_of_the_fixture_agree() {
    let (a, b) = (fixture("loop-fio.blktrace.0"), fixture("loop-fio.blktrace.1"));
    let text = String::from_utf8(fixture("loop-fio.blkparse")).expect("text");
    assert_eq!(TraceFormat::detect(&a), Some(TraceFormat::Blktrace));
    assert_eq!(TraceFormat::detect(text.as_bytes()), Some(TraceFormat::Blkparse));
    for event in [TraceEvent::Issue, TraceEvent::Queue] {
        let opts = ParseOptions {
            event,
            ..ParseOptions::default()
        };
        let bin = blktrace::parse_files(&[("loop-fio.blktrace.0", &a), ("loop-fio.blktrace.1", &b)], &opts)
            .expect("binary parses");
        let txt = blkparse::parse(&text, &opts).expect("text parses");
        assert_eq!(bin.requests.len(), txt.requests.len(), "{event:?}");
        // blkparse prints times in ns, so both forms give the same requests, in the same order.
        assert_eq!(bin.requests, txt.requests, "{event:?}");
        assert_eq!(bin.volumes, ["7,0"]);
        // The trace's own figures (fixtures/traces/README.md): 256 16 KiB reads, 4 KiB random writes and the
        // buffered writer's writeback.
        let reads = bin.requests.iter().filter(|r| r.dir == Direction::Read).count();
        assert!(reads >= 256, "{reads} reads");
        assert!(
            bin.requests.len() > 500 && bin.requests.len() < 700,
            "{}",
            bin.requests.len()
        );
        assert!(bin.requests.iter().all(|r| r.sync || r.dir == Direction::Write));
        // Completions were traced: nearly every request has a response time.
        let timed = bin.requests.iter().filter(|r| r.response_ns.is_some()).count();
        assert!(
            timed * 10 >= bin.requests.len() * 9,
            "{timed} of {}",
            bin.requests.len()
        );
        let pids: std::collections::BTreeSet<u32> = bin.requests.iter().filter_map(|r| r.pid).collect();
        assert!(pids.len() >= 3, "fio's jobs and the kernel's writeback: {pids:?}");
    }
}
