//! A generational slab: values stored in reusable slots, addressed by typed keys that carry the slot's generation.
//!
//! Every arena of the project (BFQ's entities and request slots, the simulator's block requests and operations, the
//! RAID1 model's half-request slots, the engine's in-flight operations) is one of these. A key names a slot and the
//! generation it was issued in; once the value is removed, the slot's generation moves on, so a stale key finds
//! nothing instead of someone else's value.
//!
//! Freed slots are reused last-freed-first (a stack), so the order in which keys are handed out is a pure function
//! of the order of inserts and removes: simulations that iterate or compare keys stay deterministic.
//!
//! Key types are declared with [`slab_key!`], so that the index spaces of different arenas cannot be mixed up.

use std::fmt;

/// A typed key into a [`Slab`]: a slot index and the generation the key was issued in.
pub trait SlabKey: Copy + Eq + fmt::Debug {
    /// Builds a key from a slot index and a generation.
    fn from_parts(index: u32, generation: u32) -> Self;
    /// The slot index.
    fn index(self) -> u32;
    /// The generation the key was issued in.
    fn generation(self) -> u32;
}

/// Declares a key type for a [`Slab`]: a `Copy` newtype over a slot index and a generation.
///
/// ```
/// bfq_sched::slab_key!(
///     /// A thing in the example arena.
///     pub struct ThingId
/// );
/// let mut slab = bfq_sched::slab::Slab::<ThingId, &str>::new();
/// let k = slab.insert("a");
/// assert_eq!(slab.get(k), Some(&"a"));
/// ```
#[macro_export]
macro_rules! slab_key {
    ($(#[$meta:meta])* $vis:vis struct $name:ident) => {
        $(#[$meta])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        $vis struct $name {
            index: u32,
            generation: u32,
        }
        impl $crate::slab::SlabKey for $name {
            fn from_parts(index: u32, generation: u32) -> Self {
                $name { index, generation }
            }
            fn index(self) -> u32 {
                self.index
            }
            fn generation(self) -> u32 {
                self.generation
            }
        }
        impl ::std::fmt::Debug for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                write!(f, "{}({}g{})", stringify!($name), self.index, self.generation)
            }
        }
    };
}

#[derive(Debug, Clone)]
struct Entry<T> {
    generation: u32,
    value: Option<T>,
}

/// Values of type `T` in reusable slots, addressed by keys of type `K`.
#[derive(Clone)]
pub struct Slab<K, T> {
    entries: Vec<Entry<T>>,
    free: Vec<u32>,
    len: usize,
    _key: std::marker::PhantomData<fn() -> K>,
}

impl<K: SlabKey, T: fmt::Debug> fmt::Debug for Slab<K, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl<K: SlabKey, T> Default for Slab<K, T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: SlabKey, T> Slab<K, T> {
    /// An empty slab.
    pub fn new() -> Self {
        Slab {
            entries: Vec::new(),
            free: Vec::new(),
            len: 0,
            _key: std::marker::PhantomData,
        }
    }

    /// An empty slab with room for `n` values before it reallocates.
    pub fn with_capacity(n: usize) -> Self {
        Slab {
            entries: Vec::with_capacity(n),
            free: Vec::with_capacity(n),
            len: 0,
            _key: std::marker::PhantomData,
        }
    }

    /// Stores `value` and returns its key: the most recently freed slot, or a new one.
    pub fn insert(&mut self, value: T) -> K {
        self.len += 1;
        if let Some(i) = self.free.pop() {
            let e = &mut self.entries[i as usize];
            debug_assert!(e.value.is_none(), "slab: a free slot holds a value");
            e.value = Some(value);
            return K::from_parts(i, e.generation);
        }
        let i = u32::try_from(self.entries.len()).expect("slab: more than u32::MAX slots");
        self.entries.push(Entry {
            generation: 0,
            value: Some(value),
        });
        K::from_parts(i, 0)
    }

    /// Removes and returns the value of `key`; `None` if the key is stale or was never issued.
    pub fn remove(&mut self, key: K) -> Option<T> {
        let e = self.entries.get_mut(key.index() as usize)?;
        if e.generation != key.generation() {
            return None;
        }
        let v = e.value.take()?;
        e.generation = e.generation.wrapping_add(1);
        self.free.push(key.index());
        self.len -= 1;
        Some(v)
    }

    /// The value of `key`, if it is still live.
    pub fn get(&self, key: K) -> Option<&T> {
        let e = self.entries.get(key.index() as usize)?;
        if e.generation != key.generation() {
            return None;
        }
        e.value.as_ref()
    }

    /// The value of `key`, mutably, if it is still live.
    pub fn get_mut(&mut self, key: K) -> Option<&mut T> {
        let e = self.entries.get_mut(key.index() as usize)?;
        if e.generation != key.generation() {
            return None;
        }
        e.value.as_mut()
    }

