//! Command-queueing (NCQ) detection by observation: the kernel's `hw_tag` (`cfq_update_hw_tag`;
//! docs/SCHEDULERS.md, CFQ, Cooperating queues and NCQ).

/// A device is taken to queue commands when at least this many requests were seen on it at once; samples only
/// count while at least this many are queued or on the device (fewer cannot reveal a deeper queue).
pub const HW_QUEUE_MIN: u32 = 5;

/// Samples under load needed before deciding.
pub const HW_TAG_SAMPLES: u32 = 50;

/// What is known about the device's command queueing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HwTag {
    /// Not decided yet; treated as queueing (the kernel starts at -1, which tests as true).
    Unknown,
    /// The device keeps several requests in flight.
    Yes,
    /// It does not.
    No,
}

/// Estimates `hw_tag` from the depth reached on the device.
#[derive(Debug, Clone, Copy)]
pub struct NcqDetector {
    /// Current verdict.
    pub state: HwTag,
    /// Most requests seen on the device at once.
    pub est_depth: u32,
    samples: u32,
}

impl Default for NcqDetector {
    fn default() -> Self {
        NcqDetector {
            state: HwTag::Unknown,
            est_depth: 0,
            samples: 0,
        }
    }
}

impl NcqDetector {
    /// True unless the device was found not to queue.
    pub fn on(&self) -> bool {
        self.state != HwTag::No
    }

    /// One observation at a completion: `in_driver` requests on the device, `queued` in the scheduler, and
    /// `shallow_active` when the active queue idles and has too few requests to fill the device (such a sample
    /// says nothing about the device).
    pub fn observe(&mut self, in_driver: u32, queued: u32, shallow_active: bool) {
        self.est_depth = self.est_depth.max(in_driver);
        if self.state == HwTag::Yes {
            return;
        }
        if queued <= HW_QUEUE_MIN && in_driver <= HW_QUEUE_MIN {
            return;
        }
        if shallow_active {
            return;
        }
        self.samples += 1;
        if self.samples <= HW_TAG_SAMPLES {
            return;
        }
        self.state = if self.est_depth >= HW_QUEUE_MIN {
            HwTag::Yes
        } else {
            HwTag::No
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // A device that never holds more than one request is found not to queue after 50 loaded samples; one holding
    // 8 is found to queue. Unloaded samples do not count.
    #[test]
    fn detects_depth() {
        let mut d = NcqDetector::default();
        assert!(d.on());
        for _ in 0..100 {
            d.observe(1, 2, false);
        }
        assert_eq!(d.state, HwTag::Unknown);
        for _ in 0..51 {
            d.observe(1, 10, false);
        }
        assert_eq!(d.state, HwTag::No);
        let mut d = NcqDetector::default();
        for _ in 0..51 {
            d.observe(8, 10, false);
        }
        assert_eq!(d.state, HwTag::Yes);
    }

    // `cfq_update_hw_tag`: a completion is a sample only when more than 5 requests (CFQ_HW_QUEUE_MIN) are queued
    // or on the device; the verdict comes at the 51st sample (`hw_tag_samples++ < 50` returns for the first 50):
    // queueing if the device was ever seen holding 5 or more at once. Once found to queue it stays so.
    #[test]
    fn more_than_five_requests_make_a_sample_and_the_51st_decides_on_a_depth_of_five() {
        // 5 queued and 5 on the device is not a load: nothing is decided however often it is seen.
        let mut d = NcqDetector::default();
        for _ in 0..200 {
            d.observe(5, 5, false);
        }
        assert_eq!((d.state, d.est_depth), (HwTag::Unknown, 5));
        // Six queued with one on the device is a load; the depth of 5 seen before counts.
        for _ in 0..50 {
            d.observe(1, 6, false);
        }
        assert_eq!(d.state, HwTag::Unknown, "50 samples decide nothing");
        d.observe(1, 6, false);
        assert_eq!(d.state, HwTag::Yes);
        assert!(d.on());
        // Found queueing, it stays so whatever follows.
        for _ in 0..100 {
            d.observe(1, 10, false);
        }
        assert_eq!(d.state, HwTag::Yes);

        // Six on the device with nothing queued is a load too; a depth of 4 is not queueing.
        let mut d = NcqDetector::default();
        for _ in 0..51 {
            d.observe(6, 0, false);
        }
        assert_eq!(d.state, HwTag::Yes);
        let mut d = NcqDetector::default();
        for _ in 0..51 {
            d.observe(4, 6, false);
        }
        assert_eq!(d.state, HwTag::No);
        assert!(!d.on(), "a device found not to queue is treated as such");
    }
}
