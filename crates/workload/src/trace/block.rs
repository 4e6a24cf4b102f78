//! What blkparse's text and blktrace's binary files share: block-layer events, turned into requests.
//!
//! Rules (docs/TRACES.md, blkparse and blktrace):
//! - the chosen event (issue `D` by default, queue `Q` on request) of a read or write with data is a request;
//!   discards, flushes without data and passthrough commands are skipped;
//! - an issue runs in whatever context dispatches (often a kworker, or pid 0 from an interrupt), so a `D` event is
//!   attributed to the process that queued its first sector: the last `Q` or `G` event at the same device and
//!   sector, else the first `I`; only without one does it keep its own pid;
//! - a completion (`C`) at the request's device and sector gives the request its recorded response time (the
//!   oldest request still waiting there first).

use super::{Builder, TraceError, TraceEvent, TraceRequest, SECTOR_BYTES};
use bfq_sched::{Direction, Time};
use std::collections::{HashMap, VecDeque};

/// The block-layer actions the readers tell apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    /// `Q`: a bio entered the block layer.
    Queue,
    /// `G`: a request was allocated for it.
    GetRq,
    /// `I`: a request was inserted into the scheduler.
    Insert,
    /// `D`: issued to the driver.
    Issue,
    /// `C`: completed.
    Complete,
    /// Anything else (merges, plugs, splits, remaps, messages...).
    Other,
}

/// What kind of transfer an event is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A read with data.
    Read,
    /// A write with data.
    Write,
    /// A discard, a flush without data, a passthrough command: not replayed.
    Other,
}

/// One block-layer event.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BlockEvent {
    /// Device (major, minor).
    pub dev: (u32, u32),
    /// Action.
    pub action: Action,
    /// Transfer kind.
    pub kind: Kind,
    /// Sync flag (`S`).
    pub sync: bool,
    /// First sector.
    pub sector: u64,
    /// Length, sectors.
    pub sectors: u64,
    /// Process id of the context that logged it.
    pub pid: u32,
    /// Interned process name, if known.
    pub name: Option<u32>,
    /// Time, ns.
    pub time_ns: Time,
}

type Key = ((u32, u32), u64);

/// Turns block events into requests of a [`Builder`].
#[derive(Debug, Default)]
pub(crate) struct Assembler {
    event: TraceEvent,
    /// Who queued the bio starting at a sector (Q/G), or inserted the request (I).
    owner: HashMap<Key, (u32, Option<u32>)>,
    /// Requests waiting for their completion, by device and sector.
    pending: HashMap<Key, VecDeque<usize>>,
    volume_ids: HashMap<(u32, u32), u32>,
}

impl Assembler {
    pub(crate) fn new(event: TraceEvent) -> Assembler {
        Assembler {
            event,
            ..Assembler::default()
        }
    }

    /// Takes one event; `at` locates it for errors.
    pub(crate) fn event(
        &mut self,
        b: &mut Builder,
        ev: &BlockEvent,
        at: impl FnOnce() -> TraceError,
    ) -> Result<(), TraceError> {
        let key = (ev.dev, ev.sector);
        let data = ev.kind != Kind::Other && ev.sectors > 0;
        let chosen = match (self.event, ev.action) {
            (TraceEvent::Queue, Action::Queue) | (TraceEvent::Issue, Action::Issue) => data,
            _ => false,
        };
        match ev.action {
            Action::Queue | Action::GetRq if data => {
                self.owner.insert(key, (ev.pid, ev.name));
            }
            Action::Insert if data => {
                self.owner.entry(key).or_insert((ev.pid, ev.name));
            }
            Action::Complete if data => {
                self.owner.remove(&key);
                if let Some(q) = self.pending.get_mut(&key) {
                    if let Some(i) = q.pop_front() {
                        if let Some(rq) = b.get_mut(i) {
                            rq.response_ns = ev.time_ns.checked_sub(rq.time_ns);
                        }
                    }
                    if q.is_empty() {
                        self.pending.remove(&key);
                    }
                }
            }
            _ => {}
        }
        if !chosen {
            b.skip();
            return Ok(());
        }
        let (pid, name) = match ev.action {
            Action::Issue => self.owner.remove(&key).unwrap_or((ev.pid, ev.name)),
            _ => (ev.pid, ev.name),
        };
        let bytes = ev.sectors.saturating_mul(SECTOR_BYTES);
        if bytes > super::MAX_REQUEST_BYTES {
            let mut e = at();
            e.message = format!(
                "request of {} sectors is larger than {} bytes",
                ev.sectors,
                super::MAX_REQUEST_BYTES
            );
            return Err(e);
        }
        let Some(offset) = ev
            .sector
            .checked_mul(SECTOR_BYTES)
            .filter(|o| o.checked_add(bytes).is_some())
        else {
            let mut e = at();
            e.message = format!("sector {} is beyond any device", ev.sector);
            return Err(e);
        };
        let volume = match self.volume_ids.get(&ev.dev) {
            Some(&v) => v,
            None => {
                let v = b.volume(&format!("{},{}", ev.dev.0, ev.dev.1));
                self.volume_ids.insert(ev.dev, v);
                v
            }
        };
        let dir = if ev.kind == Kind::Write {
            Direction::Write
        } else {
            Direction::Read
        };
        let i = b.push(
            TraceRequest {
                time_ns: ev.time_ns,
                dir,
                sync: dir == Direction::Read || ev.sync,
                offset,
                len: bytes,
                pid: Some(pid),
                name,
                volume,
                response_ns: None,
            },
            at,
        )?;
        if i != usize::MAX {
            self.pending.entry(key).or_default().push_back(i);
        }
        Ok(())
    }
}

/// Parses blkparse's `RWBS` column: an optional `F` (preflush), the operation (`D` discard, `W` write, `R` read,
/// `N` no data), then modifiers (`F` FUA, `A` readahead, `S` sync, `M` metadata, ...). Returns the kind and the
/// sync flag, or `None` when the operation letter is missing or unknown.
pub(crate) fn parse_rwbs(rwbs: &str) -> Option<(Kind, bool)> {
    let body = rwbs.strip_prefix('F').unwrap_or(rwbs);
    let mut chars = body.chars();
    let kind = match chars.next() {
        Some('R') => Kind::Read,
        Some('W') => Kind::Write,
        Some('D' | 'N' | 'E') => Kind::Other,
        // A bare `F` is a flush without data.
        None if !rwbs.is_empty() => Kind::Other,
        _ => return None,
    };
    let rest = chars.as_str();
    if !rest.chars().all(|c| c.is_ascii_uppercase()) {
        return None;
    }
    Some((kind, rest.contains('S')))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rwbs_columns_parse() {
        assert_eq!(parse_rwbs("R"), Some((Kind::Read, false)));
        assert_eq!(parse_rwbs("RA"), Some((Kind::Read, false)));
        assert_eq!(parse_rwbs("WS"), Some((Kind::Write, true)));
        assert_eq!(parse_rwbs("FWFS"), Some((Kind::Write, true)));
        assert_eq!(parse_rwbs("WFSM"), Some((Kind::Write, true)));
        assert_eq!(parse_rwbs("N"), Some((Kind::Other, false)));
        assert_eq!(parse_rwbs("F"), Some((Kind::Other, false)));
        assert_eq!(parse_rwbs("DS"), Some((Kind::Other, true)));
        for bad in ["", "X", "Rs", "W1"] {
            assert_eq!(parse_rwbs(bad), None, "{bad}");
        }
    }
}
