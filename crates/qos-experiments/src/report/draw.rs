//! Draws one [`Figure`] with plotters on any of its backends (SVG: [`super::svg`]; PDF:
//! [`super::pdf`]), so both files show the same picture: the title (wrapped to the
//! width), the axes with the ticks, labels and ranges of its [`Layout`], a light grid
//! and a frame, each series in its group's colour and marker (hollow for published
//! values, drawn under the measured ones), and the legend in rows below the plot, so it
//! never covers data or narrows the plot.

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::plot::{Axis, Drawn, Layout, Shape};
use super::{Figure, Style};

/// Width of every figure (SVG user units, 1/96 inch: 6.7 inches).
pub const WIDTH: u32 = 640;
/// Height of the axes' part of a figure (title and legend come on top of it).
const CHART_H: u32 = 400;
/// Height of one legend row.
const LEGEND_ROW: u32 = 20;
/// Height of one title line.
const TITLE_LINE: u32 = 20;
/// The font family of all text.
const FONT: &str = "sans-serif";
/// Tick label size, axis label size, title size (px).
const TICK_PX: f64 = 13.0;
const LABEL_PX: f64 = 14.0;
const TITLE_PX: f64 = 15.0;
/// plotters writes a font size `s` as `s / 1.24` px in SVG: sizes are given times this.
const PLOTTERS_EM: f64 = 1.24;
/// Marker radius (px): measured points, and the ring of a published value around them.
const MARKER_R: i32 = 4;
const RING_R: i32 = 6;

/// Estimated width in px of `text` at `px` (SVG text is measured by the viewer; this
/// only sizes the margins and the legend's columns, generously).
fn text_width(text: &str, px: f64) -> f64 {
    text.chars().count() as f64 * px * 0.58
}

/// `text` broken at spaces into lines of at most `width` px at `px`.
pub(super) fn wrap(text: &str, width: f64, px: f64) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        let candidate = if line.is_empty() {
            word.to_string()
        } else {
            format!("{line} {word}")
        };
        if !line.is_empty() && text_width(&candidate, px) > width {
            lines.push(std::mem::take(&mut line));
            line = word.to_string();
        } else {
            line = candidate;
        }
    }
    if !line.is_empty() || lines.is_empty() {
        lines.push(line);
    }
    lines
}

/// Series `k`'s legend entry: its name, and the earlier series it coincides with point
/// for point (its markers hide under the later ones, so the legend says where it is).
fn legend_name(fig: &Figure, k: usize) -> String {
    let s = &fig.series[k];
    let same = fig.series[..k]
        .iter()
        .find(|o| !s.points.is_empty() && o.points == s.points);
    match same {
        Some(o) => format!("{} (= {})", s.name, o.name),
        None => s.name.clone(),
    }
}

/// The legend's geometry: entries per row and rows.
fn legend_grid(fig: &Figure) -> (usize, usize) {
    let n = fig.series.len();
    if n == 0 {
        return (1, 0);
    }
    let widest = (0..n)
        .map(|k| text_width(&legend_name(fig, k), TICK_PX))
        .fold(0.0, f64::max);
    let entry = 40.0 + widest;
    let per_row = ((f64::from(WIDTH) - 40.0) / entry).floor().max(1.0) as usize;
    let per_row = per_row.min(n);
    (per_row, n.div_ceil(per_row))
}

/// The sizes of a figure's parts.
pub struct Geometry {
    /// The title's lines.
    title: Vec<String>,
    /// Height of the title block.
    title_h: u32,
    /// Legend entries per row.
    per_row: usize,
    /// Height of the legend block (0: no legend).
    legend_h: u32,
    /// Whole height.
    pub height: u32,
}

impl Geometry {
    /// The geometry of `fig`.
    pub fn of(fig: &Figure) -> Geometry {
        let title = wrap(&fig.title, f64::from(WIDTH) - 30.0, TITLE_PX);
        let title_h = 10 + TITLE_LINE * title.len() as u32;
        let (per_row, rows) = legend_grid(fig);
        let legend_h = if rows == 0 {
            0
        } else {
            8 + LEGEND_ROW * rows as u32
        };
        Geometry {
            height: title_h + CHART_H + legend_h,
            title,
            title_h,
            per_row,
            legend_h,
        }
    }
}

type DrawResult<DB> = Result<(), DrawingAreaErrorKind<<DB as DrawingBackend>::ErrorType>>;

