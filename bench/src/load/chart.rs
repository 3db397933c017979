//! Bar charts of benchmark figures as SVG, written from Rust with no external tool.
//!
//! Owns: [`BarChart`] (a title, groups along the x axis, on a log scale when they are
//! numbers such as N = 1, 10, 100, 1000, a y axis whose label carries the unit, and one bar
//! per series per group, with its value printed on top and a legend) and
//! [`BarChart::to_svg`]. The rendering is deterministic: the same chart gives the same
//! bytes (fixed layout, fixed number formatting, no clock, no randomness). Every bar is a
//! `rect` of class `bar` with `data-series` and `data-group`, so a reader (or a test) can
//! find each value without parsing geometry.
//!
//! Never: reads reports or files; the caller gives the values.

use std::fmt::Write as _;

/// Picture size in SVG user units (pixels).
const WIDTH: f64 = 860.0;
const HEIGHT: f64 = 500.0;
/// Room around the plot: the y tick labels, the title, the x labels and legend.
const MARGIN_LEFT: f64 = 90.0;
const MARGIN_RIGHT: f64 = 30.0;
const MARGIN_TOP: f64 = 70.0;
const MARGIN_BOTTOM: f64 = 70.0;
/// Steps between horizontal grid lines at most (so at most seven y tick labels).
const Y_STEPS_MAX: f64 = 6.0;
/// Share of a group's slot the bars fill.
const GROUP_FILL: f64 = 0.75;
/// Series colours, in order (colour-blind safe: blue, orange, green, purple).
const PALETTE: [&str; 4] = ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd"];
/// The y axis reaches at least this multiple of the tallest bar, so the value printed on
/// top of it stays clear of the legend above the plot.
const Y_HEADROOM: f64 = 1.06;
/// Title and subtitle font sizes (SVG user units) and the smallest a long one shrinks to.
const TITLE_FONT: f64 = 17.0;
const SUBTITLE_FONT: f64 = 13.0;
const FONT_MIN: f64 = 9.0;
/// A sans-serif glyph's average advance as a share of the font size (an estimate: the
/// renderer's font is not known here), to shrink a line that would not fit the picture.
const GLYPH_ADVANCE_EM: f64 = 0.6;

/// Where the groups sit along the x axis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XScale {
    /// Evenly spaced, in the given order.
    Categories,
    /// At log10 of each group's number (every number above 0).
    Log10,
}

/// One group of bars: its label and, for [`XScale::Log10`], its number.
#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    /// Printed under the group.
    pub label: String,
    /// Its position on a log axis (ignored for categories).
    pub at: f64,
}

/// One series: a name for the legend and a value per group (`None`: not measured).
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// The legend's name.
    pub name: String,
    /// One value per group, in group order.
    pub values: Vec<Option<f64>>,
}

/// A grouped bar chart (module docs).
#[derive(Debug, Clone, PartialEq)]
pub struct BarChart {
    /// Above the plot.
    pub title: String,
    /// A second line under the title (the run, the machine), may be empty.
    pub subtitle: String,
    /// Under the x axis.
    pub x_label: String,
    /// Along the y axis, with the unit, e.g. `deliveries per second`.
    pub y_label: String,
    /// How the groups are placed.
    pub x_scale: XScale,
    /// The groups, left to right.
    pub groups: Vec<Group>,
    /// The series, one bar each per group.
    pub series: Vec<Series>,
}

impl BarChart {
    /// The chart as a standalone SVG document.
    pub fn to_svg(&self) -> String {
        let plot = Plot::of(self);
        let mut svg = String::new();
        let _ = writeln!(
            svg,
            r#"<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="13">"#
        );
        let _ = writeln!(
            svg,
            r##"<rect x="0" y="0" width="{WIDTH}" height="{HEIGHT}" fill="#ffffff"/>"##
        );
        let _ = writeln!(
            svg,
            r#"<text class="title" x="{}" y="26" text-anchor="middle" font-size="{}" font-weight="bold">{}</text>"#,
            WIDTH / 2.0,
            fitted_font(&self.title, TITLE_FONT),
            escape(&self.title)
        );
        if !self.subtitle.is_empty() {
            let _ = writeln!(
                svg,
                r##"<text class="subtitle" x="{}" y="46" text-anchor="middle" font-size="{}" fill="#555555">{}</text>"##,
                WIDTH / 2.0,
                fitted_font(&self.subtitle, SUBTITLE_FONT),
                escape(&self.subtitle)
            );
        }
        self.y_axis(&plot, &mut svg);
        self.x_axis(&plot, &mut svg);
        self.bars(&plot, &mut svg);
        self.legend(&mut svg);
        svg.push_str("</svg>\n");
        svg
    }

