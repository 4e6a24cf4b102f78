//! The progress bar of `bfq reproduce` and `bfq suite`: `[####    ] done/total` redrawn in place on standard error,
//! only when standard error is a terminal.

use std::io::{IsTerminal, Write};

/// Width of the bar, characters.
const WIDTH: usize = 40;

/// A progress bar on standard error (silent when it is not a terminal).
pub struct Bar {
    tty: bool,
}

impl Bar {
    /// A bar on standard error, drawn only if standard error is a terminal.
    pub fn stderr() -> Bar {
        Bar {
            tty: std::io::stderr().is_terminal(),
        }
    }

    /// Redraws the bar for `done` of `total` runs.
    pub fn update(&self, done: usize, total: usize) {
        if self.tty {
            eprint!("\r{}", line(done, total));
            let _ = std::io::stderr().flush();
        }
    }

    /// Ends the bar's line, if one was drawn.
    pub fn finish(&self) {
        if self.tty {
            eprintln!();
        }
    }
}

/// The bar's text for `done` of `total`: `[` + `#` per finished fortieth + spaces + `] done/total`.
fn line(done: usize, total: usize) -> String {
    let filled = (done * WIDTH / total.max(1)).min(WIDTH);
    format!("[{}{}] {done}/{total}", "#".repeat(filled), " ".repeat(WIDTH - filled))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bar_fills_in_fortieths() {
        assert_eq!(line(0, 4), format!("[{}] 0/4", " ".repeat(40)));
        assert_eq!(line(1, 4), format!("[{}{}] 1/4", "#".repeat(10), " ".repeat(30)));
        assert_eq!(line(4, 4), format!("[{}] 4/4", "#".repeat(40)));
        assert_eq!(line(0, 0), format!("[{}] 0/0", " ".repeat(40)));
    }
}