fn label_of(axis: &Axis, v: f64) -> String {
    axis.ticks
        .iter()
        .find(|t| (t.0 - v).abs() <= 1e-9 * (axis.hi - axis.lo).abs().max(1e-300))
        .map(|t| t.1.clone())
        .unwrap_or_default()
}

fn colour((r, g, b): (u8, u8, u8)) -> RGBColor {
    RGBColor(r, g, b)
}

/// Draws `fig` laid out as `layout` with `geometry` on `root` (of `WIDTH` by
/// `geometry.height`).
pub fn figure<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    fig: &Figure,
    layout: &Layout,
    geometry: &Geometry,
) -> DrawResult<DB> {
    let Geometry {
        title,
        title_h,
        per_row,
        legend_h,
        ..
    } = geometry;
    let (per_row, legend_h) = (*per_row, *legend_h);
    root.fill(&WHITE)?;
    let (title_area, rest) = root.split_vertically(*title_h);
    let (chart_area, legend_area) = rest.split_vertically(CHART_H);
    let title_style = TextStyle::from(
        (FONT, TITLE_PX * PLOTTERS_EM)
            .into_font()
            .style(FontStyle::Bold),
    )
    .pos(Pos::new(HPos::Center, VPos::Top));
    for (k, line) in title.iter().enumerate() {
        title_area.draw(&Text::new(
            line.clone(),
            (WIDTH as i32 / 2, 8 + (TITLE_LINE * k as u32) as i32),
            title_style.clone(),
        ))?;
    }

    let widest_y = layout
        .y
        .ticks
        .iter()
        .map(|t| text_width(&t.1, TICK_PX))
        .fold(0.0, f64::max);
    let mut chart = ChartBuilder::on(&chart_area)
        .margin_left(8)
        .margin_right(22)
        .margin_top(6)
        .margin_bottom(2)
        .x_label_area_size(50)
        .y_label_area_size((widest_y + 36.0).ceil() as u32)
        .build_cartesian_2d(Ticked::of(&layout.x), Ticked::of(&layout.y))?;
    let grid = RGBColor(225, 225, 225);
    let x_fmt = |v: &f64| label_of(&layout.x, *v);
    let y_fmt = |v: &f64| label_of(&layout.y, *v);
    chart
        .configure_mesh()
        .x_desc(fig.x_label.as_str())
        .y_desc(fig.y_label.as_str())
        .x_label_formatter(&x_fmt)
        .y_label_formatter(&y_fmt)
        .bold_line_style(grid)
        .light_line_style(TRANSPARENT)
        .axis_style(BLACK)
        .label_style((FONT, TICK_PX * PLOTTERS_EM))
        .axis_desc_style((FONT, LABEL_PX * PLOTTERS_EM))
        .disable_x_mesh_if(!fig.x_categories.is_empty())
        .draw()?;
    // Frame.
    chart.draw_series(std::iter::once(Rectangle::new(
        [(layout.x.lo, layout.y.lo), (layout.x.hi, layout.y.hi)],
        BLACK.stroke_width(1),
    )))?;

    // Lines first, then published markers, then measured markers on top.
    for d in &layout.series {
        if let Some(style) = d.line {
            let pts = if style == Style::Step {
                steps(&d.points)
            } else {
                d.points.clone()
            };
            chart.draw_series(LineSeries::new(pts, colour(d.colour).stroke_width(2)))?;
        }
    }
    for hollow in [true, false] {
        for d in layout.series.iter().filter(|d| d.hollow == hollow) {
            if let Some(shape) = d.marker {
                for &p in &d.points {
                    marker(&mut chart, p, shape, d, hollow)?;
                }
            }
        }
    }
    legend(&legend_area, fig, layout, per_row, legend_h)
}

trait DisableIf {
    fn disable_x_mesh_if(&mut self, yes: bool) -> &mut Self;
}

impl<X: Ranged, Y: Ranged, DB: DrawingBackend> DisableIf
    for plotters::chart::MeshStyle<'_, '_, X, Y, DB>
{
    fn disable_x_mesh_if(&mut self, yes: bool) -> &mut Self {
        // Categories are not quantities: no vertical grid lines between them.
        if yes {
            self.disable_x_mesh();
        }
        self
    }
}