    fn y_axis(&self, plot: &Plot, svg: &mut String) {
        for tick in &plot.ticks {
            let y = plot.y(*tick);
            let _ = writeln!(
                svg,
                r##"<line class="grid" x1="{MARGIN_LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#dddddd"/>"##,
                WIDTH - MARGIN_RIGHT
            );
            let _ = writeln!(
                svg,
                r#"<text class="y-tick" x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
                MARGIN_LEFT - 8.0,
                y + 4.0,
                compact(*tick)
            );
        }
        let _ = writeln!(
            svg,
            r##"<line class="axis" x1="{MARGIN_LEFT}" y1="{MARGIN_TOP}" x2="{MARGIN_LEFT}" y2="{:.1}" stroke="#000000"/>"##,
            HEIGHT - MARGIN_BOTTOM
        );
        let middle = (MARGIN_TOP + HEIGHT - MARGIN_BOTTOM) / 2.0;
        let _ = writeln!(
            svg,
            r#"<text class="y-label" x="22" y="{middle:.1}" text-anchor="middle" transform="rotate(-90 22 {middle:.1})">{}</text>"#,
            escape(&self.y_label)
        );
    }

    fn x_axis(&self, plot: &Plot, svg: &mut String) {
        let base = HEIGHT - MARGIN_BOTTOM;
        let _ = writeln!(
            svg,
            r##"<line class="axis" x1="{MARGIN_LEFT}" y1="{base:.1}" x2="{:.1}" y2="{base:.1}" stroke="#000000"/>"##,
            WIDTH - MARGIN_RIGHT
        );
        for (group, center) in self.groups.iter().zip(&plot.centers) {
            let _ = writeln!(
                svg,
                r#"<text class="x-tick" x="{center:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
                base + 20.0,
                escape(&group.label)
            );
        }
        let _ = writeln!(
            svg,
            r#"<text class="x-label" x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            (MARGIN_LEFT + WIDTH - MARGIN_RIGHT) / 2.0,
            HEIGHT - 20.0,
            escape(&self.x_label)
        );
    }

    fn bars(&self, plot: &Plot, svg: &mut String) {
        let series_count = self.series.len().max(1) as f64;
        let bar_width = plot.slot * GROUP_FILL / series_count;
        let base = HEIGHT - MARGIN_BOTTOM;
        for (group_at, (group, center)) in self.groups.iter().zip(&plot.centers).enumerate() {
            let left = center - plot.slot * GROUP_FILL / 2.0;
            for (series_at, series) in self.series.iter().enumerate() {
                let x = left + bar_width * series_at as f64;
                let colour = PALETTE[series_at % PALETTE.len()];
                let label_x = x + bar_width / 2.0;
                match series.values.get(group_at).copied().flatten() {
                    Some(value) => {
                        let top = plot.y(value.max(0.0));
                        let _ = writeln!(
                            svg,
                            r#"<rect class="bar" data-series="{}" data-group="{}" data-value="{}" x="{x:.1}" y="{top:.1}" width="{:.1}" height="{:.1}" fill="{colour}"/>"#,
                            escape(&series.name),
                            escape(&group.label),
                            plain(value),
                            bar_width - 2.0,
                            base - top
                        );
                        let _ = writeln!(
                            svg,
                            r#"<text class="value" x="{label_x:.1}" y="{:.1}" text-anchor="middle" font-size="11">{}</text>"#,
                            top - 4.0,
                            compact(value)
                        );
                    }
                    None => {
                        let _ = writeln!(
                            svg,
                            r##"<text class="missing" data-series="{}" data-group="{}" x="{label_x:.1}" y="{:.1}" text-anchor="middle" font-size="11" fill="#888888">n/a</text>"##,
                            escape(&series.name),
                            escape(&group.label),
                            base - 4.0
                        );
                    }
                }
            }
        }
    }

    fn legend(&self, svg: &mut String) {
        let mut x = MARGIN_LEFT + 10.0;
        for (at, series) in self.series.iter().enumerate() {
            let colour = PALETTE[at % PALETTE.len()];
            let _ = writeln!(
                svg,
                r#"<rect class="legend-key" x="{x:.1}" y="{:.1}" width="12" height="12" fill="{colour}"/>"#,
                MARGIN_TOP - 16.0
            );
            let _ = writeln!(
                svg,
                r#"<text class="legend" x="{:.1}" y="{:.1}">{}</text>"#,
                x + 17.0,
                MARGIN_TOP - 6.0,
                escape(&series.name)
            );
            x += 40.0 + 8.0 * series.name.chars().count() as f64;
        }
    }
}

