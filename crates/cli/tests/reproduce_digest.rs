//! `bfq reproduce --quick` writes exactly the bytes it wrote when the digests in `data/reproduce-quick.sha256` were
//! recorded: results.json and every report file. Refactoring must not move a figure; a change that moves one on
//! purpose (a bug fix, a model change) regenerates the digests and explains the moved figures in its commit:
//!
//! ```sh
//! BFQ_UPDATE_DIGEST=1 cargo test --release -p bfq --test reproduce_digest
//! ```
//!
//! Since any run must match the recorded bytes, this also proves that the quick run is deterministic.

use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

const DIGESTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/reproduce-quick.sha256");

fn digests_of(dir: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(dir).expect("report directory") {
        let entry = entry.expect("directory entry");
        let name = entry.file_name().to_string_lossy().into_owned();
        let bytes = std::fs::read(entry.path()).expect("report file");
        let hex: String = Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect();
        out.insert(name, hex);
    }
    out
}

fn parse(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (hex, name) = l.split_once("  ").expect("'<sha256>  <file>' lines");
            (name.to_string(), hex.to_string())
        })
        .collect()
}

#[test]
fn quick_reproduce_is_byte_identical_to_the_recorded_digests() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let out = dir.path().join("report");
    // A relative --out in a fixed working directory: the report records the command line as typed, so it must be
    // the same on every machine.
    let status = Command::new(env!("CARGO_BIN_EXE_bfq"))
        .current_dir(dir.path())
        .args(["reproduce", "--quick", "--jobs", "2", "--out", "report"])
        .stdout(std::process::Stdio::null())
        .status()
        .expect("runs the bfq binary");
    assert!(status.success(), "bfq reproduce --quick failed");
    let got = digests_of(&out);
    assert!(got.contains_key("results.json"), "no results.json in {got:?}");
    if std::env::var_os("BFQ_UPDATE_DIGEST").is_some() {
        let mut text =
            String::from("# sha256 of every file `bfq reproduce --quick` writes; see tests/reproduce_digest.rs\n");
        for (name, hex) in &got {
            text.push_str(&format!("{hex}  {name}\n"));
        }
        std::fs::write(DIGESTS, text).expect("writes the digests");
        return;
    }
    let want = parse(&std::fs::read_to_string(DIGESTS).expect("recorded digests"));
    let changed: Vec<&String> = want
        .keys()
        .chain(got.keys())
        .filter(|k| want.get(*k) != got.get(*k))
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    assert!(
        changed.is_empty(),
        "reproduce --quick output differs from the recorded digests in {changed:?} (results.json first if listed: \
         figures moved); regenerate with BFQ_UPDATE_DIGEST=1 only for an intended change"
    );
}
