//! B-WF2Q+: the fair-queueing engine of BFQ (the kernel's `bfq-wf2q.c`: `__bfq_activate_entity`, `bfq_calc_finish`,
//! `bfq_lookup_next_entity`; docs/SCHEDULERS.md, BFQ).
//!
//! Entities (queues and groups) live in one arena. Each group owns scheduling data with one service tree per
//! I/O class; classes are served in strict priority RT > BE > IDLE, except that a backlogged IDLE class is served
//! when it has not been for [`CLASS_IDLE_TIMEOUT`].
//!
//! Virtual time is service (sectors) divided by weight, in fixed point with [`WFQ_SERVICE_SHIFT`] fractional bits.
//! The active tree of a service tree is a treap ordered by finish time `F` whose nodes also keep the minimum start
//! time `S` of their subtree, so the eligible entity (`S <= V`) with the smallest `F` is found in O(log n) expected
//! time by one walk from the root.
//!
//! Virtual times are `u64` and advance with wrapping arithmetic, so nothing can overflow-panic. Tree ordering uses
//! the plain `u64` order: at 2 M sectors/s with a weight sum of 1 the 64-bit space lasts about 24 days of continuous
//! service, and proportionally longer with larger weight sums (the default weight is 40).

use super::ids::{EntityId, QueueId, SdId};
use crate::ensure_invariant;
use crate::scheduler::InvariantViolation;
use crate::slab::{Slab, SlabKey};
use crate::types::{Time, MS};
use std::collections::BTreeSet;

/// Fixed-point shift of virtual time: `delta = (service << 22) / weight`, so that a one-sector service at the
/// largest weight (1000 x 3000 for soft real-time raising) still advances virtual time by a non-zero amount.
pub const WFQ_SERVICE_SHIFT: u32 = 22;

/// How long (ns) the IDLE class may go unserved while it is backlogged before a lookup serves it anyway: 200 ms
/// (`HZ/5`), so idle-class work is never starved forever.
pub const CLASS_IDLE_TIMEOUT: Time = 200 * MS;

/// Number of I/O classes, each with its own service tree.
pub const CLASSES: usize = 3;

/// Index of the IDLE class's service tree.
pub const IDLE_CLASS: usize = 2;

/// Marks "no node" in the treap's child links (raw slot indices, private to the treap).
const NIL: u32 = u32::MAX;

/// Virtual-time cost of `service` sectors at `weight`: `(service << WFQ_SERVICE_SHIFT) / weight`.
pub fn delta(service: u64, weight: u64) -> u64 {
    if service < 1 << (63 - WFQ_SERVICE_SHIFT) {
        // Fast path: the shifted service fits in 64 bits (any realistic budget).
        (service << WFQ_SERVICE_SHIFT) / weight.max(1)
    } else {
        ((u128::from(service) << WFQ_SERVICE_SHIFT) / u128::from(weight.max(1))) as u64
    }
}

/// Wrap-safe `a > b` for virtual times (signed difference).
pub fn vt_gt(a: u64, b: u64) -> bool {
    (a.wrapping_sub(b) as i64) > 0
}

/// Wrap-safe maximum of two virtual times.
pub fn vt_max(a: u64, b: u64) -> u64 {
    if vt_gt(a, b) {
        a
    } else {
        b
    }
}

/// Where an entity currently is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// Not scheduled and not counted in any weight sum.
    Out,
    /// On its service tree's active tree (backlogged).
    Active,
    /// On the idle tree: not backlogged, but its finish time is still in the future, so its weight stays counted.
    Idle,
    /// Being served (removed from the active tree, still counted in the weight sum).
    InService,
}

/// What an entity schedules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owner {
    /// A BFQ queue of the policy.
    Queue(QueueId),
    /// A group, by its scheduling data.
    Group(SdId),
}

/// What an entity's owner may read about it: a copy of its public facts, from [`Wf2q::entity`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntityFacts {
    /// Virtual start time (fixed point, see [`WFQ_SERVICE_SHIFT`]).
    pub start: u64,
    /// Virtual finish time (fixed point).
    pub finish: u64,
    /// Budget of the current slot (sectors).
    pub budget: u64,
    /// Service received in the current slot (sectors).
    pub service: u64,
    /// Weight in force (weight units).
    pub weight: u32,
    /// I/O class index (0 RT, 1 BE, 2 IDLE).
    pub class: u8,
    /// The group's sched data this entity is scheduled in.
    pub parent: SdId,
    /// What it schedules.
    pub owner: Owner,
    /// Where it is.
    pub place: Place,
}

/// A schedulable entity: a queue or a group.
#[derive(Debug, Clone)]
struct Entity {
    /// Virtual start time.
    pub start: u64,
    /// Virtual finish time.
    pub finish: u64,
    /// Budget of the current slot (sectors).
    pub budget: u64,
    /// Service received in the current slot (sectors).
    pub service: u64,
    /// Weight in force (counted in the tree's weight sum while not [`Place::Out`]).
    pub weight: u32,
    /// Weight to apply at the next activation or requeue (lazy weight change).
    pub new_weight: u32,
    /// I/O class index (0 RT, 1 BE, 2 IDLE).
    pub class: u8,
    /// The [`SchedData`] this entity is scheduled in.
    pub parent: SdId,
    /// What it schedules.
    pub owner: Owner,
    /// Where it is.
    pub place: Place,
}

/// Active-tree node of an entity, kept apart from [`Entity`] so that tree walks touch a compact array. Its
/// `start`/`finish` are copies taken when the entity is inserted; an entity's timestamps never change while it
/// is in the tree (every update removes it first).
#[derive(Debug, Clone, Copy)]
struct Node {
    finish: u64,
    start: u64,
    min_start: u64,
    left: u32,
    right: u32,
    prio: u32,
}

const EMPTY_NODE: Node = Node {
    finish: 0,
    start: 0,
    min_start: 0,
    left: NIL,
    right: NIL,
    prio: 0,
};

/// One per-class service tree.
#[derive(Debug, Clone, Default)]
struct ServiceTree {
    /// System virtual time (fixed point).
    vtime: u64,
    /// Sum of the weights of active, in-service and idle-tree entities (weight units).
    wsum: u64,
    /// Root of the active treap (raw entity slot index), or `NIL`.
    root: u32,
    /// Idle tree ordered by finish time.
    idle: BTreeSet<(u64, EntityId)>,
}

impl ServiceTree {
    fn new() -> Self {
        ServiceTree {
            vtime: 0,
            wsum: 0,
            root: NIL,
            idle: BTreeSet::new(),
        }
    }
    /// True if no entity is backlogged on this tree.
    fn is_empty(&self) -> bool {
        self.root == NIL
    }
}

/// Scheduling data of one group: per-class trees and the entity in service at this level.
#[derive(Debug, Clone)]
struct SchedData {
    /// Per-class service trees (RT, BE, IDLE).
    trees: [ServiceTree; CLASSES],
    /// Entity in service at this level.
    in_service: Option<EntityId>,
    /// Last time (ns) the IDLE class was (about to be) served at this level.
    idle_class_last_service: Time,
    /// The group's own entity in its parent; `None` for the root.
    owner: Option<EntityId>,
}

impl SchedData {
    fn new(owner: Option<EntityId>) -> Self {
        SchedData {
            trees: [ServiceTree::new(), ServiceTree::new(), ServiceTree::new()],
            in_service: None,
            idle_class_last_service: 0,
            owner,
        }
    }
    /// True if some entity is backlogged at this level.
    fn has_active(&self) -> bool {
        self.trees.iter().any(|t| !t.is_empty())
    }
}

/// The whole hierarchy: entity arena and per-group scheduling data. `sds[0]` is the root.
#[derive(Debug, Clone)]
pub struct Wf2q {
    /// Entity arena.
    ents: Slab<EntityId, Entity>,
    /// Per-group scheduling data, indexed by [`SdId::slot`]; [`SdId::ROOT`] is the root group.
    sds: Vec<SchedData>,
    /// Treap node of each entity slot, indexed by the entity's raw slot index.
    nodes: Vec<Node>,
    /// Counter mixed with the slot index into each inserted node's treap priority (deterministic).
    seed: u32,
    /// Scratch stack of the treap operations (the nodes whose subtree minimum is to be recomputed).
    path: Vec<u32>,
}

