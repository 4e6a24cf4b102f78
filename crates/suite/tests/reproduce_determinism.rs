//! The whole quick reproduce run is deterministic for a fixed seed: the same results, byte for byte, and the same
//! report files.

use bfq_suite::report::{write_all, ReportMeta};
use bfq_suite::reproduce::{checklist, plan, run_all};

#[test]
fn quick_reproduce_twice_gives_identical_reports() {
    let p = plan(true, 1, 7);
    assert!(p.jobs.len() > 20);
    let once = || {
        let rs: Vec<_> = run_all(&p.jobs, 2, &|_, _| {})
            .into_iter()
            .map(|r| r.expect("runs"))
            .collect();
        let dir = tempfile::tempdir().unwrap();
        let files = write_all(dir.path(), &rs, &ReportMeta::new("test", 7), &checklist(&rs)).unwrap();
        let mut contents: Vec<(String, Vec<u8>)> = files
            .iter()
            .map(|f| {
                (
                    f.file_name().unwrap().to_string_lossy().into_owned(),
                    std::fs::read(f).unwrap(),
                )
            })
            .collect();
        contents.sort();
        contents
    };
    let a = once();
    let b = once();
    assert_eq!(a.len(), b.len());
    for ((na, ca), (nb, cb)) in a.iter().zip(&b) {
        assert_eq!(na, nb);
        assert!(ca == cb, "{na} differs between two runs with the same seed");
    }
}
