//! Where everything of a [`Figure`] goes, before anything is drawn: each axis's range,
//! ticks and labels, each series' colour, marker and position, the legend's entries.
//! [`super::svg`] draws this layout with plotters; the checks that no point falls
//! outside its axes ([`Layout::outside`]) read it too, so what is tested is what is drawn.
//!
//! Rules, for figures fit for a paper:
//! - every finite point lies inside the axes, with room for its marker: numeric ranges
//!   are the data's (with 0 on a linear value axis, and any fixed range the figure asks
//!   for) widened by [`PAD`] of their span on each side, never cut to a fixed range;
//! - ticks sit at 1, 2, 2.5 or 5 times a power of ten (linear), at powers of the base
//!   (log, with 2× and 5× on a base-10 axis spanning few decades), always at least two
//!   labelled ticks, so a log axis is never unlabelled at its ends;
//! - a categorical axis ([`Figure::x_categories`]) puts category `k` (1-based) at
//!   position `k` with its name as the tick label, and spreads the marked series of a
//!   category side by side ("dodging") so no marker hides another;
//! - a published series ([`Series::published`]) is drawn with hollow markers in its
//!   group's colour, beside (categorical) or around (numeric) the measured one.

use super::{Figure, Scale, Series, Style};

/// Share of an axis's data span added below and above it, so markers at the extremes
/// stay whole inside the frame.
pub const PAD: f64 = 0.05;

/// Colours of series groups, in order (colour-blind-safe Tableau 10 subset).
pub const COLOURS: [(u8, u8, u8); 8] = [
    (31, 119, 180),
    (214, 39, 40),
    (44, 160, 44),
    (255, 127, 14),
    (148, 103, 189),
    (140, 86, 75),
    (227, 119, 194),
    (23, 190, 207),
];

/// Marker shapes, in order of use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// A disc.
    Circle,
    /// A square.
    Square,
    /// A triangle pointing up.
    Triangle,
    /// A diamond.
    Diamond,
}

const SHAPES: [Shape; 4] = [
    Shape::Circle,
    Shape::Square,
    Shape::Triangle,
    Shape::Diamond,
];

/// One axis: its range and ticks in plot space (the value itself, or its logarithm).
#[derive(Debug, Clone, PartialEq)]
pub struct Axis {
    /// How values map to plot space.
    pub scale: Scale,
    /// Lower end, in plot space.
    pub lo: f64,
    /// Upper end, in plot space.
    pub hi: f64,
    /// Tick positions in plot space and their labels.
    pub ticks: Vec<(f64, String)>,
}

impl Axis {
    /// `v` in plot space (`None`: not drawable on this axis — NaN, or ≤ 0 on a log axis).
    pub fn to_plot(&self, v: f64) -> Option<f64> {
        to_plot(self.scale, v)
    }
}

/// How one series is drawn.
#[derive(Debug, Clone, PartialEq)]
pub struct Drawn {
    /// Index into the figure's series.
    pub index: usize,
    /// Its colour.
    pub colour: (u8, u8, u8),
    /// Its marker, when points are marked.
    pub marker: Option<Shape>,
    /// Hollow marker (a published value).
    pub hollow: bool,
    /// Whether points are joined by a line (and how).
    pub line: Option<Style>,
    /// The points in plot space, dodged where the x axis is categorical.
    pub points: Vec<(f64, f64)>,
}

/// Everything the renderer needs.
#[derive(Debug, Clone, PartialEq)]
pub struct Layout {
    /// The x axis.
    pub x: Axis,
    /// The y axis.
    pub y: Axis,
    /// The series, in drawing order.
    pub series: Vec<Drawn>,
}

fn to_plot(scale: Scale, v: f64) -> Option<f64> {
    if !v.is_finite() {
        return None;
    }
    match scale {
        Scale::Linear => Some(v),
        Scale::Log2 => (v > 0.0).then(|| v.log2()),
        Scale::Log10 => (v > 0.0).then(|| v.log10()),
    }
}

fn from_plot(scale: Scale, p: f64) -> f64 {
    match scale {
        Scale::Linear => p,
        Scale::Log2 => p.exp2(),
        Scale::Log10 => 10f64.powf(p),
    }
}