    /// True if `key` names a live value.
    pub fn contains(&self, key: K) -> bool {
        self.get(key).is_some()
    }

    /// The key of the live value in slot `index`, if any (for arenas whose other structures store bare indices).
    pub fn key_at(&self, index: u32) -> Option<K> {
        let e = self.entries.get(index as usize)?;
        e.value.as_ref().map(|_| K::from_parts(index, e.generation))
    }

    /// Number of live values.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True if no value is live.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Number of slots ever allocated (live or free): one past the largest index handed out.
    pub fn slots(&self) -> usize {
        self.entries.len()
    }

    /// Live values with their keys, in slot order.
    pub fn iter(&self) -> impl Iterator<Item = (K, &T)> + '_ {
        self.entries
            .iter()
            .enumerate()
            .filter_map(|(i, e)| e.value.as_ref().map(|v| (K::from_parts(i as u32, e.generation), v)))
    }

    /// Live values with their keys, mutably, in slot order.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (K, &mut T)> + '_ {
        self.entries
            .iter_mut()
            .enumerate()
            .filter_map(|(i, e)| e.value.as_mut().map(|v| (K::from_parts(i as u32, e.generation), v)))
    }

    /// Checks the slab's own bookkeeping: the live count matches the occupied slots, and every free slot is empty
    /// and listed once.
    pub fn check_invariants(&self) -> Result<(), String> {
        let occupied = self.entries.iter().filter(|e| e.value.is_some()).count();
        if occupied != self.len {
            return Err(format!("slab: {occupied} occupied slots but len {}", self.len));
        }
        if occupied + self.free.len() != self.entries.len() {
            return Err(format!(
                "slab: {occupied} occupied + {} free != {} slots",
                self.free.len(),
                self.entries.len()
            ));
        }
        for &i in &self.free {
            match self.entries.get(i as usize) {
                Some(e) if e.value.is_none() => {}
                _ => return Err(format!("slab: free list names slot {i}, which is not free")),
            }
        }
        Ok(())
    }
}

impl<K: SlabKey, T> std::ops::Index<K> for Slab<K, T> {
    type Output = T;
    /// Panics on a stale key: use [`Slab::get`] where the key may be stale.
    fn index(&self, key: K) -> &T {
        self.get(key)
            .unwrap_or_else(|| panic!("slab: stale or unknown key {key:?}"))
    }
}

impl<K: SlabKey, T> std::ops::IndexMut<K> for Slab<K, T> {
    /// Panics on a stale key: use [`Slab::get_mut`] where the key may be stale.
    fn index_mut(&mut self, key: K) -> &mut T {
        match self.get_mut(key) {
            Some(v) => v,
            None => panic!("slab: stale or unknown key {key:?}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    crate::slab_key!(
        /// Test key.
        struct K
    );

    #[test]
    fn stale_keys_find_nothing_after_reuse() {
        let mut s = Slab::<K, u32>::new();
        let a = s.insert(1);
        assert_eq!(s.remove(a), Some(1));
        let b = s.insert(2);
        // Same slot, next generation: the old key must not reach the new value.
        assert_eq!(a.index(), b.index());
        assert_ne!(a, b);
        assert_eq!(s.get(a), None);
        assert_eq!(s.remove(a), None);
        assert_eq!(s[b], 2);
        s.check_invariants().unwrap();
    }

    #[test]
    fn slots_are_reused_last_freed_first() {
        let mut s = Slab::<K, u32>::new();
        let keys: Vec<K> = (0..4).map(|v| s.insert(v)).collect();
        s.remove(keys[1]);
        s.remove(keys[3]);
        // A stack: slot 3 was freed last, so it comes back first.
        assert_eq!(s.insert(10).index(), 3);
        assert_eq!(s.insert(11).index(), 1);
        assert_eq!(s.insert(12).index(), 4);
        assert_eq!(s.len(), 5);
        assert_eq!(s.iter().map(|(_, v)| *v).collect::<Vec<_>>(), vec![0, 11, 2, 10, 12]);
        s.check_invariants().unwrap();
    }

    #[test]
    fn double_remove_does_not_corrupt_the_free_list() {
        let mut s = Slab::<K, u32>::new();
        let a = s.insert(1);
        s.remove(a);
        s.remove(a);
        s.check_invariants().unwrap();
        let b = s.insert(2);
        let c = s.insert(3);
        assert_ne!(b.index(), c.index());
    }

    #[test]
    fn key_at_reports_live_slots_only() {
        let mut s = Slab::<K, u32>::new();
        let a = s.insert(1);
        assert_eq!(s.key_at(a.index()), Some(a));
        s.remove(a);
        assert_eq!(s.key_at(a.index()), None);
        assert_eq!(s.key_at(99), None);
    }
}