impl Default for Wf2q {
    fn default() -> Self {
        Self::new()
    }
}

fn mix(x: u32) -> u32 {
    let mut z = x.wrapping_add(0x9E37_79B9);
    z = (z ^ (z >> 16)).wrapping_mul(0x85EB_CA6B);
    z = (z ^ (z >> 13)).wrapping_mul(0xC2B2_AE35);
    z ^ (z >> 16)
}

/// Recomputes the subtree minimum start of treap node `x` from its own start and its children's minima.
fn pull(nodes: &mut [Node], x: u32) {
    let n = nodes[x as usize];
    let mut m = n.start;
    if n.left != NIL {
        m = m.min(nodes[n.left as usize].min_start);
    }
    if n.right != NIL {
        m = m.min(nodes[n.right as usize].min_start);
    }
    nodes[x as usize].min_start = m;
}

/// Splits the treap `t` into the keys below `k` and the others; returns both roots. `path` is scratch space;
/// what it held before is left as it was.
fn split(nodes: &mut [Node], path: &mut Vec<u32>, t: u32, k: (u64, u32)) -> (u32, u32) {
    let base = path.len();
    let (mut lroot, mut rroot) = (NIL, NIL);
    // The last node placed on each side: the next node of that side becomes its right (left) child.
    let (mut lhook, mut rhook) = (NIL, NIL);
    let mut cur = t;
    while cur != NIL {
        path.push(cur);
        let c = nodes[cur as usize];
        if (c.finish, cur) < k {
            if lhook == NIL {
                lroot = cur;
            } else {
                nodes[lhook as usize].right = cur;
            }
            lhook = cur;
            cur = c.right;
        } else {
            if rhook == NIL {
                rroot = cur;
            } else {
                nodes[rhook as usize].left = cur;
            }
            rhook = cur;
            cur = c.left;
        }
    }
    if lhook != NIL {
        nodes[lhook as usize].right = NIL;
    }
    if rhook != NIL {
        nodes[rhook as usize].left = NIL;
    }
    while path.len() > base {
        if let Some(x) = path.pop() {
            pull(nodes, x);
        }
    }
    (lroot, rroot)
}

/// Joins treaps `a` and `b`, every key of `a` below every key of `b`; returns the root. `path` is scratch
/// space; what it held before is left as it was.
fn merge(nodes: &mut [Node], path: &mut Vec<u32>, a: u32, b: u32) -> u32 {
    let base = path.len();
    let mut root = NIL;
    // Where the next subtree goes: the right child of a node taken from `a`, the left one of a node from `b`.
    let mut hook = NIL;
    let mut hook_right = false;
    let (mut a, mut b) = (a, b);
    loop {
        let x = if a == NIL {
            b
        } else if b == NIL || nodes[a as usize].prio > nodes[b as usize].prio {
            a
        } else {
            b
        };
        if hook == NIL {
            root = x;
        } else if hook_right {
            nodes[hook as usize].right = x;
        } else {
            nodes[hook as usize].left = x;
        }
        if a == NIL || b == NIL {
            break;
        }
        path.push(x);
        hook = x;
        hook_right = x == a;
        if hook_right {
            a = nodes[a as usize].right;
        } else {
            b = nodes[b as usize].left;
        }
    }
    while path.len() > base {
        if let Some(x) = path.pop() {
            pull(nodes, x);
        }
    }
    root
}

impl Wf2q {
    /// A hierarchy with only the root group.
    pub fn new() -> Self {
        Wf2q {
            ents: Slab::new(),
            sds: vec![SchedData::new(None)],
            nodes: Vec::new(),
            seed: 1,
            path: Vec::new(),
        }
    }

    /// Adds a group scheduled under `parent_sd` with `weight`; returns its sched-data index.
    pub fn new_group(&mut self, parent_sd: SdId, weight: u32) -> SdId {
        let sd = SdId::at(self.sds.len());
        let e = self.new_entity(parent_sd, weight, 1, Owner::Group(sd));
        self.sds.push(SchedData::new(Some(e)));
        sd
    }

    /// Adds an entity (out of every tree) and returns its id.
    pub fn new_entity(&mut self, parent_sd: SdId, weight: u32, class: u8, owner: Owner) -> EntityId {
        let w = weight.max(1);
        let ent = Entity {
            start: 0,
            finish: 0,
            budget: 0,
            service: 0,
            weight: w,
            new_weight: w,
            class: class.min(IDLE_CLASS as u8),
            parent: parent_sd,
            owner,
            place: Place::Out,
        };
        let id = self.ents.insert(ent);
        let i = id.index() as usize;
        if i < self.nodes.len() {
            self.nodes[i] = EMPTY_NODE;
        } else {
            self.nodes.push(EMPTY_NODE);
        }
        id
    }

    /// Frees an entity that is not active or in service (forgetting it if it is on the idle tree).
    pub fn free_entity(&mut self, e: EntityId) {
        let Some(ent) = self.ents.get(e) else { return };
        match ent.place {
            Place::Idle => self.forget(e),
            Place::Out => {}
            Place::Active | Place::InService => return,
        }
        self.ents.remove(e);
    }

    fn st(&mut self, e: EntityId) -> &mut ServiceTree {
        let ent = &self.ents[e];
        let (p, c) = (ent.parent.slot(), ent.class as usize);
        &mut self.sds[p].trees[c]
    }

    // ---- treap keyed by (finish, id), augmented with the subtree minimum start ----

    // The treap operations are iterative (issue 19: the recursive ones were the largest single cost of a request
    // at 4096 flows). Each builds exactly the tree of the textbook recursive version: the nodes it relinks are
    // remembered on `self.path` and their subtree minimum recomputed bottom-up afterwards.

    /// Inserts node `n` (its own children `NIL`) into the treap rooted at `t`; returns the new root.
    fn t_insert(&mut self, t: u32, n: u32) -> u32 {
        let nodes = &mut self.nodes[..];
        let (kn, ns, pn) = {
            let x = &nodes[n as usize];
            ((x.finish, n), x.start, x.prio)
        };
        // Walk down while the nodes outrank `n`; `n`'s start joins each of their subtrees.
        let mut parent = NIL;
        let mut left_of_parent = false;
        let mut cur = t;
        while cur != NIL && nodes[cur as usize].prio >= pn {
            let c = &mut nodes[cur as usize];
            c.min_start = c.min_start.min(ns);
            parent = cur;
            left_of_parent = kn < (c.finish, cur);
            cur = if left_of_parent { c.left } else { c.right };
        }
        // `n` takes `cur`'s place, with `cur`'s subtree split around it.
        let (a, b) = split(nodes, &mut self.path, cur, kn);
        nodes[n as usize].left = a;
        nodes[n as usize].right = b;
        pull(nodes, n);
        if parent == NIL {
            return n;
        }
        if left_of_parent {
            nodes[parent as usize].left = n;
        } else {
            nodes[parent as usize].right = n;
        }
        t
    }

    /// Removes node `n` from the treap rooted at `t`; returns the new root.
    fn t_remove(&mut self, t: u32, n: u32) -> u32 {
        let nodes = &mut self.nodes[..];
        let path = &mut self.path;
        path.clear();
        let kn = (nodes[n as usize].finish, n);
        let mut cur = t;
        while cur != NIL && cur != n {
            path.push(cur);
            let c = &nodes[cur as usize];
            cur = if kn < (c.finish, cur) { c.left } else { c.right };
        }
        let mut root = t;
        if cur == n {
            let (l, r) = (nodes[n as usize].left, nodes[n as usize].right);
            nodes[n as usize].left = NIL;
            nodes[n as usize].right = NIL;
            let m = merge(nodes, path, l, r);
            match path.last() {
                None => root = m,
                Some(&p) => {
                    let pn = &mut nodes[p as usize];
                    if kn < (pn.finish, p) {
                        pn.left = m;
                    } else {
                        pn.right = m;
                    }
                }
            }
        }
        while let Some(x) = path.pop() {
            pull(nodes, x);
        }
        root
    }

