//! `bfq schedulers`: what it prints about each policy's defaults.

use std::process::Command;

fn schedulers(name: &str) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_bfq"))
        .args(["schedulers", name])
        .output()
        .expect("runs the bfq binary");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("UTF-8")
}

/// CFQ as in Linux 3.13 (issue 13): slice_idle and group_idle are 8 ms on every device, flash included; forcing
/// slice_idle to 0 on non-rotational devices came with later kernels.
#[test]
fn cfq_idles_8_ms_on_every_device() {
    let text = schedulers("cfq");
    for key in ["slice_idle", "group_idle"] {
        let line = text
            .lines()
            .find(|l| l.trim_start().starts_with(key))
            .unwrap_or_else(|| panic!("no {key} line in {text}"));
        let default = line.split_whitespace().nth(2);
        assert_eq!(default, Some("8"), "{line}");
        assert!(!line.contains("non-rotational"), "{line}");
    }
}