/// 1, 2, 2.5 or 5 times a power of ten, at least `raw`.
pub fn nice_step(raw: f64) -> f64 {
    if !(raw.is_finite() && raw > 0.0) {
        return 1.0;
    }
    let p = 10f64.powf(raw.log10().floor());
    for m in [1.0, 2.0, 2.5, 5.0, 10.0] {
        if m * p >= raw * (1.0 - 1e-12) {
            return m * p;
        }
    }
    10.0 * p
}

/// `v` printed with as many decimals as `step` needs.
fn linear_label(v: f64, step: f64) -> String {
    let v = if v.abs() < step * 1e-9 { 0.0 } else { v };
    let mut decimals = 0usize;
    while decimals < 9 {
        let scaled = step * 10f64.powi(decimals as i32);
        if (scaled - scaled.round()).abs() < 1e-6 * scaled.max(1.0) {
            break;
        }
        decimals += 1;
    }
    format!("{v:.decimals$}")
}

/// A tick value of a log axis: powers of two as 4, 64, 1K, 64K, 1M; others plainly.
fn log_label(v: f64, scale: Scale) -> String {
    const K: f64 = 1024.0;
    if scale == Scale::Log2 && v >= K {
        return if v >= K * K {
            format!("{}M", v / (K * K))
        } else {
            format!("{}K", v / K)
        };
    }
    if v >= 1.0 {
        format!("{}", (v * 1e6).round() / 1e6)
    } else {
        let digits = (-v.log10()).ceil().max(1.0) as usize;
        format!("{v:.digits$}")
    }
}

/// The data of `points` on one axis (`pick` chooses x or y), in plot space.
fn extent(
    series: &[Series],
    scale: Scale,
    pick: impl Fn(&(f64, f64)) -> f64,
) -> Option<(f64, f64)> {
    let mut lo = f64::INFINITY;
    let mut hi = f64::NEG_INFINITY;
    for s in series {
        for p in &s.points {
            if let Some(v) = to_plot(scale, pick(p)) {
                lo = lo.min(v);
                hi = hi.max(v);
            }
        }
    }
    lo.is_finite().then_some((lo, hi))
}

/// A numeric axis over the data `[lo, hi]` (plot space): padded by [`PAD`], with ticks.
fn numeric_axis(scale: Scale, lo: f64, hi: f64) -> Axis {
    let (mut lo, mut hi) = (lo, hi);
    if hi - lo < 1e-12 * lo.abs().max(1.0) {
        // One value: a span around it (a unit, or a factor of two on a log axis).
        let half = if scale == Scale::Linear {
            lo.abs().max(1.0) * 0.5
        } else {
            0.5
        };
        if scale == Scale::Linear && lo == 0.0 {
            // All zero (a probability no case missed): 0 to 1, not a span of negative
            // values around it.
            hi = 1.0;
        } else {
            lo -= half;
            hi += half;
        }
    }
    let pad = (hi - lo) * PAD;
    let (lo, hi) = (lo - pad, hi + pad);
    let ticks = match scale {
        Scale::Linear => linear_ticks(lo, hi),
        Scale::Log2 | Scale::Log10 => log_ticks(scale, lo, hi),
    };
    Axis {
        scale,
        lo,
        hi,
        ticks,
    }
}

fn linear_ticks(lo: f64, hi: f64) -> Vec<(f64, String)> {
    let step = nice_step((hi - lo) / 6.0);
    let first = (lo / step).ceil();
    let last = (hi / step).floor();
    let mut out = Vec::new();
    let mut k = first;
    while k <= last && out.len() < 40 {
        let v = k * step;
        out.push((v, linear_label(v, step)));
        k += 1.0;
    }
    out
}

