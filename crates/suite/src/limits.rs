//! Accepted ranges of the experiment settings, defined once for the command line (`bfq run`, `bfq reproduce`,
//! `bfq suite`, `bfq record`) and the suite's own validation, with the one-line messages both give.

use bfq_sched::Time;

/// Most repetitions of one measurement; repetitions are in `1..=MAX_REPS`.
pub const MAX_REPS: u32 = 100;

/// Longest measured run, seconds (24 h); durations are in `[MIN_DURATION_S, MAX_DURATION_S]`.
pub const MAX_DURATION_S: f64 = 86_400.0;

/// Shortest measured run, seconds. A shorter window holds less than a handful of the policies' own periods (a BFQ
/// budget timeout is 125 ms, a CFQ sync slice 100 ms, a deadline read expiry 500 ms) and of the video clip's frames
/// and noise commands, so it measures one slice rather than the policy: the result would be meaningless. A guard
/// on input, not a model parameter.
pub const MIN_DURATION_S: f64 = 1.0;

/// Largest capacity `bfq record --capacity` accepts, in 512-byte sectors: 2^47 sectors = 64 PiB, above any single
/// block device; a larger number is a typing mistake.
pub const MAX_CAPACITY_SECTORS: u64 = 1 << 47;

/// Largest factor on the real targets' background file sizes; factors are in `(0, MAX_FILE_SCALE]`.
///
/// The factor only shrinks S's files (500 MiB per process in S 3.6, up to 50 000 MiB shared in the SYSTOR'12
/// scripts) so that a run fits on a small `bfq loopdev` device; 1 is S's own size, and a larger file would measure
/// something S does not.
pub const MAX_FILE_SCALE: f64 = 1.0;

/// Longest background warm-up before a real start-up measurement, seconds; warm-ups are in `[0, MAX_WARMUP_S]`.
pub const MAX_WARMUP_S: f64 = 600.0;

/// Largest iozone file per thread, MiB (1 TiB); sizes are in `1..=MAX_IOZONE_FILE_MIB`.
pub const MAX_IOZONE_FILE_MIB: u64 = 1 << 20;

/// Fewest worker threads.
pub const MIN_JOBS: usize = 1;

/// Most worker threads a user may ask for. Each simulation runs on one thread and a run never starts more threads
/// than it has simulations ([`worker_threads`]), so this only refuses values that are surely typing mistakes
/// before any thread is spawned; 1024 is far above any machine this tool runs on (an estimate, not a measurement).
pub const MAX_JOBS: usize = 1024;

/// A setting outside its range; the message names the option and the range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct OutOfRange(pub String);

/// Checks a number of repetitions against `1..=MAX_REPS`.
pub fn reps(n: u32) -> Result<u32, OutOfRange> {
    if (1..=MAX_REPS).contains(&n) {
        Ok(n)
    } else {
        Err(OutOfRange(format!("--reps {n} is out of range: give 1..={MAX_REPS}")))
    }
}

/// Checks a duration in seconds against `[MIN_DURATION_S, MAX_DURATION_S]` and returns it in ns.
pub fn duration_ns(secs: f64) -> Result<Time, OutOfRange> {
    if (MIN_DURATION_S..=MAX_DURATION_S).contains(&secs) {
        Ok((secs * 1e9) as Time)
    } else if secs > 0.0 && secs < MIN_DURATION_S {
        Err(OutOfRange(format!(
            "--duration {secs} is too short to measure a policy: give seconds in [{MIN_DURATION_S}, \
             {MAX_DURATION_S}]"
        )))
    } else {
        Err(OutOfRange(format!(
            "--duration {secs} is out of range: give seconds in [{MIN_DURATION_S}, {MAX_DURATION_S}]"
        )))
    }
}

/// Checks that repetitions `0..reps` of a run seeded `seed` get seeds `seed + i` without wrapping around.
pub fn seeds(seed: u64, reps: u32) -> Result<(), OutOfRange> {
    let last = u64::from(reps.max(1) - 1);
    if seed.checked_add(last).is_some() {
        Ok(())
    } else {
        Err(OutOfRange(format!(
            "--seed {seed} with {reps} repetitions would wrap around (repetition i uses seed + i): give a seed up to \
             {}",
            u64::MAX - last
        )))
    }
}

/// Checks a device capacity in sectors against `1..=MAX_CAPACITY_SECTORS`.
pub fn capacity_sectors(n: u64) -> Result<u64, OutOfRange> {
    if (1..=MAX_CAPACITY_SECTORS).contains(&n) {
        Ok(n)
    } else {
        Err(OutOfRange(format!(
            "--capacity {n} is out of range: give 512-byte sectors in 1..={MAX_CAPACITY_SECTORS} (64 PiB)"
        )))
    }
}

/// Checks a file-size factor against `(0, MAX_FILE_SCALE]` (NaN is out of range).
pub fn file_scale(factor: f64) -> Result<f64, OutOfRange> {
    if factor > 0.0 && factor <= MAX_FILE_SCALE {
        Ok(factor)
    } else {
        Err(OutOfRange(format!(
            "--file-scale {factor} is out of range: give a factor in (0, {MAX_FILE_SCALE}]"
        )))
    }
}

