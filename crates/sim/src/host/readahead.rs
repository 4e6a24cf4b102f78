//! Linux-style on-demand readahead: sequential detection, a window that ramps up to `read_ahead_kb`, and
//! asynchronous readahead triggered when the reader reaches a marker page inside the current window.

/// Readahead state of one open file (Linux keeps it per `struct file`; here per process and file).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RaState {
    /// First page of the current window.
    pub start: u64,
    /// Window size in pages.
    pub size: u64,
    /// Pages at the end of the window whose first one is the async marker.
    pub async_size: u64,
    /// Page after the last one the reader read, if it has read.
    pub prev_end: Option<u64>,
}

/// A window to read: pages `[start, start+len)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// First page.
    pub start: u64,
    /// Pages.
    pub len: u64,
}

/// First window size for a sequential read of `req` pages with a maximum of `max` pages: small reads get a window
/// four times their size, middling ones twice, large ones the maximum.
pub fn init_size(req: u64, max: u64) -> u64 {
    let n = req.max(1).next_power_of_two();
    let w = if n <= max / 32 {
        n * 4
    } else if n <= max / 4 {
        n * 2
    } else {
        max
    };
    w.min(max).max(1)
}

/// Next window size after one of `cur` pages: quadruple while small, double while below half, then the maximum.
pub fn next_size(cur: u64, max: u64) -> u64 {
    let w = if cur < max / 16 {
        cur * 4
    } else if cur <= max / 2 {
        cur * 2
    } else {
        max
    };
    w.min(max).max(1)
}

impl RaState {
    /// The async marker page of the current window, if any.
    pub fn marker(&self) -> Option<u64> {
        (self.size > 0 && self.async_size > 0).then(|| self.start + self.size - self.async_size)
    }

    /// A read of `[index, index+req)` found page `index` missing: decide the synchronous window.
    /// Sequential reads (from the file start or continuing the previous read) open a ramping window; others read
    /// just what was asked (Linux's "small random read: read as is").
    pub fn on_miss(&mut self, index: u64, req: u64, max: u64) -> Window {
        let sequential = index == 0 || self.prev_end.is_some_and(|e| index == e || index + 1 == e);
        let in_window = self.size > 0 && index >= self.start && index < self.start + self.size;
        // A miss right after the current window continues it (Linux's `ondemand_readahead` checks this first:
        // an offset at the window's end, or at its marker, moves the window on and ramps it up).
        let at_window_end = self.size > 0 && index == self.start + self.size;
        if max == 0 {
            return Window { start: index, len: req };
        }
        if sequential || in_window || at_window_end {
            if at_window_end || (in_window && index >= self.start + self.size - self.async_size.min(self.size)) {
                // Reached the async part or the end of the window without the marker having fired (it was
                // evicted, or skipped while reads were congested): advance.
                self.start += self.size;
                self.size = next_size(self.size, max);
            } else {
                self.start = index;
                self.size = init_size(req, max).max(req.min(max));
            }
            self.async_size = if self.size > req { self.size - req } else { self.size };
            Window {
                start: self.start,
                len: self.size.max(req),
            }
        } else {
            self.size = 0;
            self.async_size = 0;
            Window { start: index, len: req }
        }
    }

    /// The reader touched the marker page: the next window, read asynchronously.
    pub fn on_marker(&mut self, max: u64) -> Window {
        self.start += self.size;
        self.size = next_size(self.size, max);
        self.async_size = self.size;
        Window {
            start: self.start,
            len: self.size,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_ramps_to_the_maximum() {
        // read_ahead_kb = 128 -> 32 pages; 4 KiB reads start at 4 pages (16 KiB) and ramp 16, 32 -> 64 -> 128 KiB.
        assert_eq!(init_size(1, 32), 4);
        assert_eq!(next_size(4, 32), 8);
        assert_eq!(next_size(8, 32), 16);
        assert_eq!(next_size(16, 32), 32);
        assert_eq!(next_size(32, 32), 32);
    }

    #[test]
    fn sequential_reader_gets_sync_then_async_windows() {
        let mut ra = RaState::default();
        let w = ra.on_miss(0, 1, 32);
        assert_eq!(w, Window { start: 0, len: 4 });
        assert_eq!(ra.marker(), Some(1));
        let w2 = ra.on_marker(32);
        assert_eq!(w2, Window { start: 4, len: 8 });
        assert_eq!(ra.marker(), Some(4), "marker at the start of a fully async window");
    }

    #[test]
    fn a_miss_at_the_end_of_the_window_ramps_it_on() {
        // The reader read the whole first window without the marker starting the next one (reads were
        // congested): its miss at the window's end continues the stream with a larger window, as Linux's
        // `ondemand_readahead` does, instead of starting over at the initial 16 KiB.
        let mut ra = RaState::default();
        assert_eq!(ra.on_miss(0, 1, 32), Window { start: 0, len: 4 });
        ra.prev_end = Some(4);
        assert_eq!(ra.on_miss(4, 1, 32), Window { start: 4, len: 8 });
        ra.prev_end = Some(12);
        assert_eq!(ra.on_miss(12, 1, 32), Window { start: 12, len: 16 });
    }

    #[test]
    fn random_reads_read_as_is() {
        let mut ra = RaState {
            prev_end: Some(100),
            ..RaState::default()
        };
        assert_eq!(ra.on_miss(5000, 1, 32), Window { start: 5000, len: 1 });
        assert_eq!(ra.marker(), None);
    }
}