/// The plot's geometry: where each group sits and how values map to heights.
#[derive(Debug)]
struct Plot {
    centers: Vec<f64>,
    slot: f64,
    top: f64,
    ticks: Vec<f64>,
}

impl Plot {
    fn of(chart: &BarChart) -> Self {
        let left = MARGIN_LEFT;
        let width = WIDTH - MARGIN_LEFT - MARGIN_RIGHT;
        let count = chart.groups.len().max(1);
        let positions: Vec<f64> = match chart.x_scale {
            XScale::Categories => (0..chart.groups.len())
                .map(|at| (at as f64 + 0.5) / count as f64)
                .collect(),
            XScale::Log10 => log_positions(&chart.groups),
        };
        let slot = match chart.x_scale {
            XScale::Categories => width / count as f64,
            XScale::Log10 => {
                let nearest = positions
                    .windows(2)
                    .map(|pair| (pair[1] - pair[0]).abs())
                    .fold(1.0 / count as f64, f64::min);
                width * nearest.max(0.05)
            }
        };
        let largest = chart
            .series
            .iter()
            .flat_map(|series| series.values.iter().flatten())
            .fold(0.0_f64, |largest, value| largest.max(*value));
        let (top, ticks) = nice_scale(largest * Y_HEADROOM);
        Self {
            centers: positions
                .into_iter()
                .map(|position| left + width * position)
                .collect(),
            slot,
            top,
            ticks,
        }
    }

    /// The y coordinate of `value`.
    fn y(&self, value: f64) -> f64 {
        let height = HEIGHT - MARGIN_TOP - MARGIN_BOTTOM;
        HEIGHT - MARGIN_BOTTOM - height * (value / self.top).min(1.0)
    }
}

/// Group centres in [0, 1] on a log10 axis, with half the nearest gap of room at each end,
/// so the outer groups' bars (a slot as wide as that gap) stay inside the plot.
fn log_positions(groups: &[Group]) -> Vec<f64> {
    let logs: Vec<f64> = groups
        .iter()
        .map(|group| group.at.max(1e-9).log10())
        .collect();
    let low = logs.iter().copied().fold(f64::INFINITY, f64::min);
    let high = logs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let span = high - low;
    if !(span.is_finite() && span > 0.0) {
        return logs.iter().map(|_| 0.5).collect();
    }
    let mut sorted = logs.clone();
    sorted.sort_by(f64::total_cmp);
    let nearest = sorted
        .windows(2)
        .map(|pair| pair[1] - pair[0])
        .filter(|gap| *gap > 0.0)
        .fold(span, f64::min);
    let pad = 0.5 * nearest;
    logs.iter()
        .map(|log| (log - low + pad) / (span + 2.0 * pad))
        .collect()
}

/// A round top at or above `largest` and the ticks from 0 to it (1, 2, 2.5 or 5 × 10^k
/// apart).
fn nice_scale(largest: f64) -> (f64, Vec<f64>) {
    if !(largest.is_finite() && largest > 0.0) {
        return (1.0, vec![0.0, 1.0]);
    }
    let rough = largest / Y_STEPS_MAX;
    let magnitude = 10f64.powf(rough.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .into_iter()
        .map(|factor| factor * magnitude)
        .find(|step| largest / step <= Y_STEPS_MAX)
        .unwrap_or(10.0 * magnitude);
    let steps = (largest / step).ceil().max(1.0) as usize;
    let ticks = (0..=steps).map(|at| at as f64 * step).collect();
    (steps as f64 * step, ticks)
}

/// The font size at which `text` fits the picture's width (with the plot's margins), at
/// most `size`, at least [`FONT_MIN`].
fn fitted_font(text: &str, size: f64) -> f64 {
    // Centred lines: the right margin's room kept on both sides.
    let available = WIDTH - 2.0 * MARGIN_RIGHT;
    let width = text.chars().count() as f64 * GLYPH_ADVANCE_EM * size;
    if width <= available {
        size
    } else {
        (available / (text.chars().count() as f64 * GLYPH_ADVANCE_EM))
            .floor()
            .max(FONT_MIN)
    }
}

/// `value` with a k or M suffix and at most three significant digits (1.35M, 703k, 0.85).
pub fn compact(value: f64) -> String {
    let (scaled, suffix) = if value.abs() >= 1e6 {
        (value / 1e6, "M")
    } else if value.abs() >= 1e3 {
        (value / 1e3, "k")
    } else {
        (value, "")
    };
    let digits = if scaled.abs() >= 100.0 || scaled == scaled.trunc() {
        0
    } else if scaled.abs() >= 10.0 {
        1
    } else {
        2
    };
    let text = format!("{scaled:.digits$}");
    let text = if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        text
    };
    format!("{text}{suffix}")
}