fn log_ticks(scale: Scale, lo: f64, hi: f64) -> Vec<(f64, String)> {
    // In plot space a power of the base is an integer.
    let (base_lg, mults): (f64, &[f64]) = match scale {
        // Up to three and a half decades (Nagar Fig 5's latencies, 180 us to 105 ms,
        // with the padding), 2x and 5x keep the lowest label within a factor of
        // two of the lowest point.
        Scale::Log10 if hi - lo <= 3.5 => (1.0, &[1.0, 2.0, 5.0]),
        Scale::Log10 => (1.0, &[1.0]),
        _ => (1.0, &[1.0]),
    };
    let span = (hi - lo) / base_lg;
    let every = (span / 8.0).ceil().max(1.0);
    let mut candidates = Vec::new();
    let mut e = (lo / every).floor() * every;
    while e <= hi && candidates.len() < 200 {
        for &m in mults {
            let p = e + to_plot(scale, m).unwrap_or(0.0);
            if p >= lo && p <= hi {
                candidates.push(p);
            }
        }
        e += every;
    }
    if candidates.len() < 2 {
        // Less than a labelled power inside: label 1-2-5 steps (base 10) or every
        // power of two, and failing that the two ends.
        candidates.clear();
        let fine: &[f64] = if scale == Scale::Log10 {
            &[1.0, 2.0, 5.0]
        } else {
            &[1.0, 1.5]
        };
        let mut e = lo.floor();
        while e <= hi.ceil() {
            for &m in fine {
                let p = e + to_plot(scale, m).unwrap_or(0.0);
                if p >= lo && p <= hi {
                    candidates.push(p);
                }
            }
            e += 1.0;
        }
        if candidates.len() < 2 {
            candidates = vec![lo + (hi - lo) * PAD, hi - (hi - lo) * PAD];
        }
    }
    candidates
        .into_iter()
        .map(|p| {
            // A power of the base or a 2×/5× multiple is exact; an end of the span
            // (the last fallback) is rounded to three significant digits.
            let v = from_plot(scale, p);
            let exact = [1.0, 2.0, 5.0, 1.5].iter().any(|&m| {
                let q = p - to_plot(scale, m).unwrap_or(0.0);
                (q - q.round()).abs() < 1e-9
            });
            let shown = if exact && v >= 1.0 {
                v.round()
            } else {
                round_sig(v)
            };
            (p, log_label(shown, scale))
        })
        .collect()
}

/// `v` rounded to 3 significant digits (a tick label of an axis end).
fn round_sig(v: f64) -> f64 {
    if v == 0.0 || !v.is_finite() {
        return v;
    }
    let m = 10f64.powf(2.0 - v.abs().log10().floor());
    (v * m).round() / m
}

impl Layout {
    /// The layout of `fig`.
    pub fn of(fig: &Figure) -> Layout {
        let categorical = !fig.x_categories.is_empty();
        let x = if categorical {
            let n = fig.x_categories.len() as f64;
            Axis {
                scale: Scale::Linear,
                lo: 0.5,
                hi: n + 0.5,
                ticks: fig
                    .x_categories
                    .iter()
                    .enumerate()
                    .map(|(k, name)| ((k + 1) as f64, name.clone()))
                    .collect(),
            }
        } else {
            let data = extent(&fig.series, fig.x_scale, |p| p.0);
            let fixed = fig
                .x_range
                .and_then(|(a, b)| Some((to_plot(fig.x_scale, a)?, to_plot(fig.x_scale, b)?)));
            let (lo, hi) = span(data, fixed, None, fig.x_scale);
            numeric_axis(fig.x_scale, lo, hi)
        };
        let data = extent(&fig.series, fig.y_scale, |p| p.1);
        let fixed = fig
            .y_range
            .and_then(|(a, b)| Some((to_plot(fig.y_scale, a)?, to_plot(fig.y_scale, b)?)));
        let zero = (fig.y_scale == Scale::Linear).then_some(0.0);
        let (lo, hi) = span(data, fixed, zero, fig.y_scale);
        let y = numeric_axis(fig.y_scale, lo, hi);

        // Colours by group (a series without one is its own group), markers by the
        // order of marked series within a group's kind.
        let mut groups: Vec<String> = Vec::new();
        let mut series = Vec::new();
        let marked: Vec<usize> = fig
            .series
            .iter()
            .enumerate()
            .filter(|(_, s)| s.style != Style::Line && s.style != Style::Step)
            .map(|(i, _)| i)
            .collect();
        let dodge = if categorical && marked.len() > 1 {
            (0.7 / marked.len() as f64).min(0.16)
        } else {
            0.0
        };
        for (i, s) in fig.series.iter().enumerate() {
            let key = s.group.clone().unwrap_or_else(|| format!("\u{0}{i}"));
            let g = groups.iter().position(|k| *k == key).unwrap_or_else(|| {
                groups.push(key);
                groups.len() - 1
            });
            let has_marker = marked.contains(&i);
            let shift = match marked.iter().position(|&m| m == i) {
                Some(k) if dodge > 0.0 => (k as f64 - (marked.len() - 1) as f64 / 2.0) * dodge,
                _ => 0.0,
            };
            let points = s
                .points
                .iter()
                .filter_map(|&(px, py)| {
                    let xp = if categorical {
                        px.is_finite().then_some(px)?
                    } else {
                        to_plot(fig.x_scale, px)?
                    };
                    Some((xp + shift, to_plot(fig.y_scale, py)?))
                })
                .collect();
            series.push(Drawn {
                index: i,
                colour: COLOURS[g % COLOURS.len()],
                marker: has_marker.then(|| SHAPES[g % SHAPES.len()]),
                hollow: s.published,
                line: (s.style != Style::Scatter).then_some(s.style),
                points,
            });
        }
        Layout { x, y, series }
    }

