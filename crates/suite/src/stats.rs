//! Statistics over repetitions, as the S suite reports them: min, max, average, standard deviation and a 99%
//! confidence interval for the mean.
//!
//! The interval is the two-sided Student-t interval `avg ± t(0.995, n-1) · s / √n`, with `s` the sample standard
//! deviation (n − 1 in the denominator). S's own script prints a different half-width because of a quirk
//! (see docs/BENCHMARKS.md); [`Summary::s_quirk_half_width`] reproduces it for comparison only.

use serde::Serialize;

/// Name of the confidence-interval formula, printed beside every interval.
pub const CI_FORMULA: &str = "99% CI: avg ± t(0.995, n-1)·s/√n, s = sample std (n-1)";

/// Two-sided 99% Student-t quantiles t(0.995, df) for df = 1..=30.
const T_995: [f64; 30] = [
    63.657, 9.925, 5.841, 4.604, 4.032, 3.707, 3.499, 3.355, 3.250, 3.169, 3.106, 3.055, 3.012, 2.977, 2.947, 2.921,
    2.898, 2.878, 2.861, 2.845, 2.831, 2.819, 2.807, 2.797, 2.787, 2.779, 2.771, 2.763, 2.756, 2.750,
];

/// t(0.995, df) for larger df, by table: 40, 60, 120 and the normal limit.
fn t_995(df: usize) -> f64 {
    match df {
        0 => f64::NAN,
        1..=30 => T_995[df - 1],
        31..=40 => 2.704,
        41..=60 => 2.660,
        61..=120 => 2.617,
        _ => 2.576,
    }
}

/// Summary of repeated measurements of one quantity.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Summary {
    /// Number of values.
    pub n: usize,
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
    /// Arithmetic mean.
    pub avg: f64,
    /// Sample standard deviation (n − 1 denominator); 0 for a single value.
    pub std: f64,
    /// Half-width of the 99% confidence interval of the mean; `None` with fewer than two values.
    pub ci99: Option<f64>,
}

impl Summary {
    /// Summarises `values`; `None` if there are none.
    pub fn of(values: &[f64]) -> Option<Summary> {
        let n = values.len();
        if n == 0 {
            return None;
        }
        let min = values.iter().copied().fold(f64::INFINITY, f64::min);
        let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let avg = values.iter().sum::<f64>() / n as f64;
        let ss: f64 = values.iter().map(|v| (v - avg) * (v - avg)).sum();
        let std = if n > 1 { (ss / (n - 1) as f64).sqrt() } else { 0.0 };
        let ci99 = (n > 1).then(|| t_995(n - 1) * std / (n as f64).sqrt());
        Some(Summary {
            n,
            min,
            max,
            avg,
            std,
            ci99,
        })
    }

    /// The half-width S's `calc_avg_and_co.sh 99` prints: it adds each squared deviation 99 times and uses the
    /// one-sided 99% t column, giving t₁·√(99·Σd²/(n(n−1)))/2. For comparing with S output only.
    pub fn s_quirk_half_width(values: &[f64]) -> Option<f64> {
        const T_ONE_SIDED_99: [f64; 10] = [31.821, 6.965, 4.541, 3.747, 3.365, 3.143, 2.998, 2.896, 2.821, 2.764];
        let s = Summary::of(values)?;
        if s.n < 2 {
            return None;
        }
        let ss: f64 = values.iter().map(|v| (v - s.avg) * (v - s.avg)).sum();
        let t = T_ONE_SIDED_99.get(s.n - 2).copied().unwrap_or(2.326);
        Some(t * (99.0 * ss / (s.n * (s.n - 1)) as f64).sqrt() / 2.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values() {
        // 2, 4, 4, 4, 5, 5, 7, 9: mean 5, Σd² = 32, sample std = √(32/7) = 2.138; t(0.995, 7) = 3.499.
        let v = [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0];
        let s = Summary::of(&v).unwrap();
        assert_eq!((s.n, s.min, s.max, s.avg), (8, 2.0, 9.0, 5.0));
        assert!((s.std - (32.0f64 / 7.0).sqrt()).abs() < 1e-12);
        let expect = 3.499 * (32.0f64 / 7.0).sqrt() / 8f64.sqrt();
        assert!((s.ci99.unwrap() - expect).abs() < 1e-9);
    }

    #[test]
    fn single_value_has_no_interval_and_empty_has_no_summary() {
        let s = Summary::of(&[3.0]).unwrap();
        assert_eq!((s.std, s.ci99), (0.0, None));
        assert!(Summary::of(&[]).is_none());
    }

    #[test]
    fn interval_narrows_with_more_samples() {
        let few = Summary::of(&[1.0, 3.0]).unwrap().ci99.unwrap();
        let many = Summary::of(&[1.0, 3.0, 1.0, 3.0, 1.0, 3.0, 1.0, 3.0])
            .unwrap()
            .ci99
            .unwrap();
        assert!(many < few / 5.0);
    }

    #[test]
    fn s_quirk_is_about_five_times_the_one_sided_interval() {
        // n = 4, Σd² = 5, one-sided t(0.99, 3) = 4.541: S prints 4.541·√(99·5/12)/2, i.e. √99/2 ≈ 4.97 times
        // the one-sided interval t·s/√n.
        let v = [10.0, 12.0, 11.0, 13.0];
        let q = Summary::s_quirk_half_width(&v).unwrap();
        assert!((q - 4.541 * (99.0f64 * 5.0 / 12.0).sqrt() / 2.0).abs() < 1e-9);
        let s = Summary::of(&v).unwrap();
        let one_sided = 4.541 * s.std / 2.0;
        assert!((q / one_sided - 99f64.sqrt() / 2.0).abs() < 1e-9);
    }
}
