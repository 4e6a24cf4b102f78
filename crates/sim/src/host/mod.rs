//! The host model: file layout, page cache, readahead and writeback, as Linux does them.

pub mod layout;
pub mod page_cache;
pub mod readahead;
pub mod throttle;
pub mod wbt;

pub use layout::{Allocator, Extent, FileLayout, PAGE_BYTES, PAGE_SECTORS};
pub use page_cache::{PageCache, PageState};
pub use readahead::RaState;
pub use throttle::{DirtyThrottle, InodeOrder, WriterWriteback};
pub use wbt::{Wbt, WbtConfig};
