//! Counters that refuse to go below zero.
//!
//! A counter of things in flight, queued or busy is decremented exactly once per thing. A decrement that finds it at
//! zero means a completion or removal was reported twice, or an increment was missed: that is a bug in the caller
//! or in the policy, and it must stop the run where it happened instead of drifting (a saturating decrement would
//! hide it and skew every later decision that reads the counter).

/// Decrements `counter` by one; panics, naming the counter, if it is already zero.
#[inline]
#[track_caller]
pub fn dec<T>(counter: &mut T, what: &'static str)
where
    T: Copy + PartialEq + std::ops::SubAssign + From<u8> + std::fmt::Debug,
{
    assert!(*counter != T::from(0), "counter underflow: {what} decremented at zero");
    *counter -= T::from(1);
}

#[cfg(test)]
mod tests {
    use super::dec;

    #[test]
    fn decrements_by_one() {
        let mut n: u32 = 2;
        dec(&mut n, "n");
        assert_eq!(n, 1);
        let mut m: usize = 1;
        dec(&mut m, "m");
        assert_eq!(m, 0);
    }

    #[test]
    #[should_panic(expected = "counter underflow: in_flight decremented at zero")]
    fn a_double_decrement_fails() {
        let mut n: u64 = 1;
        dec(&mut n, "in_flight");
        dec(&mut n, "in_flight");
    }
}