    /// The eligible (`S <= v`) entity with the smallest finish time under `t`, in one root-to-leaf walk.
    fn first_eligible(&self, t: u32, v: u64) -> u32 {
        let mut x = t;
        while x != NIL {
            let n = &self.nodes[x as usize];
            if n.left != NIL && self.nodes[n.left as usize].min_start <= v {
                x = n.left;
            } else if n.start <= v {
                return x;
            } else {
                x = n.right;
            }
        }
        NIL
    }

    /// Minimum start time in the tree rooted at `t` (`t` must not be [`NIL`]).
    fn min_start(&self, t: u32) -> u64 {
        self.nodes[t as usize].min_start
    }

    fn active_insert(&mut self, e: EntityId) {
        self.seed = self.seed.wrapping_add(1);
        let x = e.index();
        let prio = mix(self.seed ^ x.rotate_left(16));
        let (start, finish) = {
            let ent = &mut self.ents[e];
            ent.place = Place::Active;
            (ent.start, ent.finish)
        };
        self.nodes[x as usize] = Node {
            finish,
            start,
            min_start: start,
            left: NIL,
            right: NIL,
            prio,
        };
        let root = self.st(e).root;
        let r = self.t_insert(root, x);
        self.st(e).root = r;
    }

    fn active_remove(&mut self, e: EntityId) {
        let root = self.st(e).root;
        let r = self.t_remove(root, e.index());
        self.st(e).root = r;
    }

    /// `bfq_calc_finish`: `F = S + delta(budget, weight)`.
    fn calc_finish(&mut self, e: EntityId) {
        let ent = &mut self.ents[e];
        ent.finish = ent.start.wrapping_add(delta(ent.budget, u64::from(ent.weight)));
    }

    fn apply_weight(&mut self, e: EntityId) {
        let (old, new) = (self.ents[e].weight, self.ents[e].new_weight);
        if old != new {
            let st = self.st(e);
            st.wsum = st.wsum.saturating_sub(u64::from(old)) + u64::from(new);
            self.ents[e].weight = new;
        }
    }

    /// Removes an idle-tree entity and its weight from the weight sum.
    fn forget(&mut self, e: EntityId) {
        let f = self.ents[e].finish;
        let w = u64::from(self.ents[e].weight);
        let st = self.st(e);
        st.idle.remove(&(f, e));
        st.wsum = st.wsum.saturating_sub(w);
        self.ents[e].place = Place::Out;
    }

    /// `bfq_forget_idle`: when nothing is active and the last idle entity's finish time has been reached, set
    /// virtual time to that finish time; then drop the first idle entity if its finish time has been reached.
    ///
    /// The first step keeps the kernel's condition (the last idle finish time is not after virtual time), under
    /// which the new value is never after the old one: virtual time steps *back* to the last idle finish time
    /// when it was past it (observed in `bfq reproduce --quick`). So virtual time is not monotonic here, and
    /// [`Wf2q::check_invariants`] does not assert that it is.
    fn forget_idle(&mut self, sd: usize, class: usize) {
        let st = &mut self.sds[sd].trees[class];
        if st.root == NIL {
            if let Some(&(lf, _)) = st.idle.last() {
                if !vt_gt(lf, st.vtime) {
                    st.vtime = lf;
                }
            }
        }
        if let Some(&(ff, fe)) = st.idle.first() {
            if !vt_gt(ff, st.vtime) {
                self.forget(fe);
            }
        }
    }

    /// Schedules the idle (or out) entity `e`, back-shifting its timestamps if `backshift`; `wr_coeff` limits how
    /// far back-shifted stamps may lag the system virtual time. Ancestor groups are activated or repositioned.
    pub fn activate(&mut self, e: EntityId, backshift: bool, wr_coeff: u32) {
        let Some(ent) = self.ents.get(e) else { return };
        let place = ent.place;
        let f_old = ent.finish;
        let vtime = self.st(e).vtime;
        let min_vstart = if backshift && vt_gt(vtime, f_old) { f_old } else { vtime };
        match place {
            Place::Active | Place::InService => return,
            Place::Idle => {
                self.st(e).idle.remove(&(f_old, e));
                self.ents[e].start = vt_max(min_vstart, f_old);
            }
            Place::Out => {
                let w = u64::from(self.ents[e].weight);
                self.st(e).wsum += w;
                self.ents[e].start = min_vstart;
            }
        }
        self.apply_weight(e);
        self.calc_finish(e);
        let ent = &mut self.ents[e];
        if backshift && vt_gt(vtime, ent.finish) {
            let d = vtime.wrapping_sub(ent.finish) / u64::from(wr_coeff.max(1));
            ent.start = ent.start.wrapping_add(d);
            ent.finish = ent.finish.wrapping_add(d);
        }
        self.active_insert(e);
        self.update_ancestors(e);
    }

    /// Changes the budget of an active (not in-service) entity and repositions it: `F = S + delta(budget)`.
    pub fn reposition(&mut self, e: EntityId, budget: u64) {
        let Some(ent) = self.ents.get_mut(e) else {
            return;
        };
        ent.budget = budget;
        if ent.place != Place::Active {
            return;
        }
        self.active_remove(e);
        self.apply_weight(e);
        self.calc_finish(e);
        self.active_insert(e);
        self.update_ancestors(e);
    }

    /// After a change under `e`'s parent group, activate or reposition the ancestors with the group's new budget
    /// (a group's budget is that of its next entity in service).
    fn update_ancestors(&mut self, e: EntityId) {
        let mut cur = e;
        loop {
            let sd = self.ents[cur].parent;
            let Some(g) = self.sds[sd.slot()].owner else {
                return;
            };
            let budget = self.peek(sd, 0).map_or(0, |c| self.ents[c].budget);
            match self.ents[g].place {
                Place::InService => return,
                Place::Active => {
                    if self.ents[g].budget == budget {
                        return;
                    }
                    self.ents[g].budget = budget;
                    self.active_remove(g);
                    self.apply_weight(g);
                    self.calc_finish(g);
                    self.active_insert(g);
                }
                Place::Idle | Place::Out => {
                    self.ents[g].budget = budget;
                    // Activating the group walks further up by itself.
                    self.activate(g, false, 1);
                    return;
                }
            }
            cur = g;
        }
    }

    /// Charges `s` sectors to `e` and each ancestor, advancing each level's virtual time.
    pub fn served(&mut self, e: EntityId, s: u64) {
        let mut cur = Some(e);
        while let Some(ent) = cur.and_then(|c| self.ents.get_mut(c)) {
            ent.service = ent.service.saturating_add(s);
            let (sd, class) = (ent.parent.slot(), ent.class as usize);
            let st = &mut self.sds[sd].trees[class];
            st.vtime = st.vtime.wrapping_add(delta(s, st.wsum));
            self.forget_idle(sd, class);
            cur = self.sds[sd].owner;
        }
    }

    /// The entity a lookup at level `sd` would choose at time `now`, without changing anything.
    fn peek(&self, sd: SdId, now: Time) -> Option<EntityId> {
        let sdd = self.sds.get(sd.slot())?;
        let idle_first = self.idle_class_due(sd, now);
        let order: [usize; 3] = if idle_first { [2, 0, 1] } else { [0, 1, 2] };
        for c in order {
            let st = &sdd.trees[c];
            if st.root == NIL {
                continue;
            }
            let v = vt_max(st.vtime, self.min_start(st.root));
            let x = self.first_eligible(st.root, v);
            if x != NIL {
                return self.ents.key_at(x);
            }
        }
        None
    }

    /// Whether a lookup at level `sd` at time `now` would look at the IDLE class first: that class has a
    /// backlogged entity and has gone unserved for more than [`CLASS_IDLE_TIMEOUT`].
    fn idle_class_due(&self, sd: SdId, now: Time) -> bool {
        self.sds.get(sd.slot()).is_some_and(|sdd| {
            now > sdd.idle_class_last_service.saturating_add(CLASS_IDLE_TIMEOUT) && !sdd.trees[IDLE_CLASS].is_empty()
        })
    }