/// Checks a warm-up in seconds against `[0, MAX_WARMUP_S]` and returns it in ns.
pub fn warmup_ns(secs: f64) -> Result<Time, OutOfRange> {
    if (0.0..=MAX_WARMUP_S).contains(&secs) {
        Ok((secs * 1e9) as Time)
    } else {
        Err(OutOfRange(format!(
            "--warmup {secs} is out of range: give seconds in [0, {MAX_WARMUP_S}]"
        )))
    }
}

/// Checks an iozone file size in MiB against `1..=MAX_IOZONE_FILE_MIB` and returns it in bytes.
pub fn iozone_file_bytes(mib: u64) -> Result<u64, OutOfRange> {
    if (1..=MAX_IOZONE_FILE_MIB).contains(&mib) {
        Ok(mib << 20)
    } else {
        Err(OutOfRange(format!(
            "--file-size {mib} is out of range: give MiB in 1..={MAX_IOZONE_FILE_MIB}"
        )))
    }
}

/// Checks a number of worker threads against `MIN_JOBS..=MAX_JOBS`.
pub fn jobs(n: usize) -> Result<usize, OutOfRange> {
    if (MIN_JOBS..=MAX_JOBS).contains(&n) {
        Ok(n)
    } else {
        Err(OutOfRange(format!(
            "--jobs {n} is out of range: give {MIN_JOBS}..={MAX_JOBS} worker threads"
        )))
    }
}

/// Threads worth starting for `runs` simulations when `requested` were asked for: never more than the runs, at
/// least one.
pub fn worker_threads(requested: usize, runs: usize) -> usize {
    requested.min(runs).max(MIN_JOBS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_are_checked_and_capped_at_the_number_of_runs() {
        assert!(jobs(0).is_err());
        assert_eq!(jobs(MAX_JOBS), Ok(MAX_JOBS));
        let e = jobs(100_000).unwrap_err().to_string();
        assert!(e.starts_with("--jobs 100000 is out of range"), "{e}");
        // 100 000 threads for 3 runs would spend seconds spawning idle threads: 3 are started.
        assert_eq!(worker_threads(100_000, 3), 3);
        assert_eq!(worker_threads(2, 86), 2);
        assert_eq!(worker_threads(4, 0), 1);
    }

    #[test]
    fn boundaries_are_inclusive_where_the_range_says_so() {
        assert_eq!(reps(1), Ok(1));
        assert_eq!(reps(MAX_REPS), Ok(100));
        assert_eq!(
            reps(0).unwrap_err().to_string(),
            "--reps 0 is out of range: give 1..=100"
        );
        assert!(reps(101).is_err());
        assert_eq!(duration_ns(MAX_DURATION_S), Ok(86_400_000_000_000));
        assert_eq!(
            duration_ns(0.0).unwrap_err().to_string(),
            "--duration 0 is out of range: give seconds in [1, 86400]"
        );
        // Under 1 ns used to become a 0 ns run; under a second measures one slice (issue 16, defect 8).
        assert!(duration_ns(1e-10).unwrap_err().to_string().contains("too short"));
        assert!(duration_ns(0.5).unwrap_err().to_string().contains("too short"));
        assert_eq!(duration_ns(MIN_DURATION_S), Ok(1_000_000_000));
        assert_eq!(seeds(u64::MAX, 1), Ok(()));
        assert_eq!(seeds(u64::MAX - 1, 2), Ok(()));
        assert!(seeds(u64::MAX, 2)
            .unwrap_err()
            .to_string()
            .contains("give a seed up to 18446744073709551614"));
        assert_eq!(capacity_sectors(MAX_CAPACITY_SECTORS), Ok(1 << 47));
        assert!(capacity_sectors(0).is_err() && capacity_sectors(u64::MAX).is_err());
        assert_eq!(file_scale(1.0), Ok(1.0));
        assert_eq!(file_scale(0.001), Ok(0.001));
        for bad in [0.0, -1.0, 1.5, f64::NAN, f64::INFINITY] {
            assert!(file_scale(bad).is_err(), "{bad}");
        }
        assert_eq!(
            file_scale(2.0).unwrap_err().to_string(),
            "--file-scale 2 is out of range: give a factor in (0, 1]"
        );
        assert_eq!(warmup_ns(0.0), Ok(0));
        assert_eq!(warmup_ns(600.0), Ok(600_000_000_000));
        assert_eq!(
            warmup_ns(600.5).unwrap_err().to_string(),
            "--warmup 600.5 is out of range: give seconds in [0, 600]"
        );
        assert_eq!(iozone_file_bytes(1), Ok(1 << 20));
        assert_eq!(
            iozone_file_bytes(0).unwrap_err().to_string(),
            "--file-size 0 is out of range: give MiB in 1..=1048576"
        );
        assert_eq!(jobs(1), Ok(1));
        assert_eq!(
            jobs(0).unwrap_err().to_string(),
            "--jobs 0 is out of range: give 1..=1024 worker threads"
        );
    }
}
