//! The event queue: events ordered by time, ties broken by insertion sequence, so runs are deterministic.
//!
//! Every key `(time, sequence)` is unique, so the order in which events leave is that total order whatever the
//! structure holding them. A simulation keeps few events pending (one per process operation in progress, the
//! processes' sleeps, the flusher's timer), and nearly every new one (an operation's result, due a few
//! microseconds from now) is due before most of those already queued. So while the queue is small it is a vector
//! sorted latest first: the earliest event is popped from its end without moving anything, and an insertion moves
//! only the few events due before the new one. Past [`SMALL_MAX`] events it becomes a binary heap, whose
//! logarithmic cost no longer depends on where new events fall, and back once emptied.

use bfq_sched::Time;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Most events kept in the sorted-vector form. Estimate: with 48-byte entries an insertion at the front moves at
/// most 3 KiB, about the work of a heap's push and pop at that size; below it the vector wins because insertions
/// land near the end (measured: docs/PERFORMANCE.md, "Session 8"). No result depends on it: both forms give the
/// same order.
pub const SMALL_MAX: usize = 64;

/// A time-ordered queue of events of type `E`.
#[derive(Debug)]
pub struct EventQueue<E> {
    store: Store<E>,
    seq: u64,
}

#[derive(Debug)]
enum Store<E> {
    /// Sorted by `(time, sequence)`, latest first, at most [`SMALL_MAX`] entries.
    Small(Vec<(Time, u64, E)>),
    /// More than [`SMALL_MAX`] entries at some point since the queue was last empty.
    Large(BinaryHeap<Reverse<(Time, u64, Slot<E>)>>),
}

/// Wrapper that keeps `E` out of the ordering (only time and sequence number order events).
#[derive(Debug)]
struct Slot<E>(E);

impl<E> PartialEq for Slot<E> {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}
impl<E> Eq for Slot<E> {}
impl<E> PartialOrd for Slot<E> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl<E> Ord for Slot<E> {
    fn cmp(&self, _: &Self) -> std::cmp::Ordering {
        std::cmp::Ordering::Equal
    }
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        EventQueue {
            store: Store::Small(Vec::new()),
            seq: 0,
        }
    }
}

impl<E> EventQueue<E> {
    /// An empty queue.
    pub fn new() -> Self {
        Self::default()
    }

    /// Schedules `event` at time `at`.
    pub fn push(&mut self, at: Time, event: E) {
        self.seq += 1;
        let seq = self.seq;
        match &mut self.store {
            Store::Small(v) if v.len() < SMALL_MAX => {
                // Latest first: the new event goes after every event due after it (all have smaller sequences).
                let i = v.partition_point(|&(t, s, _)| (t, s) > (at, seq));
                v.insert(i, (at, seq, event));
            }
            Store::Small(v) => {
                let mut heap: BinaryHeap<_> = v.drain(..).map(|(t, s, e)| Reverse((t, s, Slot(e)))).collect();
                heap.push(Reverse((at, seq, Slot(event))));
                self.store = Store::Large(heap);
            }
            Store::Large(h) => h.push(Reverse((at, seq, Slot(event)))),
        }
    }

    /// Time of the earliest event.
    pub fn peek_time(&self) -> Option<Time> {
        match &self.store {
            Store::Small(v) => v.last().map(|&(t, _, _)| t),
            Store::Large(h) => h.peek().map(|Reverse((t, _, _))| *t),
        }
    }

    /// Removes the earliest event if it is due at or before `now`.
    pub fn pop_due(&mut self, now: Time) -> Option<(Time, E)> {
        if self.peek_time()? > now {
            return None;
        }
        match &mut self.store {
            Store::Small(v) => v.pop().map(|(t, _, e)| (t, e)),
            Store::Large(h) => {
                let out = h.pop().map(|Reverse((t, _, Slot(e)))| (t, e));
                if h.is_empty() {
                    self.store = Store::Small(Vec::new());
                }
                out
            }
        }
    }

    /// Number of pending events.
    pub fn len(&self) -> usize {
        match &self.store {
            Store::Small(v) => v.len(),
            Store::Large(h) => h.len(),
        }
    }

    /// True if no event is pending.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_order_then_insertion_order() {
        let mut q = EventQueue::new();
        q.push(5, "b");
        q.push(1, "a");
        q.push(5, "c");
        q.push(3, "x");
        let mut out = Vec::new();
        while let Some((_, e)) = q.pop_due(10) {
            out.push(e);
        }
        assert_eq!(out, vec!["a", "x", "b", "c"]);
    }

    /// Random pushes and pops, the queue growing past [`SMALL_MAX`] (into the heap form) and emptying (back to the
    /// vector), against a reference that sorts every pending event by (time, insertion order): both forms must give
    /// the same order, ties by insertion included (times are drawn from a small range so that many tie).
    #[test]
    fn both_forms_pop_in_time_then_insertion_order() {
        let mut q = EventQueue::new();
        let mut reference: Vec<(Time, u64)> = Vec::new();
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = || {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            x >> 33
        };
        let (mut now, mut id, mut popped, mut peak) = (0u64, 0u64, 0usize, 0usize);
        for round in 0..4 {
            // Grow to about 3 x SMALL_MAX, then drain: each round crosses the switch both ways.
            for step in 0..(6 * SMALL_MAX) {
                let growing = step < 3 * SMALL_MAX;
                if growing || next() % 4 == 0 {
                    let at = now + next() % 50;
                    q.push(at, id);
                    reference.push((at, id));
                    id += 1;
                } else {
                    now += next() % 20;
                    while let Some((t, e)) = q.pop_due(now) {
                        let i = (0..reference.len()).min_by_key(|&i| reference[i]).expect("pending");
                        assert_eq!((t, e), reference.remove(i), "round {round}");
                        popped += 1;
                    }
                    assert!(reference.iter().all(|&(t, _)| t > now), "a due event stayed");
                }
                peak = peak.max(q.len());
                assert_eq!(q.len(), reference.len());
            }
            now += 1_000;
            while let Some((t, e)) = q.pop_due(now) {
                let i = (0..reference.len()).min_by_key(|&i| reference[i]).expect("pending");
                assert_eq!((t, e), reference.remove(i));
                popped += 1;
            }
            assert!(q.is_empty() && reference.is_empty());
        }
        assert!(peak > SMALL_MAX, "the heap form was never used: peak {peak}");
        assert_eq!(popped as u64, id);
    }

    #[test]
    fn not_due_stays() {
        let mut q = EventQueue::new();
        q.push(5, 1);
        assert!(q.pop_due(4).is_none());
        assert_eq!(q.pop_due(5), Some((5, 1)));
    }
}
