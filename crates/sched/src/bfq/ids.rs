//! The four index spaces of BFQ, as distinct key types so that they cannot be mixed up: scheduling entities and
//! group scheduling data (the B-WF2Q+ engine's), queues and request slots (the policy's). "None" is `Option<Id>`.

use crate::slab::SlabKey;

crate::slab_key!(
    /// A scheduling entity (a queue's or a group's) in the [`Wf2q`](super::wf2q::Wf2q) entity slab.
    pub struct EntityId
);

crate::slab_key!(
    /// A group's scheduling data (per-class service trees) in the [`Wf2q`](super::wf2q::Wf2q); never freed, so
    /// its generation is always 0. [`SdId::ROOT`] is the root group's.
    pub struct SdId
);

crate::slab_key!(
    /// A BFQ queue in the policy's queue slab.
    pub struct QueueId
);

crate::slab_key!(
    /// A queued request's slot in the request [`Store`](super::fifo::Store).
    pub struct SlotId
);

impl SdId {
    /// The root group's scheduling data.
    pub const ROOT: SdId = SdId {
        index: 0,
        generation: 0,
    };

    /// The scheduling data at position `index` of the (never shrinking) sched-data vector.
    pub fn at(index: usize) -> SdId {
        SdId::from_parts(u32::try_from(index).expect("more than u32::MAX groups"), 0)
    }

    /// Position in the sched-data vector.
    pub fn slot(self) -> usize {
        self.index() as usize
    }
}

impl QueueId {
    /// The queue at position `index` of the policy's queue vector (a freed position is reused in place, so a
    /// queue's generation is always 0; a freed queue's position holds `None`).
    pub fn at(index: usize) -> QueueId {
        QueueId::from_parts(u32::try_from(index).expect("more than u32::MAX queues"), 0)
    }

    /// Position in the queue vector.
    pub fn slot(self) -> usize {
        self.index() as usize
    }
}
