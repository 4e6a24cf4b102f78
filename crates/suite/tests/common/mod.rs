//! Helpers shared by the suite's claim tests (issue 21: a claim test that a wrong policy also passes proves
//! nothing about the policy it names).

use std::fmt::Debug;

/// Checks a claim both ways: it must hold for `policy` and fail for every policy of `wrong` (another scheduler,
/// or the same one with the mechanism the claim rests on switched off). `claim` returns `Err` with the figures
/// when the claim does not hold.
pub fn holds_and_discriminates<P: Debug>(policy: P, wrong: &[P], claim: impl Fn(&P) -> Result<(), String>) {
    if let Err(e) = claim(&policy) {
        panic!("{policy:?}: {e}");
    }
    for w in wrong {
        assert!(
            claim(w).is_err(),
            "the claim also holds with {w:?}, so it does not show what {policy:?} does"
        );
    }
}