/// A step function through `points`: each y holds until the next x.
fn steps(points: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let mut out = Vec::with_capacity(points.len() * 2);
    for (k, &p) in points.iter().enumerate() {
        if k > 0 {
            out.push((p.0, points[k - 1].1));
        }
        out.push(p);
    }
    out
}

type Chart<'a, DB> = ChartContext<'a, DB, Cartesian2d<Ticked, Ticked>>;

/// A linear coordinate in plot space whose grid lines and labels are exactly the ticks
/// of a layout's axis (plotters would otherwise choose its own).
struct Ticked {
    lo: f64,
    hi: f64,
    ticks: Vec<f64>,
}

impl Ticked {
    fn of(axis: &Axis) -> Ticked {
        Ticked {
            lo: axis.lo,
            hi: axis.hi,
            ticks: axis.ticks.iter().map(|t| t.0).collect(),
        }
    }
}

impl Ranged for Ticked {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, v: &f64, limit: (i32, i32)) -> i32 {
        let f = (v - self.lo) / (self.hi - self.lo);
        limit.0 + (f * f64::from(limit.1 - limit.0)).round() as i32
    }

    fn key_points<H: KeyPointHint>(&self, hint: H) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            Vec::new()
        } else {
            self.ticks.clone()
        }
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.lo..self.hi
    }
}

/// The outline of `shape` of radius `r` around the origin, in pixels.
fn outline(shape: Shape, r: i32) -> Vec<(i32, i32)> {
    match shape {
        Shape::Circle => (0..=24)
            .map(|k| {
                let a = f64::from(k) * std::f64::consts::TAU / 24.0;
                (
                    (f64::from(r) * a.cos()).round() as i32,
                    (f64::from(r) * a.sin()).round() as i32,
                )
            })
            .collect(),
        Shape::Square => vec![(-r, -r), (r, -r), (r, r), (-r, r), (-r, -r)],
        Shape::Triangle => {
            let h = r + 1;
            vec![(0, -h), (h, r), (-h, r), (0, -h)]
        }
        Shape::Diamond => {
            let h = r + 1;
            vec![(0, -h), (h, 0), (0, h), (-h, 0), (0, -h)]
        }
    }
}

fn marker<DB: DrawingBackend>(
    chart: &mut Chart<'_, DB>,
    at: (f64, f64),
    shape: Shape,
    d: &Drawn,
    hollow: bool,
) -> DrawResult<DB> {
    let c = colour(d.colour);
    let r = if hollow { RING_R } else { MARKER_R };
    let shape_pts = outline(shape, r);
    let (fill, line): (ShapeStyle, ShapeStyle) = if hollow {
        (WHITE.filled(), c.stroke_width(2))
    } else {
        (c.filled(), c.stroke_width(1))
    };
    chart.draw_series(std::iter::once(
        EmptyElement::at(at)
            + Polygon::new(shape_pts.clone(), fill)
            + PathElement::new(shape_pts, line),
    ))?;
    Ok(())
}

fn legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    fig: &Figure,
    layout: &Layout,
    per_row: usize,
    h: u32,
) -> DrawResult<DB> {
    if h == 0 {
        return Ok(());
    }
    let entry_w = (f64::from(WIDTH) - 40.0) / per_row as f64;
    let text =
        TextStyle::from((FONT, TICK_PX * PLOTTERS_EM)).pos(Pos::new(HPos::Left, VPos::Center));
    for (k, d) in layout.series.iter().enumerate() {
        let (row, col) = (k / per_row, k % per_row);
        let x = 20 + (col as f64 * entry_w) as i32;
        let y = 14 + (row as u32 * LEGEND_ROW) as i32;
        let c = colour(d.colour);
        if d.line.is_some() {
            area.draw(&PathElement::new(
                vec![(x, y), (x + 26, y)],
                c.stroke_width(2),
            ))?;
        }
        if let Some(shape) = d.marker {
            let r = if d.hollow { RING_R } else { MARKER_R };
            let pts = outline(shape, r);
            let (fill, line) = if d.hollow {
                (WHITE.filled(), c.stroke_width(2))
            } else {
                (c.filled(), c.stroke_width(1))
            };
            area.draw(
                &(EmptyElement::at((x + 13, y))
                    + Polygon::new(pts.clone(), fill)
                    + PathElement::new(pts, line)),
            )?;
        }
        area.draw(&Text::new(
            legend_name(fig, d.index),
            (x + 34, y),
            text.clone(),
        ))?;
    }
    Ok(())
}
