//! A tiny executor for unit tests: completes every operation after a fixed latency plus a per-byte cost, all
//! operations in parallel (an infinitely parallel device), and delivers wake-ups.

use crate::process::{Actions, Event, Op, Process};
use bfq_sched::Time;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// One operation as the executor saw it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Issued {
    pub time: Time,
    pub tag: u64,
    pub op: Op,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Complete { tag: u64, bytes: u64 },
    Wake { generation: u64 },
}

pub(crate) struct Exec {
    /// Fixed latency of every operation, ns.
    pub base_ns: u64,
    /// Extra latency per byte of a read or write, ns.
    pub ns_per_byte: u64,
    /// Every operation issued, in order.
    pub issued: Vec<Issued>,
    /// Every completion delivered: (time, tag).
    pub completed: Vec<(Time, u64)>,
    /// Every wake-up delivered.
    pub woken: Vec<Time>,
    /// Largest number of operations outstanding at once.
    pub max_outstanding: usize,
}

impl Exec {
    pub fn new(base_ns: u64, ns_per_byte: u64) -> Self {
        Exec {
            base_ns,
            ns_per_byte,
            issued: Vec::new(),
            completed: Vec::new(),
            woken: Vec::new(),
            max_outstanding: 0,
        }
    }

    fn latency(&self, op: &Op) -> (u64, u64) {
        match op {
            Op::Read { len, .. } | Op::Write { len, .. } => (self.base_ns + self.ns_per_byte * len, *len),
            Op::Fsync { .. } | Op::Sync | Op::Invalidate { .. } => (self.base_ns, 0),
        }
    }

    /// Runs `p` from `start` until it exits or the clock passes `until`; returns the exit time, if it exited.
    pub fn run(&mut self, p: &mut dyn Process, start: Time, until: Time) -> Option<Time> {
        let mut heap: BinaryHeap<Reverse<(Time, u64, Kind)>> = BinaryHeap::new();
        let mut seq = 0u64;
        let mut generation = 0u64;
        let mut outstanding = 0usize;
        let mut out = Actions::default();
        let mut now = start;
        let mut event = Event::Start;
        loop {
            out.clear();
            p.on_event(event, now, &mut out);
            generation += 1; // any event cancels the previous sleep
            for (tag, op) in out.ops.drain(..) {
                if let Op::Invalidate { .. } = op {
                    // Advisory: takes effect at once, no completion.
                    self.issued.push(Issued { time: now, tag, op });
                    continue;
                }
                let (lat, bytes) = self.latency(&op);
                self.issued.push(Issued { time: now, tag, op });
                outstanding += 1;
                self.max_outstanding = self.max_outstanding.max(outstanding);
                seq += 1;
                heap.push(Reverse((now + lat, seq, Kind::Complete { tag, bytes })));
            }
            if out.exit {
                return Some(now);
            }
            if let Some(t) = out.sleep_until {
                seq += 1;
                heap.push(Reverse((t.max(now), seq, Kind::Wake { generation })));
            }
            loop {
                let Reverse((t, _, kind)) = heap.pop()?;
                if t > until {
                    return None;
                }
                match kind {
                    Kind::Complete { tag, bytes } => {
                        outstanding -= 1;
                        now = t;
                        self.completed.push((t, tag));
                        event = Event::Completed { tag, result: Ok(bytes) };
                        break;
                    }
                    Kind::Wake { generation: g } if g == generation => {
                        now = t;
                        self.woken.push(t);
                        event = Event::Woke;
                        break;
                    }
                    Kind::Wake { .. } => {}
                }
            }
        }
    }
}
