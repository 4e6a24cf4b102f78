//! A scheduler instance inside a device model, below the host's: what md RAID1 runs on each member disk
//! ([`super::Md1`]) and a loop device's backing disk runs ([`super::Backed`]).

use std::collections::{BTreeMap, VecDeque};

use bfq_sched::tags::{TagClass, TagPool};
use bfq_sched::{Driver, Request, Time};

use super::{DevRequest, Device};

/// A scheduler with its driver (hardware tags), its request pool, and the requests waiting for a tag of the pool
/// (the submitting task would sleep in `get_request`), per pool class in arrival order.
pub(crate) struct Lower {
    pub(crate) driver: Driver,
    pub(crate) tags: TagPool,
    waiting: [VecDeque<Request>; 3],
    out: Vec<Request>,
}

impl Lower {
    /// `driver` with the request pool `tags`.
    pub(crate) fn new(driver: Driver, tags: TagPool) -> Lower {
        Lower {
            driver,
            tags,
            waiting: Default::default(),
            out: Vec::new(),
        }
    }

    /// Gives `rq` to the scheduler if a tag of its class is free and nothing of its class waits; else queues it.
    pub(crate) fn admit(&mut self, rq: Request, now: Time) {
        let class = TagClass::of(rq.dir, rq.sync);
        if self.waiting[class.index()].is_empty()
            && self
                .tags
                .try_allocate_for(class, rq.flow, now, self.driver.policy_mut())
        {
            self.driver.insert(rq, now);
        } else {
            self.waiting[class.index()].push_back(rq);
        }
    }

    /// Admits waiting requests (with legacy pools the head waiter is woken as a batcher once its pool is below
    /// `nr_requests`), then hands each request the scheduler dispatches to `send`.
    pub(crate) fn pump(&mut self, now: Time, mut send: impl FnMut(Request)) {
        for class in TagClass::ALL {
            while let Some(rq) = self.waiting[class.index()].front() {
                let flow = rq.flow;
                let ok = self.tags.try_allocate_for(class, flow, now, self.driver.policy_mut())
                    || (self.tags.wake_waiter(class, flow, now)
                        && self.tags.try_allocate_for(class, flow, now, self.driver.policy_mut()));
                if !ok {
                    break;
                }
                if let Some(rq) = self.waiting[class.index()].pop_front() {
                    self.driver.insert(rq, now);
                }
            }
        }
        let mut out = std::mem::take(&mut self.out);
        out.clear();
        self.driver.pump(now, &mut out);
        for rq in out.drain(..) {
            send(rq);
        }
        self.out = out;
    }

    /// [`Lower::pump`] into `disk`: each dispatched request goes to the disk under its id as the tag and is kept in
    /// `on_disk` by that tag until it completes.
    pub(crate) fn pump_into(&mut self, now: Time, disk: &mut impl Device, on_disk: &mut BTreeMap<u64, Request>) {
        self.pump(now, |rq| {
            disk.submit(
                DevRequest {
                    tag: rq.id.0,
                    dir: rq.dir,
                    sector: rq.sector,
                    sectors: rq.sectors,
                },
                now,
            );
            on_disk.insert(rq.id.0, rq);
        });
    }

    /// Reports the completion of dispatched request `rq` at `now`: the scheduler learns it, and the pool gets back
    /// the tag of `rq` and of every request merged into it.
    pub(crate) fn complete(&mut self, rq: &Request, now: Time) {
        self.driver.complete(rq, now);
        for _ in 0..=rq.merged.len() {
            self.tags.release(TagClass::of(rq.dir, rq.sync));
        }
    }
}