    /// A committed lookup at level `sd`: applies the IDLE-class 200 ms rule and, if nothing is in service at this
    /// level, moves virtual time up so that some entity is eligible.
    fn lookup(&mut self, sd: SdId, now: Time) -> Option<EntityId> {
        let s = sd.slot();
        let mut order: [usize; 3] = [0, 1, 2];
        if now > self.sds[s].idle_class_last_service.saturating_add(CLASS_IDLE_TIMEOUT) {
            if !self.sds[s].trees[IDLE_CLASS].is_empty() {
                order = [2, 0, 1];
            }
            self.sds[s].idle_class_last_service = now;
        }
        let no_in_service = self.sds[s].in_service.is_none();
        for c in order {
            let root = self.sds[s].trees[c].root;
            if root == NIL {
                continue;
            }
            let v = vt_max(self.sds[s].trees[c].vtime, self.min_start(root));
            if no_in_service {
                self.sds[s].trees[c].vtime = v;
                self.forget_idle(s, c);
            }
            let x = self.first_eligible(root, v);
            if x != NIL {
                return self.ents.key_at(x);
            }
        }
        None
    }

    /// Chooses the next queue entity from the root down, putting every entity on the path in service
    /// (removed from its active tree, `service = 0`).
    pub fn next_in_service(&mut self, now: Time) -> Option<EntityId> {
        let mut sd = SdId::ROOT;
        for _ in 0..64 {
            let e = self.lookup(sd, now)?;
            self.active_remove(e);
            let ent = &mut self.ents[e];
            ent.place = Place::InService;
            ent.service = 0;
            let owner = ent.owner;
            self.sds[sd.slot()].in_service = Some(e);
            match owner {
                Owner::Queue(_) => return Some(e),
                Owner::Group(g) => sd = g,
            }
        }
        None
    }

    /// Ends the service of in-service leaf `leaf` and of its in-service ancestors: each is requeued with the
    /// service it received (`S = S + service/w`) if still backlogged, or deactivated (to the idle tree if its
    /// finish time is ahead of virtual time). Ancestors' service is reset to 0; the leaf's is left to the caller.
    pub fn expire_path(&mut self, leaf: EntityId, leaf_busy: bool) {
        let mut e = leaf;
        let mut busy = leaf_busy;
        for _ in 0..64 {
            let Some(ent) = self.ents.get(e) else { return };
            if ent.place != Place::InService {
                return;
            }
            let sd = ent.parent;
            if self.sds[sd.slot()].in_service == Some(e) {
                self.sds[sd.slot()].in_service = None;
            }
            {
                let ent = &mut self.ents[e];
                ent.finish = ent.start.wrapping_add(delta(ent.service, u64::from(ent.weight)));
            }
            if busy {
                self.ents[e].start = self.ents[e].finish;
                self.apply_weight(e);
                self.calc_finish(e);
                self.active_insert(e);
            } else {
                self.park_or_forget(e);
            }
            if e != leaf {
                self.ents[e].service = 0;
            }
            let Some(g) = self.sds[sd.slot()].owner else {
                return;
            };
            busy = self.sds[sd.slot()].has_active();
            if busy {
                let b = self.peek(sd, 0).map_or(0, |c| self.ents[c].budget);
                self.ents[g].budget = b;
            }
            e = g;
        }
    }

    fn park_or_forget(&mut self, e: EntityId) {
        let (f, w) = (self.ents[e].finish, u64::from(self.ents[e].weight));
        let st = self.st(e);
        if vt_gt(f, st.vtime) {
            st.idle.insert((f, e));
            self.ents[e].place = Place::Idle;
        } else {
            st.wsum = st.wsum.saturating_sub(w);
            self.ents[e].place = Place::Out;
        }
    }

    /// Deactivates an active (not in-service) entity that is no longer backlogged, onto the idle tree if its
    /// finish time is ahead of virtual time; ancestors left without backlog are deactivated too.
    pub fn deactivate(&mut self, e: EntityId) {
        let mut cur = e;
        for _ in 0..64 {
            let Some(ent) = self.ents.get(cur) else { return };
            if ent.place != Place::Active {
                return;
            }
            self.active_remove(cur);
            self.park_or_forget(cur);
            let sd = self.ents[cur].parent;
            let Some(g) = self.sds[sd.slot()].owner else {
                return;
            };
            if self.sds[sd.slot()].has_active() || self.sds[sd.slot()].in_service.is_some() {
                if self.ents[g].place == Place::Active {
                    let b = self.peek(sd, 0).map_or(0, |c| self.ents[c].budget);
                    self.reposition(g, b);
                }
                return;
            }
            cur = g;
        }
    }

    /// Whether the root-level in-service entity, requeued now with the service it received, would be chosen
    /// again before every other backlogged entity (the kernel's `next_in_service == in_service_entity`).
    pub fn in_service_still_next(&self, now: Time) -> bool {
        let Some(en) = self.sds[SdId::ROOT.slot()].in_service.and_then(|e| self.ents.get(e)) else {
            return false;
        };
        let Some(c) = self.peek(SdId::ROOT, now) else {
            return true;
        };
        let cn = &self.ents[c];
        if en.class != cn.class {
            // While the IDLE class is due, the lookup serves it before every other class (the kernel's
            // `bfq_lookup_next_entity` then searches the IDLE tree alone), so an entity of a higher class in
            // service is not the next one; otherwise the higher class wins.
            if self.idle_class_due(SdId::ROOT, now) {
                return false;
            }
            return en.class < cn.class;
        }
        let w = u64::from(en.weight);
        let s = en.start.wrapping_add(delta(en.service, w));
        let f = s.wrapping_add(delta(en.budget, w));
        let st = &self.sds[en.parent.slot()].trees[en.class as usize];
        let min_start = if st.root == NIL {
            s
        } else {
            self.min_start(st.root).min(s)
        };
        let v = vt_max(st.vtime, min_start);
        !vt_gt(s, v) && f < cn.finish
    }

    /// Sets the weight that `e` takes at its next activation or requeue (clamped to at least 1).
    pub fn set_weight(&mut self, e: EntityId, weight: u32) {
        if let Some(ent) = self.ents.get_mut(e) {
            ent.new_weight = weight.max(1);
        }
    }

    /// Read-only lookup: the public facts of entity `e`, if it exists.
    pub fn entity(&self, e: EntityId) -> Option<EntityFacts> {
        self.ents.get(e).map(|x| EntityFacts {
            start: x.start,
            finish: x.finish,
            budget: x.budget,
            service: x.service,
            weight: x.weight,
            class: x.class,
            parent: x.parent,
            owner: x.owner,
            place: x.place,
        })
    }

    /// Sets the budget (sectors) of `e`, which must not be on an active tree (use [`Wf2q::reposition`] for an
    /// active one): a queue about to be activated, or the one in service. The finish time follows at the next
    /// activation or requeue (`bfq_calc_finish`).
    pub fn set_budget(&mut self, e: EntityId, budget: u64) {
        if let Some(en) = self.ents.get_mut(e) {
            en.budget = budget;
        }
    }

    /// Forgets the service (sectors) `e` received in its last slot, so that its next slot starts from zero.
    pub fn clear_service(&mut self, e: EntityId) {
        if let Some(en) = self.ents.get_mut(e) {
            en.service = 0;
        }
    }

    /// `bfq_bfqq_charge_time`: charges in-service `e` as if it had received `charge` sectors of service: its
    /// budget grows to at least `charge`, and the service it has not received yet is charged to it and to its
    /// ancestors (advancing virtual time as [`Wf2q::served`] does).
    pub fn charge_time(&mut self, e: EntityId, charge: u64) {
        let Some(en) = self.ents.get_mut(e) else {
            return;
        };
        if en.budget < charge {
            en.budget = charge;
        }
        let service = en.service;
        self.served(e, charge.saturating_sub(service));
    }

    /// The system virtual time (fixed point) of the service tree entity `e` is scheduled on, for tests.
    #[cfg(test)]
    pub fn vtime_of(&mut self, e: EntityId) -> u64 {
        self.st(e).vtime
    }

