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

/// Issue 12: each policy says which kernel it follows; bfq-v7r2 lists v7r2's sysfs tunables with v7r2's defaults
/// (x20 raising, 40 ms async timeout, 4 async requests per slot) and none of the later ones.
#[test]
fn each_policy_names_its_kernel_and_bfq_v7r2_has_v7r2_tunables() {
    let v7 = schedulers("bfq-v7r2");
    assert!(v7.contains("follows: BFQ v7r2"), "{v7}");
    let default_of = |text: &str, key: &str| {
        text.lines()
            .find(|l| l.split_whitespace().next() == Some(key))
            .and_then(|l| l.split_whitespace().nth(2).map(str::to_string))
    };
    assert_eq!(default_of(&v7, "wr_coeff").as_deref(), Some("20"));
    assert_eq!(default_of(&v7, "timeout_async").as_deref(), Some("40"));
    assert_eq!(default_of(&v7, "max_budget_async_rq").as_deref(), Some("4"));
    assert_eq!(default_of(&v7, "strict_guarantees"), None, "a later tunable");
    let newest = schedulers("bfq");
    assert!(newest.contains("follows: newest mainline BFQ"), "{newest}");
    assert_eq!(default_of(&newest, "wr_coeff").as_deref(), Some("30"));
    assert!(schedulers("cfq").contains("follows: Linux 3.13 CFQ"));
}

/// Output piped into a reader that stops early (`bfq schedulers | head -1`) ends quietly: no panic message on
/// stderr about a broken pipe.
#[test]
fn output_into_a_closed_pipe_ends_quietly() {
    use std::io::Read;
    use std::process::Stdio;
    let mut child = Command::new(env!("CARGO_BIN_EXE_bfq"))
        .args(["schedulers"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("runs the bfq binary");
    // Close the reading end at once: every write of the listing then hits a broken pipe.
    drop(child.stdout.take());
    let mut err = String::new();
    child
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut err)
        .expect("stderr text");
    child.wait().expect("bfq exits");
    assert!(!err.contains("panicked") && !err.contains("Broken pipe"), "{err}");
}
