//! The block allocator: where each file's bytes live on the device.

use bfq_workload::{FileSpec, Placement};

/// Page size of the host, in bytes.
pub const PAGE_BYTES: u64 = 4096;
/// Sectors per page.
pub const PAGE_SECTORS: u64 = PAGE_BYTES / 512;

/// A run of a file's pages stored contiguously on the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extent {
    /// First page of the file in this extent.
    pub page: u64,
    /// First sector on the device.
    pub sector: u64,
    /// Length in pages.
    pub pages: u64,
}

/// A file's placement on the device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileLayout {
    /// Size in bytes.
    pub size: u64,
    /// Extents in file order.
    pub extents: Vec<Extent>,
}

impl FileLayout {
    /// Size in pages (rounded up).
    pub fn pages(&self) -> u64 {
        self.size.div_ceil(PAGE_BYTES)
    }

    /// Device ranges `(sector, sectors)` holding pages `[first, first + count)`, merged where contiguous.
    pub fn map(&self, first: u64, count: u64, out: &mut Vec<(u64, u64)>) {
        let end = first + count;
        // Extents are sorted by page; find the first one that ends after `first`.
        let start = self.extents.partition_point(|e| e.page + e.pages <= first);
        for e in &self.extents[start..] {
            if e.page >= end {
                break;
            }
            let a = first.max(e.page);
            let b = end.min(e.page + e.pages);
            let sector = e.sector + (a - e.page) * PAGE_SECTORS;
            let sectors = (b - a) * PAGE_SECTORS;
            match out.last_mut() {
                Some(last) if last.0 + last.1 == sector => last.1 += sectors,
                _ => out.push((sector, sectors)),
            }
        }
    }
}

/// A simple allocator over the device's capacity: contiguous files are placed at the next free position or at a
/// requested fraction of the device; scattered files are split into extents spread over a region.
#[derive(Debug, Clone)]
pub struct Allocator {
    capacity: u64,
    /// Allocated ranges `(start, end)` in sectors, sorted, non-overlapping.
    used: Vec<(u64, u64)>,
    rng: u64,
}

/// The allocator could not place a file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "no room for file '{name}' ({size} bytes) on a device of {capacity} sectors: use smaller files or a larger device"
)]
pub struct AllocError {
    /// File name.
    pub name: String,
    /// Requested size in bytes.
    pub size: u64,
    /// Device capacity in sectors.
    pub capacity: u64,
}

impl Allocator {
    /// An allocator for a device of `capacity` sectors; `seed` drives the scattering of small files.
    pub fn new(capacity: u64, seed: u64) -> Self {
        Allocator {
            capacity,
            used: Vec::new(),
            rng: seed | 1,
        }
    }

