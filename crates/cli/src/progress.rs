//! Progress of `bfq reproduce` and `bfq suite` on standard error: an indicatif bar with the rate and the time left
//! when standard error is a terminal, and otherwise (piped to a file, under CI) a plain line every
//! [`PLAIN_PERIOD`], so a long run is never silent.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Time between two plain progress lines when standard error is not a terminal.
pub const PLAIN_PERIOD: Duration = Duration::from_secs(5);

/// Progress on standard error; `update` may be called from any worker thread.
pub enum Bar {
    /// A live bar on a terminal.
    Terminal(ProgressBar),
    /// Plain lines: when the last one was printed (`None` before the first), and when the work started.
    Plain {
        /// Time of the last line printed.
        last: Mutex<Option<Instant>>,
        /// Start of the work.
        start: Instant,
    },
}

impl Bar {
    /// A bar on standard error: drawn in place on a terminal, plain lines otherwise.
    pub fn stderr() -> Bar {
        if std::io::stderr().is_terminal() {
            let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
            bar.set_style(
                ProgressStyle::with_template("[{elapsed_precise}] {wide_bar} {pos}/{len} runs ({per_sec}, {eta} left)")
                    .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
            Bar::Terminal(bar)
        } else {
            Bar::Plain {
                last: Mutex::new(None),
                start: Instant::now(),
            }
        }
    }

    /// Reports `done` of `total` runs finished.
    pub fn update(&self, done: usize, total: usize) {
        match self {
            Bar::Terminal(bar) => {
                bar.set_length(total as u64);
                bar.set_position(done as u64);
            }
            Bar::Plain { last, start } => {
                let now = Instant::now();
                let mut last = last.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                let due = last.is_none_or(|t| now.duration_since(t) >= PLAIN_PERIOD);
                if due && done < total {
                    *last = Some(now);
                    eprintln!("{}", plain_line(done, total, now.duration_since(*start)));
                }
            }
        }
    }

    /// Ends the bar (the plain form prints nothing more: the command's summary follows).
    pub fn finish(&self) {
        if let Bar::Terminal(bar) = self {
            bar.finish();
        }
    }
}

/// One plain progress line: `progress: 120/1273 runs (9 %), 3.1 runs/s, about 6 min 12 s left`.
fn plain_line(done: usize, total: usize, elapsed: Duration) -> String {
    let pct = 100 * done / total.max(1);
    let secs = elapsed.as_secs_f64();
    if done == 0 || secs <= 0.0 {
        return format!("progress: {done}/{total} runs ({pct} %)");
    }
    let rate = done as f64 / secs;
    let left = ((total - done.min(total)) as f64 / rate).round() as u64;
    let left = if left >= 60 {
        format!("{} min {} s", left / 60, left % 60)
    } else {
        format!("{left} s")
    };
    format!("progress: {done}/{total} runs ({pct} %), {rate:.1} runs/s, about {left} left")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_lines_give_the_rate_and_the_time_left() {
        assert_eq!(plain_line(0, 10, Duration::ZERO), "progress: 0/10 runs (0 %)");
        // 120 runs in 40 s: 3 runs/s, 1153 left = 384.3 s = 6 min 24 s.
        assert_eq!(
            plain_line(120, 1273, Duration::from_secs(40)),
            "progress: 120/1273 runs (9 %), 3.0 runs/s, about 6 min 24 s left"
        );
        assert_eq!(
            plain_line(9, 10, Duration::from_secs(9)),
            "progress: 9/10 runs (90 %), 1.0 runs/s, about 1 s left"
        );
    }

    #[test]
    fn plain_bar_prints_at_most_once_per_period() {
        let bar = Bar::Plain {
            last: Mutex::new(None),
            start: Instant::now(),
        };
        bar.update(1, 10);
        let first = *match &bar {
            Bar::Plain { last, .. } => last.lock().expect("lock"),
            Bar::Terminal(_) => unreachable!(),
        };
        assert!(first.is_some(), "the first update prints");
        bar.update(2, 10);
        let second = *match &bar {
            Bar::Plain { last, .. } => last.lock().expect("lock"),
            Bar::Terminal(_) => unreachable!(),
        };
        assert_eq!(first, second, "a second update within the period prints nothing");
    }
}
