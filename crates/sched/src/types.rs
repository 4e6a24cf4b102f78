//! Time, flow and request types shared by every policy.

/// A point in time or a duration, in nanoseconds. Virtual in the simulator, monotonic in the engine.
pub type Time = u64;

/// One millisecond in [`Time`] units (nanoseconds).
pub const MS: Time = 1_000_000;
/// One microsecond in [`Time`] units (nanoseconds).
pub const US: Time = 1_000;
/// One second in [`Time`] units (nanoseconds).
pub const SEC: Time = 1_000_000_000;

/// Size of a block-layer sector, in bytes.
pub const SECTOR_BYTES: u64 = 512;

/// Identifies a flow (the kernel's per-process I/O context).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct FlowId(pub u32);

/// Identifies a request, unique over the lifetime of a driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct RequestId(pub u64);

/// Identifies a group of flows (a cgroup-like hierarchy node). Group 0 is the root.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct GroupId(pub u32);

/// Data direction of a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Direction {
    /// Data moves from the device to memory.
    Read = 0,
    /// Data moves from memory to the device.
    Write = 1,
}

impl Direction {
    /// Index usable for per-direction arrays (read 0, write 1).
    pub fn index(self) -> usize {
        self as usize
    }
    /// The other direction.
    pub fn other(self) -> Direction {
        match self {
            Direction::Read => Direction::Write,
            Direction::Write => Direction::Read,
        }
    }
}

/// I/O priority class, as set with `ionice -c`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum IoClass {
    /// Real time: served before everything else.
    Rt = 0,
    /// Best effort: the default.
    #[default]
    Be = 1,
    /// Idle: served only when nothing else wants the device.
    Idle = 2,
}

impl IoClass {
    /// Index usable for per-class arrays (RT 0, BE 1, IDLE 2).
    pub fn index(self) -> usize {
        self as usize
    }
    /// All classes from highest to lowest priority.
    pub const ALL: [IoClass; 3] = [IoClass::Rt, IoClass::Be, IoClass::Idle];
}

/// Number of priority levels within the RT and BE classes (0 highest .. 7 lowest).
pub const IOPRIO_LEVELS: u8 = 8;
/// Priority used when a flow does not set one (what nice 0 maps to).
pub const DEFAULT_IOPRIO: u8 = 4;

/// What a policy learns about a flow when it starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowInfo {
    /// The flow's identity.
    pub id: FlowId,
    /// I/O priority class.
    pub class: IoClass,
    /// Priority within the class, 0 (highest) ..= 7 (lowest).
    pub prio: u8,
    /// Explicit proportional-share weight (1..=1000); `None` derives it from `prio`.
    pub weight: Option<u32>,
    /// The group (cgroup-like) the flow belongs to.
    pub group: GroupId,
}

impl FlowInfo {
    /// A best-effort flow at the default priority in the root group.
    pub fn new(id: FlowId) -> Self {
        FlowInfo {
            id,
            class: IoClass::Be,
            prio: DEFAULT_IOPRIO,
            weight: None,
            group: GroupId(0),
        }
    }
    /// Sets the I/O class and priority (clamped to 0..=7).
    pub fn with_class(mut self, class: IoClass, prio: u8) -> Self {
        self.class = class;
        self.prio = prio.min(IOPRIO_LEVELS - 1);
        self
    }
    /// Sets an explicit weight (clamped to 1..=1000).
    pub fn with_weight(mut self, weight: u32) -> Self {
        self.weight = Some(weight.clamp(1, 1000));
        self
    }
    /// Sets the group.
    pub fn with_group(mut self, group: GroupId) -> Self {
        self.group = group;
        self
    }
}

/// A block-layer request.
///
/// A policy may merge requests that are contiguous on the device; the absorbed requests' ids are kept in
/// [`Request::merged`] so that whoever submitted them learns of their completion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// Unique identity.
    pub id: RequestId,
    /// The flow that issued it.
    pub flow: FlowId,
    /// Data direction.
    pub dir: Direction,
    /// Synchronous (a process waits for it): reads, and writes flagged sync (fsync, O_DIRECT).
    pub sync: bool,
    /// Metadata request (the kernel's REQ_META / REQ_PRIO), favoured by some policies.
    pub meta: bool,
    /// First sector (512 B units).
    pub sector: u64,
    /// Length in sectors (512 B units); never zero.
    pub sectors: u32,
    /// Ids of requests merged into this one, in no particular order.
    pub merged: Vec<RequestId>,
}

impl Request {
    /// A request with no merged parts.
    pub fn new(id: RequestId, flow: FlowId, dir: Direction, sync: bool, sector: u64, sectors: u32) -> Self {
        Request {
            id,
            flow,
            dir,
            sync,
            meta: false,
            sector,
            sectors: sectors.max(1),
            merged: Vec::new(),
        }
    }
    /// The first sector after the request.
    pub fn end(&self) -> u64 {
        self.sector + u64::from(self.sectors)
    }
    /// Number of originally inserted requests this one carries (itself plus merged ones).
    pub fn parts(&self) -> usize {
        1 + self.merged.len()
    }
    /// Length in bytes.
    pub fn bytes(&self) -> u64 {
        u64::from(self.sectors) * SECTOR_BYTES
    }
}

/// What a policy answers when asked for the next request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Send this request to the device now.
    Dispatch(Request),
    /// Nothing now: the policy is idling or plugged; ask again at this time (or at the next event, if earlier).
    WaitUntil(Time),
    /// Nothing to dispatch until the next insert or completion.
    Nothing,
}