    fn rand(&mut self) -> u64 {
        // xorshift64*: deterministic and cheap; placement needs spread, not statistical quality.
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        self.rng.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// First free range of `len` sectors at or after `from`, wrapping to the start if needed.
    fn find_free(&self, from: u64, len: u64) -> Option<u64> {
        let try_from = |from: u64| -> Option<u64> {
            let mut pos = from;
            for &(s, e) in &self.used {
                if e <= pos {
                    continue;
                }
                if s >= pos + len {
                    break;
                }
                pos = e;
            }
            (pos + len <= self.capacity).then_some(pos)
        };
        try_from(from).or_else(|| try_from(0))
    }

    fn mark(&mut self, start: u64, len: u64) {
        let i = self.used.partition_point(|&(s, _)| s < start);
        self.used.insert(i, (start, start + len));
    }

    /// Places `spec` and returns its layout.
    pub fn place(&mut self, spec: &FileSpec) -> Result<FileLayout, AllocError> {
        let pages = spec.size.div_ceil(PAGE_BYTES).max(1);
        let capacity = self.capacity;
        let err = || AllocError {
            name: spec.name.clone(),
            size: spec.size,
            capacity,
        };
        let align = |s: u64| s / PAGE_SECTORS * PAGE_SECTORS;
        let frac = |f: f64| align((f.clamp(0.0, 1.0) * capacity as f64) as u64);
        let mut extents = Vec::new();
        match spec.placement {
            Placement::Contiguous | Placement::At(_) => {
                let from = match spec.placement {
                    Placement::At(f) => frac(f).min(self.capacity.saturating_sub(pages * PAGE_SECTORS)),
                    _ => self.used.last().map_or(0, |u| u.1),
                };
                let len = pages * PAGE_SECTORS;
                let s = self.find_free(align(from), len).ok_or_else(err)?;
                self.mark(s, len);
                extents.push(Extent {
                    page: 0,
                    sector: s,
                    pages,
                });
            }
            Placement::Scattered { extent, from, to } => {
                let ext_pages = extent.div_ceil(PAGE_BYTES).max(1);
                let (lo, hi) = (
                    frac(from.min(to)),
                    frac(from.max(to)).max(frac(from.min(to)) + PAGE_SECTORS),
                );
                let mut page = 0;
                while page < pages {
                    let n = ext_pages.min(pages - page);
                    let len = n * PAGE_SECTORS;
                    let span = (hi - lo).max(1);
                    let at = align(lo + self.rand() % span);
                    let s = self.find_free(at, len).ok_or_else(err)?;
                    self.mark(s, len);
                    extents.push(Extent {
                        page,
                        sector: s,
                        pages: n,
                    });
                    page += n;
                }
            }
        }
        Ok(FileLayout {
            size: spec.size,
            extents,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(size: u64, placement: Placement) -> FileSpec {
        FileSpec {
            name: "f".into(),
            size,
            placement,
            prewritten: true,
        }
    }

    #[test]
    fn contiguous_files_follow_each_other() {
        let mut a = Allocator::new(1 << 30, 1);
        let f1 = a.place(&spec(1 << 20, Placement::Contiguous)).unwrap();
        let f2 = a.place(&spec(1 << 20, Placement::Contiguous)).unwrap();
        assert_eq!(f1.extents.len(), 1);
        assert_eq!(f2.extents[0].sector, f1.extents[0].sector + (1 << 20) / 512);
    }

    #[test]
    fn placed_at_fraction_and_never_overlapping() {
        let cap = 1u64 << 30;
        let mut a = Allocator::new(cap, 1);
        let inner = a.place(&spec(1 << 24, Placement::At(0.9))).unwrap();
        assert!(inner.extents[0].sector >= cap * 89 / 100);
        let again = a.place(&spec(1 << 24, Placement::At(0.9))).unwrap();
        let (s1, e1) = (
            inner.extents[0].sector,
            inner.extents[0].sector + inner.extents[0].pages * 8,
        );
        let s2 = again.extents[0].sector;
        assert!(s2 >= e1 || s2 + again.extents[0].pages * 8 <= s1);
    }

    #[test]
    fn scattered_files_have_many_extents_in_region() {
        let cap = 1u64 << 30;
        let mut a = Allocator::new(cap, 7);
        let f = a
            .place(&spec(
                4 << 20,
                Placement::Scattered {
                    extent: 64 << 10,
                    from: 0.2,
                    to: 0.4,
                },
            ))
            .unwrap();
        assert_eq!(f.extents.len(), 64);
        for e in &f.extents {
            assert!(e.sector >= cap / 5 && e.sector < cap * 2 / 5 + 1024, "{e:?}");
        }
        let mut out = Vec::new();
        f.map(0, f.pages(), &mut out);
        assert_eq!(out.iter().map(|r| r.1).sum::<u64>(), (4 << 20) / 512);
    }

    #[test]
    fn too_big_is_an_error() {
        let mut a = Allocator::new(1000, 1);
        assert!(a.place(&spec(1 << 20, Placement::Contiguous)).is_err());
    }
}