    /// Weight in force (weight units) of group `sd`'s own entity; `None` for the root group, which has none.
    pub fn group_weight(&self, sd: SdId) -> Option<u32> {
        let g = self.sds.get(sd.slot()).and_then(|x| x.owner)?;
        self.ents.get(g).map(|x| x.weight)
    }

    /// Sets the weight (weight units) of group `sd`'s own entity, applied lazily like [`Wf2q::set_weight`]. The
    /// root group has no entity: nothing happens.
    pub fn set_group_weight(&mut self, sd: SdId, weight: u32) {
        if let Some(g) = self.sds.get(sd.slot()).and_then(|x| x.owner) {
            self.set_weight(g, weight);
        }
    }

    /// Checks the engine's invariants: the entity slab's bookkeeping; per service tree, the weight sum equals the
    /// weights of its active, idle-tree and in-service entities; the active treap is ordered by (finish, slot),
    /// its nodes carry their entity's current timestamps and the subtree minimum start is that of the node and
    /// its children; every active entity is on exactly its own tree's treap and every idle one on its idle tree;
    /// the in-service entity of each level is in service there and on no tree; a group's scheduling data and its
    /// entity name each other.
    pub fn check_invariants(&self) -> Result<(), InvariantViolation> {
        const W: &str = "wf2q";
        if let Err(e) = self.ents.check_invariants() {
            return Err(InvariantViolation::new(W, e));
        }
        let mut on_tree = vec![0u32; self.ents.slots()];
        for (si, sd) in self.sds.iter().enumerate() {
            let sdi = SdId::at(si);
            for (c, st) in sd.trees.iter().enumerate() {
                let mut wsum = 0u64;
                let (mut n_active, mut n_idle) = (0usize, 0usize);
                for (_, en) in self.ents.iter() {
                    if en.parent != sdi || usize::from(en.class) != c {
                        continue;
                    }
                    match en.place {
                        Place::Out => {}
                        Place::Active => {
                            n_active += 1;
                            wsum += u64::from(en.weight);
                        }
                        Place::Idle => {
                            n_idle += 1;
                            wsum += u64::from(en.weight);
                        }
                        Place::InService => wsum += u64::from(en.weight),
                    }
                }
                ensure_invariant!(
                    st.wsum == wsum,
                    W,
                    "sd {si} class {c}: weight sum {} but its entities weigh {wsum}",
                    st.wsum
                );
                let mut visited = 0usize;
                let mut last: Option<(u64, u32)> = None;
                self.check_treap(st.root, sdi, c, &mut visited, &mut last, &mut on_tree)?;
                ensure_invariant!(
                    visited == n_active,
                    W,
                    "sd {si} class {c}: {visited} treap nodes but {n_active} active entities"
                );
                ensure_invariant!(
                    st.idle.len() == n_idle,
                    W,
                    "sd {si} class {c}: {} idle-tree entries but {n_idle} idle entities",
                    st.idle.len()
                );
                for &(f, e) in &st.idle {
                    let Some(en) = self.ents.get(e) else {
                        return Err(InvariantViolation::new(W, format!("idle tree names stale {e:?}")));
                    };
                    ensure_invariant!(
                        en.place == Place::Idle && en.finish == f && en.parent == sdi && usize::from(en.class) == c,
                        W,
                        "idle-tree entry ({f}, {e:?}) does not match its entity {en:?}"
                    );
                }
            }
            if let Some(e) = sd.in_service {
                let ok = self
                    .ents
                    .get(e)
                    .is_some_and(|en| en.place == Place::InService && en.parent == sdi);
                ensure_invariant!(ok, W, "sd {si}: in-service {e:?} is not in service at this level");
            }
            if let Some(g) = sd.owner {
                let ok = self.ents.get(g).is_some_and(|en| en.owner == Owner::Group(sdi));
                ensure_invariant!(ok, W, "sd {si}: its entity {g:?} does not own it");
            }
        }
        for (e, en) in self.ents.iter() {
            ensure_invariant!(en.weight >= 1, W, "{e:?} has weight 0");
            if en.place == Place::InService {
                ensure_invariant!(
                    self.sds[en.parent.slot()].in_service == Some(e),
                    W,
                    "{e:?} is in service but its level serves {:?}",
                    self.sds[en.parent.slot()].in_service
                );
            }
            let n = on_tree[e.index() as usize];
            let want = u32::from(en.place == Place::Active);
            ensure_invariant!(n == want, W, "{e:?} ({:?}) is on {n} treaps", en.place);
        }
        Ok(())
    }