    /// The points of `self` that fall outside the axes or closer to a border than
    /// `margin` (a share of the axis span): (series index, x, y) in plot space.
    pub fn outside(&self, margin: f64) -> Vec<(usize, f64, f64)> {
        let inside = |a: &Axis, v: f64| {
            let m = (a.hi - a.lo) * margin;
            v >= a.lo + m && v <= a.hi - m
        };
        self.series
            .iter()
            .flat_map(|s| s.points.iter().map(move |&(x, y)| (s.index, x, y)))
            .filter(|&(_, x, y)| !inside(&self.x, x) || !inside(&self.y, y))
            .collect()
    }
}

/// The span an axis must show: the data, any fixed range (widened to the data, never
/// cut), and `zero` when given; a default when there is nothing.
fn span(
    data: Option<(f64, f64)>,
    fixed: Option<(f64, f64)>,
    zero: Option<f64>,
    scale: Scale,
) -> (f64, f64) {
    let mut lo = f64::INFINITY;
    let mut hi = f64::NEG_INFINITY;
    for (a, b) in data.into_iter().chain(fixed.filter(|(a, b)| b > a)) {
        lo = lo.min(a);
        hi = hi.max(b);
    }
    if let Some(z) = zero.filter(|_| lo.is_finite()) {
        lo = lo.min(z);
        hi = hi.max(z);
    }
    if !lo.is_finite() {
        return match scale {
            Scale::Linear => (0.0, 1.0),
            _ => (0.0, 1.0),
        };
    }
    (lo, hi)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nice_steps_are_one_two_or_five_times_a_power_of_ten() {
        assert_eq!(nice_step(0.7), 1.0);
        assert_eq!(nice_step(13.0), 20.0);
        assert_eq!(nice_step(333.0), 500.0);
        assert_eq!(nice_step(2.2), 2.5);
        assert_eq!(nice_step(20.0), 20.0);
    }

    #[test]
    fn markers_at_the_data_extremes_stay_inside_the_frame() {
        let fig = Figure::new("f", "t", "x", "y")
            .with_series(Series::new("a", vec![(0.0, 80.0), (2000.0, 0.0)]));
        let l = Layout::of(&fig);
        assert!(l.outside(0.03).is_empty(), "{l:?}");
        // 0 is shown and labelled on the value axis; the top tick is a round number.
        assert!(l.y.ticks.iter().any(|t| t.1 == "0"), "{:?}", l.y.ticks);
        assert!(l.y.ticks.iter().any(|t| t.1 == "80"), "{:?}", l.y.ticks);
    }

    #[test]
    fn a_fixed_range_never_cuts_the_data() {
        let mut fig = Figure::new("f", "t", "x", "y")
            .with_series(Series::new("a", vec![(0.0, 1.0), (10.0, 2.0)]));
        fig.x_range = Some((2.0, 5.0));
        fig.y_range = Some((0.0, 1.5));
        assert!(Layout::of(&fig).outside(0.03).is_empty());
    }

    #[test]
    fn an_axis_of_zeros_shows_no_negative_values() {
        // Table 2's DMP where no case misses a deadline.
        let fig = Figure::new("f", "t", "x", "DMP")
            .with_series(Series::new("a", vec![(60.0, 0.0), (80.0, 0.0)]));
        let l = Layout::of(&fig);
        assert!(l.outside(0.03).is_empty(), "{l:?}");
        assert!(l.y.ticks.iter().all(|t| t.0 >= 0.0), "{:?}", l.y.ticks);
        assert!(l.y.ticks.len() >= 2, "{:?}", l.y.ticks);
    }

    #[test]
    fn a_log_axis_is_labelled_at_both_ends_of_its_data() {
        // Nagar Fig 5's data: latencies from about 180 us to 105 ms.
        let mut fig = Figure::new("f", "t", "x", "latency (us)")
            .with_series(Series::new("be", vec![(10.0, 180.0), (90.0, 105_000.0)]));
        fig.y_scale = Scale::Log10;
        let l = Layout::of(&fig);
        assert!(l.outside(0.03).is_empty(), "{l:?}");
        let labels: Vec<&str> = l.y.ticks.iter().map(|t| t.1.as_str()).collect();
        assert!(labels.len() >= 2, "{labels:?}");
        // Labels within a factor of two of the lowest and the highest point.
        let lowest = l.y.ticks.first().unwrap().0;
        let highest = l.y.ticks.last().unwrap().0;
        assert!(
            (lowest - 180f64.log10()).abs() <= 2f64.log10(),
            "{labels:?}"
        );
        assert!(
            (highest - 105_000f64.log10()).abs() <= 2f64.log10(),
            "{labels:?}"
        );
        // Narrow data: 1-2-5 steps keep two labels.
        let mut fig = Figure::new("f", "t", "x", "y")
            .with_series(Series::new("be", vec![(1.0, 210.0), (2.0, 390.0)]));
        fig.y_scale = Scale::Log10;
        let l = Layout::of(&fig);
        assert!(l.y.ticks.len() >= 2, "{:?}", l.y.ticks);
    }

    #[test]
    fn log2_axis_labels_powers_of_two_with_k_suffix() {
        let fig = Figure::new("f", "t", "size", "y")
            .with_series(Series::new("a", vec![(4.0, 10.0), (65536.0, 900.0)]))
            .with_x_scale(Scale::Log2);
        let labels: Vec<String> = Layout::of(&fig).x.ticks.into_iter().map(|t| t.1).collect();
        assert!(labels.contains(&"64K".to_string()), "{labels:?}");
        assert!(labels.contains(&"4".to_string()), "{labels:?}");
    }

    #[test]
    fn categories_are_named_ticks_and_published_markers_sit_beside_measured_ones() {
        let fig = Figure::new("f", "t", "case", "MB/s")
            .with_categories(["(2T, 4T)", "(4T, 8T)"])
            .with_series(
                Series::new("A measured", vec![(1.0, 40.0), (2.0, 20.0)])
                    .with_style(Style::Scatter)
                    .in_group("A"),
            )
            .with_series(
                Series::published("A published", vec![(1.0, 40.0), (2.0, 20.0)]).in_group("A"),
            );
        let l = Layout::of(&fig);
        assert_eq!(
            l.x.ticks,
            vec![(1.0, "(2T, 4T)".to_string()), (2.0, "(4T, 8T)".to_string())]
        );
        let (m, p) = (&l.series[0], &l.series[1]);
        assert_eq!(m.colour, p.colour, "one group, one colour");
        assert!(!m.hollow && p.hollow);
        for (a, b) in m.points.iter().zip(&p.points) {
            assert!(b.0 - a.0 > 0.1, "side by side, not on top: {a:?} {b:?}");
            assert_eq!(a.1, b.1);
        }
        assert!(l.outside(0.03).is_empty());
    }

    #[test]
    fn an_empty_figure_has_axes() {
        let l = Layout::of(&Figure::new("f", "t", "x", "y"));
        assert!(l.x.hi > l.x.lo && l.y.hi > l.y.lo);
    }
}
