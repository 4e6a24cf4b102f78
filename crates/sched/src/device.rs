//! What a policy is told about the device at construction.

/// Static properties of the device a policy schedules for. What the kernel learns by observation (peak rate,
/// whether command queueing really works) policies learn by observation too; this is only what sysfs would say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceInfo {
    /// Short name for messages (a preset name or a device path).
    pub name: String,
    /// True for a rotational disk (sysfs `queue/rotational`).
    pub rotational: bool,
    /// Hardware tags: how many requests the device accepts at once (NCQ depth; 1 for no queueing).
    pub queue_depth: u32,
    /// Scheduler tags (`queue/nr_requests`): how many requests may be allocated at once.
    pub nr_requests: u32,
    /// Largest request the block layer builds, in sectors (`queue/max_sectors_kb` * 2).
    pub max_sectors: u32,
    /// Capacity in sectors.
    pub capacity_sectors: u64,
}

impl DeviceInfo {
    /// A rotational disk with NCQ depth 31, 64 scheduler tags, 512 KiB requests and 1 TB.
    pub fn hdd() -> Self {
        DeviceInfo {
            name: "hdd".into(),
            rotational: true,
            queue_depth: 31,
            nr_requests: 64,
            max_sectors: 1024,
            capacity_sectors: 2_000_000_000,
        }
    }
    /// A non-rotational device with NCQ depth 32, 64 scheduler tags, 512 KiB requests and 256 GB.
    pub fn ssd() -> Self {
        DeviceInfo {
            name: "ssd".into(),
            rotational: false,
            queue_depth: 32,
            nr_requests: 64,
            max_sectors: 1024,
            capacity_sectors: 500_000_000,
        }
    }
}