    /// In-order walk of the treap under `t` for [`Wf2q::check_invariants`]; returns the subtree's minimum start.
    fn check_treap(
        &self,
        t: u32,
        sd: SdId,
        class: usize,
        visited: &mut usize,
        last: &mut Option<(u64, u32)>,
        on_tree: &mut [u32],
    ) -> Result<u64, InvariantViolation> {
        const W: &str = "wf2q";
        if t == NIL {
            return Ok(u64::MAX);
        }
        ensure_invariant!(*visited <= self.nodes.len(), W, "treap cycle under node {t}");
        let n = self.nodes[t as usize];
        let left = self.check_treap(n.left, sd, class, visited, last, on_tree)?;
        *visited += 1;
        let Some(e) = self.ents.key_at(t) else {
            return Err(InvariantViolation::new(W, format!("treap node {t} has no live entity")));
        };
        on_tree[t as usize] += 1;
        let en = &self.ents[e];
        ensure_invariant!(
            en.place == Place::Active && en.parent == sd && usize::from(en.class) == class,
            W,
            "treap of sd {:?} class {class} holds {e:?} ({:?}, sd {:?}, class {})",
            sd,
            en.place,
            en.parent,
            en.class
        );
        ensure_invariant!(
            n.start == en.start && n.finish == en.finish,
            W,
            "{e:?}: node stamps ({}, {}) differ from the entity's ({}, {})",
            n.start,
            n.finish,
            en.start,
            en.finish
        );
        let key = (n.finish, t);
        ensure_invariant!(
            last.is_none_or(|l| l < key),
            W,
            "treap out of order at {e:?}: {key:?} after {last:?}"
        );
        *last = Some(key);
        let right = self.check_treap(n.right, sd, class, visited, last, on_tree)?;
        let m = n.start.min(left).min(right);
        ensure_invariant!(
            n.min_start == m,
            W,
            "{e:?}: subtree min start {} but the subtree's minimum is {m}",
            n.min_start
        );
        Ok(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Brute-force reference: among active entities of the BE tree of the root, the eligible one with the
    /// smallest (F, id).
    fn reference(w: &Wf2q, ids: &[EntityId], v: u64) -> Option<EntityId> {
        ids.iter()
            .copied()
            .filter(|&e| w.ents[e].start <= v)
            .min_by_key(|&e| (w.ents[e].finish, e.index()))
    }

    /// Gives each of `es` a budget of `budget` sectors and activates it (no back-shift, no raising).
    fn activate_all(w: &mut Wf2q, es: &[EntityId], budget: u64) {
        for &e in es {
            w.set_budget(e, budget);
            w.activate(e, false, 1);
        }
    }

    fn q(i: u32) -> Owner {
        Owner::Queue(QueueId::from_parts(i, 0))
    }

    fn check_min_start(w: &Wf2q, t: u32) -> u64 {
        if t == NIL {
            return u64::MAX;
        }
        let n = w.nodes[t as usize];
        let m = n.start.min(check_min_start(w, n.left)).min(check_min_start(w, n.right));
        assert_eq!(m, n.min_start, "augmented min_start out of date");
        m
    }

    proptest! {
        // The augmented treap must return exactly what an O(n) scan returns, whatever the sequence of inserts,
        // removals and queries, and keep its min_start field consistent.
        #[test]
        fn eligible_min_finish_matches_linear_scan(ops in proptest::collection::vec((0u8..3, 0u64..1000, 0u64..1000, 0usize..64), 1..400)) {
            let mut w = Wf2q::new();
            let mut active: Vec<EntityId> = Vec::new();
            for (op, a, b, k) in ops {
                match op {
                    0 => {
                        let e = w.new_entity(SdId::ROOT, 10, 1, q(0));
                        w.ents[e].start = a;
                        w.ents[e].finish = a + b;
                        w.active_insert(e);
                        active.push(e);
                    }
                    1 if !active.is_empty() => {
                        let e = active.swap_remove(k % active.len());
                        w.active_remove(e);
                        w.ents[e].place = Place::Out;
                        w.free_entity(e);
                    }
                    _ => {
                        let root = w.sds[0].trees[1].root;
                        let got = w.first_eligible(root, a);
                        prop_assert_eq!((got != NIL).then(|| w.ents.key_at(got)).flatten(), reference(&w, &active, a));
                    }
                }
                check_min_start(&w, w.sds[0].trees[1].root);
            }
        }
    }

    // Virtual-time cost of a service: `(service << 22) / weight`, exact also for a service too large to be shifted
    // within 64 bits (above 2^41 sectors), where the computation must widen instead of dropping high bits. The
    // expected values are powers of two worked out by hand: 2^45 << 22 = 2^67, / 2^10 = 2^57, and so on.
    #[test]
    fn delta_is_exact_for_services_too_large_to_shift_in_64_bits() {
        assert_eq!(delta(1, 1), 1 << 22);
        assert_eq!(delta(64, 4), 1 << 26);
        assert_eq!(delta(1 << 41, 2), 1 << 62);
        assert_eq!(delta(3 << 41, 3), 1 << 63);
        assert_eq!(delta(1 << 45, 1 << 10), 1 << 57);
        assert_eq!(delta(1 << 50, 1 << 12), 1 << 60);
    }

    // Two equal-weight entities with equal budgets alternate: after one is served its full budget and requeued,
    // its finish time is larger, so the other (still eligible) is chosen next.
    #[test]
    fn equal_weights_alternate() {
        let mut w = Wf2q::new();
        let a = w.new_entity(SdId::ROOT, 10, 1, q(0));
        let b = w.new_entity(SdId::ROOT, 10, 1, q(1));
        for e in [a, b] {
            w.ents[e].budget = 100;
            w.activate(e, false, 1);
        }
        let mut order = Vec::new();
        for _ in 0..6 {
            let e = w.next_in_service(0).unwrap();
            order.push(e);
            w.served(e, 100);
            w.expire_path(e, true);
            w.check_invariants().unwrap();
        }
        assert_eq!(order, vec![a, b, a, b, a, b]);
    }

    // Weights 1:3 with equal budgets: over many slots the heavier entity is served three times as often,
    // since its finish time advances a third as fast.
    #[test]
    fn weights_share_slots_proportionally() {
        let mut w = Wf2q::new();
        let a = w.new_entity(SdId::ROOT, 10, 1, q(0));
        let b = w.new_entity(SdId::ROOT, 30, 1, q(1));
        for e in [a, b] {
            w.ents[e].budget = 64;
            w.activate(e, false, 1);
        }
        let mut n = [0u32; 2];
        for _ in 0..400 {
            let e = w.next_in_service(0).unwrap();
            n[if e == a { 0 } else { 1 }] += 1;
            w.served(e, 64);
            w.expire_path(e, true);
            w.check_invariants().unwrap();
        }
        assert!((n[1] as i64 - 3 * n[0] as i64).abs() <= 4, "{n:?}");
    }

    // Issue 21, mutant "eligibility ignored" (plain WFQ): one entity of weight 100 against ten of weight 10, all
    // with equal budgets. Its finish time advances a tenth as fast as theirs, so without the eligibility test
    // (`S <= V`) it would be chosen about ten times in a row. With it, each of its slots moves its start time by
    // B/100 while the system virtual time moves by B/200 per slot (the weight sum is 200), so it becomes
    // ineligible after at most two slots in a row; over many slots it still gets its share, 100/200 of them.
    #[test]
    fn a_heavy_entity_gets_at_most_two_slots_in_a_row() {
        let mut w = Wf2q::new();
        let heavy = w.new_entity(SdId::ROOT, 100, 1, q(0));
        let light: Vec<EntityId> = (1..=10).map(|i| w.new_entity(SdId::ROOT, 10, 1, q(i))).collect();
        for &e in std::iter::once(&heavy).chain(&light) {
            w.ents[e].budget = 64;
            w.activate(e, false, 1);
        }
        let (mut run, mut longest, mut heavy_slots) = (0u32, 0u32, 0u32);
        for _ in 0..400 {
            let e = w.next_in_service(0).unwrap();
            if e == heavy {
                run += 1;
                heavy_slots += 1;
                longest = longest.max(run);
            } else {
                run = 0;
            }
            w.served(e, 64);
            w.expire_path(e, true);
            w.check_invariants().unwrap();
        }
        assert!(longest <= 2, "heavy entity served {longest} slots in a row");
        assert!(
            heavy_slots.abs_diff(200) <= 4,
            "heavy entity got {heavy_slots} of 400 slots"
        );
    }

    // Strict class priority: an RT entity is always chosen over a BE one, and the IDLE class is served only when
    // nothing else is backlogged, or when it has waited 200 ms.
    #[test]
    fn classes_strict_priority_and_idle_timeout() {
        let mut w = Wf2q::new();
        let rt = w.new_entity(SdId::ROOT, 10, 0, q(0));
        let idle = w.new_entity(SdId::ROOT, 10, 2, q(1));
        for e in [rt, idle] {
            w.ents[e].budget = 8;
            w.activate(e, false, 1);
        }
        // At t=0 the idle class was "served" at 0, so RT wins.
        w.sds[0].idle_class_last_service = 0;
        let e = w.next_in_service(1).unwrap();
        assert_eq!(e, rt);
        w.served(e, 8);
        w.expire_path(e, true);
        // 150 ms later RT still wins.
        assert_eq!(w.next_in_service(150 * MS), Some(rt));
        w.served(rt, 8);
        w.expire_path(rt, true);
        // At exactly 200 ms the IDLE class is not yet due: the rule is "unserved for more than 200 ms".
        assert_eq!(w.next_in_service(200 * MS), Some(rt));
        w.served(rt, 8);
        w.expire_path(rt, true);
        // After 200 ms without idle-class service, IDLE is picked even though RT is backlogged.
        assert_eq!(w.next_in_service(201 * MS), Some(idle));
        w.served(idle, 8);
        w.expire_path(idle, true);
        // And the timer restarts: right after, RT again.
        assert_eq!(w.next_in_service(202 * MS), Some(rt));
    }

    // Hierarchy: two groups of equal weight under the root, one with one queue, the other with three. Each group
    // gets half of the service, whatever the number of queues inside.
    #[test]
    fn groups_share_equally_regardless_of_members() {
        let mut w = Wf2q::new();
        let g1 = w.new_group(SdId::ROOT, 100);
        let g2 = w.new_group(SdId::ROOT, 100);
        let mut leaves = vec![w.new_entity(g1, 40, 1, q(0))];
        for i in 1..4 {
            leaves.push(w.new_entity(g2, 40, 1, q(i)));
        }
        for &e in &leaves {
            w.ents[e].budget = 32;
            w.activate(e, false, 1);
        }
        let mut per_group = [0u64; 2];
        for _ in 0..800 {
            let e = w.next_in_service(0).unwrap();
            let g = if w.ents[e].parent == g1 { 0 } else { 1 };
            per_group[g] += 32;
            w.served(e, 32);
            w.expire_path(e, true);
            w.check_invariants().unwrap();
        }
        let ratio = per_group[0] as f64 / per_group[1] as f64;
        assert!((ratio - 1.0).abs() < 0.02, "{per_group:?}");
    }

    // Back-shifting: an entity that went idle with part of its slot unused and comes back keeps its old start,
    // so it is immediately eligible with a small finish time; without back-shift it restarts at vtime.
    #[test]
    fn backshift_keeps_old_timestamps() {
        let mut w = Wf2q::new();
        let a = w.new_entity(SdId::ROOT, 10, 1, q(0));
        let b = w.new_entity(SdId::ROOT, 10, 1, q(1));
        for e in [a, b] {
            w.ents[e].budget = 1000;
            w.activate(e, false, 1);
        }
        let e = w.next_in_service(0).unwrap();
        assert_eq!(e, a);
        w.served(a, 10);
        w.expire_path(a, false); // a empties after 10 sectors
        let f_old = w.ents[a].finish;
        // b is served for a while, pushing vtime past a's finish.
        let e = w.next_in_service(0).unwrap();
        assert_eq!(e, b);
        w.served(b, 500);
        w.expire_path(b, true);
        w.ents[a].budget = 990;
        w.activate(a, true, 1);
        let vtime = w.sds[0].trees[1].vtime;
        assert!(w.ents[a].start >= f_old, "start not before the old finish");
        assert!(w.ents[a].start <= vtime);
        assert_eq!(w.next_in_service(0), Some(a), "the back-shifted queue is served first");
    }

    // An entity that goes idle before its finish time keeps its weight in the weight sum (it may come back and
    // continue), so virtual time advances by service / (its weight + the others'); once it is freed (its queue
    // was released) its weight stops counting at once. Here `a` (weight 30) is served 10 of its 1000 sectors and
    // empties, then freed; `b` (weight 10) is served 100 sectors: virtual time must advance by 100 / 10, not by
    // 100 / 40 (the value it would have had with `a` still counted).
    #[test]
    fn a_freed_idle_entity_stops_slowing_virtual_time() {
        let mut w = Wf2q::new();
        let a = w.new_entity(SdId::ROOT, 30, 1, q(0));
        let b = w.new_entity(SdId::ROOT, 10, 1, q(1));
        activate_all(&mut w, &[a, b], 1000);
        let first = w.next_in_service(0).unwrap();
        assert_eq!(first, a, "the heavier entity has the smaller finish time");
        w.served(a, 10);
        w.expire_path(a, false);
        assert_eq!(
            w.entity(a).unwrap().place,
            Place::Idle,
            "its finish time is still ahead"
        );
        w.free_entity(a);
        let v0 = w.vtime_of(b);
        assert_eq!(w.next_in_service(0), Some(b));
        w.served(b, 100);
        assert_eq!(w.vtime_of(b) - v0, delta(100, 10));
        w.check_invariants().unwrap();
    }

    // Virtual time advances by service / (sum of the weights counted on the tree), and an entity that emptied
    // before its finish time stays counted (on the idle tree) only until virtual time reaches that finish time.
    // `a` (weight 30, start 0) is served 10 sectors and empties: F_a = delta(10, 30) and V = delta(10, 40). While
    // `b` (weight 10) alone is in service, 2 more sectors move V by delta(2, 40) (still below F_a: `a` stays
    // counted, and V is not pulled up to F_a). 8 more take V past F_a: with nothing backlogged on the tree, V is set
    // to the last idle finish time, F_a (the kernel's `bfq_forget_idle`, which can move V back a little), and `a`
    // is forgotten, so from then on `b`'s 100 sectors move V by delta(100, 10).
    #[test]
    fn an_idle_entity_counts_in_virtual_time_until_its_finish_time() {
        let mut w = Wf2q::new();
        let a = w.new_entity(SdId::ROOT, 30, 1, q(0));
        let b = w.new_entity(SdId::ROOT, 10, 1, q(1));
        activate_all(&mut w, &[a, b], 1000);
        assert_eq!(w.next_in_service(0), Some(a));
        w.served(a, 10);
        w.expire_path(a, false);
        let f_a = w.entity(a).unwrap().finish;
        assert_eq!(f_a, delta(10, 30));
        let v0 = w.vtime_of(b);
        assert_eq!(v0, delta(10, 40));
        assert_eq!(w.next_in_service(0), Some(b));
        w.served(b, 2);
        assert_eq!(w.vtime_of(b), v0 + delta(2, 40));
        assert_eq!(w.entity(a).unwrap().place, Place::Idle);
        w.served(b, 8);
        assert!(v0 + delta(10, 40) > f_a, "V has passed F_a");
        assert_eq!(w.vtime_of(b), f_a);
        assert_eq!(w.entity(a).unwrap().place, Place::Out, "forgotten");
        w.served(b, 100);
        assert_eq!(w.vtime_of(b), f_a + delta(100, 10));
        w.check_invariants().unwrap();
    }

    // A budget change of a backlogged entity moves its finish time (F = S + budget / weight) and so its place in
    // the order. `a` and `b` have equal weights, starts and budgets (100); `a` would be chosen first (ties go to
    // the lower slot). Its budget raised to 10 000, its finish time is far beyond `b`'s: `b` is chosen first.
    #[test]
    fn a_larger_budget_moves_a_backlogged_entity_back() {
        let mut w = Wf2q::new();
        let a = w.new_entity(SdId::ROOT, 10, 1, q(0));
        let b = w.new_entity(SdId::ROOT, 10, 1, q(1));
        activate_all(&mut w, &[a, b], 100);
        w.reposition(a, 10_000);
        w.check_invariants().unwrap();
        assert_eq!(w.next_in_service(0), Some(b));
    }

    // A group's budget is that of its next entity, and follows it: group 1 holds `x` (budget 10 000) and group 2
    // holds `z` (budget 1000), the groups of equal weight and start, so group 2 has the smaller finish time. Once
    // `x`'s budget is cut to 100, group 1's finish time must follow (delta(100) < delta(1000)) and `x` is chosen.
    #[test]
    fn a_group_finish_time_follows_its_next_entity_budget() {
        let mut w = Wf2q::new();
        let g1 = w.new_group(SdId::ROOT, 100);
        let g2 = w.new_group(SdId::ROOT, 100);
        let x = w.new_entity(g1, 40, 1, q(0));
        let z = w.new_entity(g2, 40, 1, q(1));
        w.set_budget(x, 10_000);
        w.activate(x, false, 1);
        w.set_budget(z, 1000);
        w.activate(z, false, 1);
        let mut probe = w.clone();
        assert_eq!(probe.next_in_service(0), Some(z), "group 2's smaller budget first");
        w.reposition(x, 100);
        w.check_invariants().unwrap();
        assert_eq!(w.next_in_service(0), Some(x));
    }

    // Whether the entity in service would be chosen again (which decides preemption) looks at the entity that
    // would really be chosen next: a backlogged IDLE-class entity counts only once that class has gone unserved
    // for more than 200 ms (strictly). Here `x` and `y` (BE, equal weights and budgets) are backlogged with an
    // IDLE-class entity; `x` is served its whole budget, so requeued it would finish after `y`: the answer is
    // "no" at 100 ms and still at exactly 200 ms, when the IDLE class is not yet due.
    #[test]
    fn the_idle_class_counts_for_the_next_choice_only_after_200_ms() {
        let mut w = Wf2q::new();
        let x = w.new_entity(SdId::ROOT, 10, 1, q(0));
        let y = w.new_entity(SdId::ROOT, 10, 1, q(1));
        let i = w.new_entity(SdId::ROOT, 10, 2, q(2));
        activate_all(&mut w, &[x, y, i], 100);
        assert_eq!(w.next_in_service(0), Some(x));
        w.served(x, 100);
        assert!(!w.in_service_still_next(100 * MS), "y finishes first");
        assert!(
            !w.in_service_still_next(CLASS_IDLE_TIMEOUT),
            "the IDLE class is not due at exactly 200 ms"
        );
    }

    // Once the IDLE class is due (a backlogged IDLE entity, unserved for more than 200 ms), the lookup serves it
    // before every other class, so a BE entity in service is no longer the next one, however early it would
    // finish: preemption must then be possible, as in the kernel, whose root `next_in_service` is then the IDLE
    // entity and differs from the one in service. `x` (BE, budget 100) has just been set in service against `y`
    // (BE, budget 10 000) and an IDLE entity: eligible and first to finish, it is still next at 100 ms and at
    // exactly 200 ms, and not at 200 ms + 1 ns, when the lookup itself picks the IDLE entity.
    #[test]
    fn a_due_idle_class_is_next_before_the_entity_in_service() {
        let mut w = Wf2q::new();
        let x = w.new_entity(SdId::ROOT, 10, 1, q(0));
        let y = w.new_entity(SdId::ROOT, 10, 1, q(1));
        let i = w.new_entity(SdId::ROOT, 10, 2, q(2));
        for (e, b) in [(x, 100), (y, 10_000), (i, 100)] {
            w.set_budget(e, b);
            w.activate(e, false, 1);
        }
        assert_eq!(w.next_in_service(0), Some(x));
        assert!(
            w.in_service_still_next(100 * MS),
            "BE before IDLE while the IDLE class is not due"
        );
        assert!(w.in_service_still_next(200 * MS), "not due at exactly 200 ms");
        assert!(!w.in_service_still_next(200 * MS + 1), "the IDLE class is due");
        let mut probe = w.clone();
        probe.expire_path(x, true);
        assert_eq!(probe.next_in_service(200 * MS + 1), Some(i), "the lookup agrees");
    }

    // Back-shift keeps a returning entity's old timestamps, but never lets it claim more than its budget's worth of
    // lag: if even its back-shifted finish time is behind virtual time, both stamps move up so that the finish
    // time is virtual time (divided by the raising coefficient, 1 here). `a` is served 10 sectors and empties;
    // `b` (equal weight) alone is served ten slots of 1000 sectors; `a` comes back back-shifted with a budget of
    // 1000. Without the limit its finish time would be nine budgets behind `b`'s and it would get about ten slots
    // in a row; with it, `a` and `b` alternate again after at most one extra slot of `a`.
    #[test]
    fn a_back_shifted_entity_claims_at_most_one_budget_of_lag() {
        let mut w = Wf2q::new();
        let a = w.new_entity(SdId::ROOT, 10, 1, q(0));
        let b = w.new_entity(SdId::ROOT, 10, 1, q(1));
        activate_all(&mut w, &[a, b], 1000);
        assert_eq!(w.next_in_service(0), Some(a));
        w.served(a, 10);
        w.expire_path(a, false);
        for _ in 0..10 {
            assert_eq!(w.next_in_service(0), Some(b));
            w.served(b, 1000);
            w.expire_path(b, true);
        }
        w.set_budget(a, 1000);
        w.activate(a, true, 1);
        assert_eq!(
            w.entity(a).unwrap().finish,
            w.vtime_of(a),
            "finish time moved up to virtual time"
        );
        let (mut run, mut longest) = (0u32, 0u32);
        for _ in 0..20 {
            let e = w.next_in_service(0).unwrap();
            if e == a {
                run += 1;
                longest = longest.max(run);
            } else {
                run = 0;
            }
            w.served(e, 1000);
            w.expire_path(e, true);
            w.check_invariants().unwrap();
        }
        assert!(longest <= 2, "the returning entity got {longest} slots in a row");
    }

    // "Would the entity in service be chosen again?" (it decides preemption): requeued with the service it has
    // received, it must be eligible (its new start S + service / w not after virtual time, or before every other
    // backlogged start) and finish before the best other entity; a higher class wins whatever the timestamps.
    // `x` (budget 100) and `y` (budget 10 000) have equal weights and start together. Right after `x` starts, it
    // is eligible and finishes far earlier: yes. After 50 sectors its start has moved past virtual time
    // (50/10 against 50/20) while `y`'s has not: no, `y` would be chosen, though `x` would finish first.
    #[test]
    fn the_entity_in_service_is_next_only_if_eligible_and_first_to_finish() {
        let mut w = Wf2q::new();
        let x = w.new_entity(SdId::ROOT, 10, 1, q(0));
        let y = w.new_entity(SdId::ROOT, 10, 1, q(1));
        w.set_budget(x, 100);
        w.activate(x, false, 1);
        w.set_budget(y, 10_000);
        w.activate(y, false, 1);
        assert_eq!(w.next_in_service(0), Some(x));
        assert!(w.in_service_still_next(0), "eligible and first to finish");
        w.served(x, 50);
        assert!(!w.in_service_still_next(0), "no longer eligible");
        let mut probe = w.clone();
        probe.expire_path(x, true);
        assert_eq!(probe.next_in_service(0), Some(y), "the lookup agrees");
    }

    // Across classes only the class counts: an RT entity in service stays next against a backlogged BE one even
    // after using all its budget, also after 200 ms (no IDLE entity is backlogged, so that class is not due); a
    // BE entity in service is never next while an RT one is backlogged.
    #[test]
    fn a_higher_class_is_next_whatever_the_timestamps() {
        let mut w = Wf2q::new();
        let rt = w.new_entity(SdId::ROOT, 10, 0, q(0));
        let be = w.new_entity(SdId::ROOT, 1000, 1, q(1));
        activate_all(&mut w, &[rt, be], 100);
        assert_eq!(w.next_in_service(0), Some(rt));
        w.served(rt, 100);
        assert!(w.in_service_still_next(0));
        assert!(
            w.in_service_still_next(200 * MS + 1),
            "no IDLE entity is backlogged: the 200 ms rule changes nothing"
        );
        w.expire_path(rt, false);
        assert_eq!(w.next_in_service(0), Some(be));
        w.set_budget(rt, 100);
        w.activate(rt, false, 1);
        assert!(!w.in_service_still_next(0));
    }

    // A group's budget is that of its next backlogged entity, also when one of its entities stops being
    // backlogged: group 1 holds `x` (budget 100) and `x2` (budget 10 000), group 2 holds `z` (budget 1000). Group 1
    // starts with `x`'s budget, the smallest finish time. Once `x` leaves (its queue emptied), group 1's budget is
    // `x2`'s, its finish time moves past group 2's, and `z` is chosen.
    #[test]
    fn a_group_takes_its_next_entity_budget_when_one_leaves() {
        let mut w = Wf2q::new();
        let g1 = w.new_group(SdId::ROOT, 100);
        let g2 = w.new_group(SdId::ROOT, 100);
        let x = w.new_entity(g1, 40, 1, q(0));
        let x2 = w.new_entity(g1, 40, 1, q(1));
        let z = w.new_entity(g2, 40, 1, q(2));
        for (e, b) in [(x, 100), (x2, 10_000), (z, 1000)] {
            w.set_budget(e, b);
            w.activate(e, false, 1);
        }
        let mut probe = w.clone();
        assert_eq!(probe.next_in_service(0), Some(x));
        w.deactivate(x);
        w.check_invariants().unwrap();
        assert_eq!(w.next_in_service(0), Some(z));
    }

    // Lazy weight change: set_weight changes nothing until the next requeue; then wsum follows.
    #[test]
    fn weight_changes_are_lazy() {
        let mut w = Wf2q::new();
        let a = w.new_entity(SdId::ROOT, 10, 1, q(0));
        w.ents[a].budget = 10;
        w.activate(a, false, 1);
        assert_eq!(w.sds[0].trees[1].wsum, 10);
        w.set_weight(a, 300);
        assert_eq!(w.sds[0].trees[1].wsum, 10);
        let e = w.next_in_service(0).unwrap();
        w.served(e, 10);
        w.expire_path(e, true);
        assert_eq!(w.sds[0].trees[1].wsum, 300);
        assert_eq!(w.ents[a].weight, 300);
    }

    // The invariant check notices a weight sum that drifted from its entities and a stale subtree minimum.
    #[test]
    fn check_invariants_catches_broken_sums_and_minimums() {
        let mut w = Wf2q::new();
        let a = w.new_entity(SdId::ROOT, 10, 1, q(0));
        let b = w.new_entity(SdId::ROOT, 20, 1, q(1));
        activate_all(&mut w, &[a, b], 100);
        assert_eq!(w.check_invariants(), Ok(()));
        w.sds[0].trees[1].wsum += 1;
        let err = w.check_invariants().unwrap_err();
        assert!(err.detail.contains("weight sum 31"), "{err}");
        w.sds[0].trees[1].wsum -= 1;
        let root = w.sds[0].trees[1].root;
        w.nodes[root as usize].min_start += 1;
        let err = w.check_invariants().unwrap_err();
        assert!(err.detail.contains("subtree min start"), "{err}");
    }
}
