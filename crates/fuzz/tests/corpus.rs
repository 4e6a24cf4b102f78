//! Replays the fuzz corpus and the regression inputs (`fuzz/corpus/<target>/`, `fuzz/regressions/<target>/`)
//! through the targets' bodies on the stable toolchain: every input a fuzzer kept or a crash it found stays a test.

use std::path::{Path, PathBuf};

fn inputs(kind: &str, target: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz")
        .join(kind)
        .join(target);
    let mut files: Vec<PathBuf> = match std::fs::read_dir(&dir) {
        Ok(rd) => rd.flatten().map(|e| e.path()).filter(|p| p.is_file()).collect(),
        Err(_) => Vec::new(),
    };
    files.sort();
    files
}

#[test]
fn every_corpus_and_regression_input_passes() {
    let mut total = 0;
    for (name, body) in bfq_fuzz::TARGETS {
        let corpus = inputs("corpus", name);
        // The seeds committed with each target: an empty corpus would make this test pass while checking nothing.
        assert!(!corpus.is_empty(), "fuzz/corpus/{name}/ is empty");
        for path in corpus.iter().chain(&inputs("regressions", name)) {
            let data = std::fs::read(path).expect("reads the input");
            let run = std::panic::catch_unwind(|| body(&data));
            assert!(run.is_ok(), "{name}: {} fails (see the panic above)", path.display());
            total += 1;
        }
    }
    eprintln!("replayed {total} fuzz inputs");
}