/// `value` in full, for the `data-value` attribute (integers without a fraction).
fn plain(value: f64) -> String {
    if value == value.trunc() && value.abs() < 1e15 {
        format!("{}", value as i64)
    } else {
        format!("{value}")
    }
}

/// Text made safe inside XML content and attribute values.
fn escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for character in text.chars() {
        match character {
            '&' => escaped.push_str("&amp;"),
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            '"' => escaped.push_str("&quot;"),
            '\'' => escaped.push_str("&apos;"),
            other => escaped.push(other),
        }
    }
    escaped
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round_and_cover_the_largest_value() {
        let (top, ticks) = nice_scale(1_354_743.0);
        assert_eq!(top, 1_500_000.0);
        assert_eq!(ticks.len(), 7, "{ticks:?}");
        assert_eq!(ticks[1], 250_000.0);
        let (top, ticks) = nice_scale(14_023.0);
        assert_eq!((top, ticks.len()), (15_000.0, 7));
        let (top, ticks) = nice_scale(36_268.0);
        assert_eq!((top, ticks.len(), ticks[1]), (40_000.0, 5, 10_000.0));
        assert_eq!(nice_scale(0.0), (1.0, vec![0.0, 1.0]));
    }

    #[test]
    fn numbers_are_compact() {
        assert_eq!(compact(1_354_743.0), "1.35M");
        assert_eq!(compact(703_450.0), "703k");
        assert_eq!(compact(36_268.0), "36.3k");
        assert_eq!(compact(1_500_000.0), "1.5M");
        assert_eq!(compact(250_000.0), "250k");
        assert_eq!(compact(0.0), "0");
        assert_eq!(compact(851.0), "851");
        assert_eq!(compact(0.85), "0.85");
    }

    #[test]
    fn log_positions_are_evenly_spaced_for_decades() {
        let groups: Vec<Group> = [1.0, 10.0, 100.0, 1000.0]
            .into_iter()
            .map(|at| Group {
                label: format!("{at}"),
                at,
            })
            .collect();
        let positions = log_positions(&groups);
        let gaps: Vec<f64> = positions.windows(2).map(|pair| pair[1] - pair[0]).collect();
        assert!(
            gaps.iter().all(|gap| (gap - gaps[0]).abs() < 1e-12),
            "{gaps:?}"
        );
        assert!(positions[0] > 0.0 && positions[3] < 1.0);
        // 1, 10, 1000: the gap to 1000 is twice the gap to 10.
        let uneven = log_positions(&[groups[0].clone(), groups[1].clone(), groups[3].clone()]);
        let (first, second) = (uneven[1] - uneven[0], uneven[2] - uneven[1]);
        assert!((second - 2.0 * first).abs() < 1e-12);
    }

    #[test]
    fn three_decades_keep_the_outer_bars_inside_the_plot() {
        let groups: Vec<Group> = [10.0, 100.0, 1000.0]
            .into_iter()
            .map(|at| Group {
                label: format!("{at}"),
                at,
            })
            .collect();
        let positions = log_positions(&groups);
        let gap = positions[1] - positions[0];
        // Bars fill GROUP_FILL of a slot as wide as the gap around each centre.
        assert!(
            positions[0] - gap * GROUP_FILL / 2.0 >= 0.0,
            "{positions:?}"
        );
        assert!(
            positions[2] + gap * GROUP_FILL / 2.0 <= 1.0,
            "{positions:?}"
        );
    }

    #[test]
    fn a_long_subtitle_gets_a_smaller_font_and_a_short_one_keeps_its_own() {
        assert_eq!(fitted_font("commit abc1234, AMD EPYC", SUBTITLE_FONT), 13.0);
        let long = "x".repeat(130);
        let size = fitted_font(&long, SUBTITLE_FONT);
        assert!((FONT_MIN..SUBTITLE_FONT).contains(&size), "{size}");
        assert!(130.0 * GLYPH_ADVANCE_EM * size <= WIDTH - 2.0 * MARGIN_RIGHT);
        assert_eq!(fitted_font(&"x".repeat(1000), SUBTITLE_FONT), FONT_MIN);
    }

    #[test]
    fn text_is_escaped() {
        assert_eq!(
            escape(r#"a<b & "c">'d'"#),
            "a&lt;b &amp; &quot;c&quot;&gt;&apos;d&apos;"
        );
    }
}
