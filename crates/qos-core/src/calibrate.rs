//! Determining the manager's parameters T and Bmax from an IDT sweep (thesis §5.3):
//! "Bmax corresponds to the bandwidth achieved for IDT = 0 (unregulated flow) … setting
//! an IDT value less than T will not affect the achieved bandwidth." One definition of
//! the knee, used by the simulator's calibration and the testbed's (`clusterqos
//! calibrate`, `reproduce --real`).

/// A flow is "still at Bmax" while it reaches this fraction of Bmax: the resolution of a
/// bandwidth measurement, not a property of the scheme.
pub const KNEE_FRACTION: f64 = 0.98;

/// The knee of an IDT sweep: the largest IDT at which the bandwidth is still
/// `KNEE_FRACTION · bmax`, interpolated linearly between the last sweep point at or above
/// that level and the first one below it (points sorted by IDT; any unit, the result is
/// in the IDT's unit). `None` when no point with a positive IDT falls below the level
/// (the sweep does not reach the knee) or the sweep is empty.
pub fn knee(points: &[(f64, f64)], bmax: f64) -> Option<f64> {
    let level = KNEE_FRACTION * bmax;
    let mut sorted: Vec<(f64, f64)> = points
        .iter()
        .copied()
        .filter(|p| p.0.is_finite() && p.1.is_finite())
        .collect();
    sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
    let below = sorted.iter().position(|p| p.0 > 0.0 && p.1 < level)?;
    if below == 0 {
        return Some(0.0);
    }
    let (x0, y0) = sorted[below - 1];
    let (x1, y1) = sorted[below];
    if y0 < level {
        return Some(x0);
    }
    Some(x0 + (x1 - x0) * (y0 - level) / (y0 - y1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_knee_is_where_the_sweep_crosses_98_percent_of_bmax() {
        // Flat at 80 up to 96, then T·Bmax/IDT.
        let pts: Vec<(f64, f64)> = (0..=40)
            .map(|k| {
                let idt = 4.0 * k as f64;
                (idt, if idt <= 96.0 { 80.0 } else { 80.0 * 96.0 / idt })
            })
            .collect();
        let k = knee(&pts, 80.0).unwrap();
        // 80·96/IDT = 78.4 at IDT = 97.96; interpolated between 96 (80) and 100 (76.8).
        assert!((k - 96.0 - 4.0 * 1.6 / 3.2).abs() < 1e-9, "{k}");
    }

    #[test]
    fn no_knee_when_the_sweep_never_drops() {
        assert_eq!(knee(&[(0.0, 80.0), (50.0, 79.9)], 80.0), None);
        assert_eq!(knee(&[], 80.0), None);
    }

    #[test]
    fn order_of_points_does_not_matter() {
        let a = [(0.0, 10.0), (10.0, 10.0), (20.0, 5.0)];
        let b = [(20.0, 5.0), (0.0, 10.0), (10.0, 10.0)];
        assert_eq!(knee(&a, 10.0), knee(&b, 10.0));
    }
}
