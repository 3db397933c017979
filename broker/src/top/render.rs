//! The screen: a [`View`] as lines of text for a given width and height.
//!
//! Owns: the layout (header, totals, memory, the per-core table, the cohort table, the
//! footer), number formatting, and fitting the lines to the screen.
//! Never does: I/O or terminal escapes; the terminal loop writes the lines it gets.
//!
//! Every line is at most `width` characters (longer ones are cut); with a height, the cohort
//! table takes the rows left and says how many cohorts did not fit.

use std::time::Duration;

use super::model::{CohortRow, CoreRow, SortKey, View};
use super::scrape::CohortSource;

/// Hex digits of a topic shown in the cohort table: enough to tell topics apart by eye.
const TOPIC_HEX_SHOWN: usize = 10;

/// What one screen shows besides the view.
#[derive(Clone, Debug)]
pub struct Frame<'a> {
    /// The admin address watched.
    pub admin: &'a str,
    /// The latest view; `None` before the first scrape succeeded.
    pub view: Option<&'a View>,
    /// The cohort order.
    pub sort: SortKey,
    /// The refresh interval.
    pub interval: Duration,
    /// A problem to show (the broker down, a scrape failed), if any.
    pub problem: Option<&'a str>,
    /// The screen's width in characters.
    pub width: usize,
    /// The screen's height in lines; `None`: as many lines as the view needs.
    pub height: Option<usize>,
    /// Whether to show the keys (only an interactive screen takes them).
    pub keys: bool,
}

/// The lines of one screen.
#[must_use]
pub fn render(frame: &Frame<'_>) -> Vec<String> {
    let mut lines = vec![header(frame)];
    if let Some(problem) = frame.problem {
        lines.push(format!("!! {problem}"));
    }
    let Some(view) = frame.view else {
        if frame.problem.is_none() {
            lines.push("waiting for the first scrape ...".to_owned());
        }
        return fit(lines, frame, Vec::new());
    };
    lines.push(totals(view));
    lines.push(memory(view));
    if let CohortSource::Metrics(reason) = &view.cohort_source {
        lines.push(format!(
            "cohorts from the /metrics series (/cohortz: {reason})"
        ));
    }
    lines.push(String::new());
    lines.push(format!(
        "{:>4}  {:>5}  {:>5}  {:>7}  {:>7}  {:>9}  {:>9}  {:>8}  {:>9}",
        "CORE",
        "BUSY%",
        "CONNS",
        "IN/S",
        "OUT/S",
        "IN-FLIGHT",
        "VERIFYING",
        "VERIFY-Q",
        "HEARTBEAT"
    ));
    lines.extend(view.cores.iter().map(core_line));
    lines.push(String::new());
    lines.push(cohort_header(frame.sort));
    let footer = if frame.keys {
        vec![footer(frame.sort)]
    } else {
        Vec::new()
    };
    let rows_left = frame
        .height
        .map(|height| height.saturating_sub(lines.len() + footer.len()));
    let shown = match rows_left {
        Some(left) if left < view.cohorts.len() => left.saturating_sub(1),
        _ => view.cohorts.len(),
    };
    lines.extend(view.cohorts.iter().take(shown).map(cohort_line));
    if shown < view.cohorts.len() {
        lines.push(format!("... {} more", view.cohorts.len() - shown));
    }
    if view.cohorts.is_empty() {
        lines.push("(no live cohorts)".to_owned());
    }
    fit(lines, frame, footer)
}

/// Cuts every line to the width and the whole to the height, the footer on the last line.
fn fit(mut lines: Vec<String>, frame: &Frame<'_>, footer: Vec<String>) -> Vec<String> {
    if let Some(height) = frame.height {
        let room = height.saturating_sub(footer.len());
        lines.truncate(room);
        if frame.keys {
            lines.resize(room, String::new());
        }
    }
    lines.extend(footer);
    lines
        .into_iter()
        .map(|line| line.chars().take(frame.width).collect())
        .collect()
}

fn header(frame: &Frame<'_>) -> String {
    let mut line = format!("bps-broker top  admin {}", frame.admin);
    if let Some(view) = frame.view {
        line.push_str(&format!(
            "  driver {}  cores {}  {}",
            view.driver.as_deref().unwrap_or("?"),
            view.cores.len(),
            match view.ready {
                Some(true) => "READY",
                Some(false) => "DRAINING",
                None => "ready ?",
            }
        ));
    }
    line.push_str(&format!("  every {}", interval(frame.interval)));
    line
}

fn totals(view: &View) -> String {
    format!(
        "connections {}  cohorts {}  deliveries/s {}  publications/s {}  resets/s {}",
        count(view.connections_open),
        count(view.cohorts_live),
        rate(view.deliveries_per_s),
        rate(view.publications_per_s),
        rate(view.resets_per_s),
    )
}

fn memory(view: &View) -> String {
    format!(
        "memory  worst case {} of budget {}{}  frames {} of {}{}  rss {}",
        bytes(view.memory_worst_case_bytes),
        bytes(view.memory_budget_bytes),
        percent_of(view.memory_worst_case_bytes, view.memory_budget_bytes),
        bytes(view.frame_memory_bytes),
        bytes(view.frame_memory_bytes_max),
        percent_of(view.frame_memory_bytes, view.frame_memory_bytes_max),
        bytes(view.rss_bytes),
    )
}

fn core_line(row: &CoreRow) -> String {
    format!(
        "{:>4}  {:>5}  {:>5}  {:>7}  {:>7}  {:>9}  {:>9}  {:>8}  {:>9}",
        row.core,
        row.busy_percent
            .map_or_else(|| "-".to_owned(), |busy| format!("{busy:.1}")),
        count(Some(row.connections_open)),
        rate(row.frames_in_per_s),
        rate(row.frames_out_per_s),
        count(Some(row.frames_in_flight)),
        count(Some(row.verifications_in_flight)),
        count(Some(row.verify_queue_depth)),
        row.heartbeat_age_ms
            .map_or_else(|| "-".to_owned(), |age| format!("{}ms", count(Some(age)))),
    )
}

fn cohort_header(sort: SortKey) -> String {
    // The sorted column's title carries a `*`.
    let title = |name: &str, column: SortKey| {
        if column == sort {
            format!("*{name}")
        } else {
            name.to_owned()
        }
    };
    format!(
        "{:<16}  {:<12}  {:<10}  {:>6}  {:>9}  {:>8}  {:>7}",
        "COHORT",
        "TOPIC",
        "BINDING",
        title("SUBS", SortKey::Subscribers),
        title("DELIV/S", SortKey::Deliveries),
        title("PUB/S", SortKey::Publications),
        title("RESETS", SortKey::Resets),
    )
}

fn cohort_line(row: &CohortRow) -> String {
    let topic = row.topic.as_deref().map_or_else(
        || "-".to_owned(),
        |topic| {
            let shown: String = topic.chars().take(TOPIC_HEX_SHOWN).collect();
            if shown.len() < topic.len() {
                format!("{shown}..")
            } else {
                shown
            }
        },
    );
    format!(
        "{:<16}  {:<12}  {:<10}  {:>6}  {:>9}  {:>8}  {:>7}",
        row.id,
        topic,
        row.binding.to_ascii_lowercase(),
        count(Some(row.subscribers)),
        rate(row.deliveries_per_s),
        rate(row.publications_per_s),
        count(Some(row.resets)),
    )
}

fn footer(sort: SortKey) -> String {
    let keys: Vec<String> = SortKey::ALL
        .iter()
        .map(|(key, order)| format!("{key} {}", order.name()))
        .collect();
    format!("sort: {}  keys: {}  q quit", sort.name(), keys.join("  "))
}

/// A whole number, with k/M/G beyond four digits.
fn count(value: Option<f64>) -> String {
    match value {
        None => "-".to_owned(),
        Some(value) if value.abs() < 10_000.0 => format!("{value:.0}"),
        Some(value) => scaled(value),
    }
}

/// A per-second rate: one decimal below a thousand, then k/M/G.
fn rate(value: Option<f64>) -> String {
    match value {
        None => "-".to_owned(),
        Some(value) if value.abs() < 1_000.0 => format!("{value:.1}"),
        Some(value) => scaled(value),
    }
}

fn scaled(value: f64) -> String {
    let mut scaled = value;
    for unit in ["k", "M", "G"] {
        scaled /= 1_000.0;
        if scaled.abs() < 1_000.0 {
            return format!("{scaled:.1}{unit}");
        }
    }
    format!("{scaled:.1}T")
}

/// Bytes in binary units.
fn bytes(value: Option<f64>) -> String {
    let Some(mut value) = value else {
        return "-".to_owned();
    };
    if value < 1024.0 {
        return format!("{value:.0} B");
    }
    for unit in ["KiB", "MiB", "GiB"] {
        value /= 1024.0;
        if value < 1024.0 {
            return format!("{value:.1} {unit}");
        }
    }
    format!("{:.1} TiB", value / 1024.0)
}

/// ` (NN%)` of part over whole, or nothing when either is absent or the whole is zero.
fn percent_of(part: Option<f64>, whole: Option<f64>) -> String {
    match (part, whole) {
        (Some(part), Some(whole)) if whole > 0.0 => format!(" ({:.0}%)", part / whole * 100.0),
        _ => String::new(),
    }
}

fn interval(interval: Duration) -> String {
    if interval.subsec_millis() == 0 {
        format!("{}s", interval.as_secs())
    } else {
        format!("{}ms", interval.as_millis())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::super::scrape::Scrape;
    use super::super::scrape::tests::{cohortz_text, metrics_text};
    use super::*;

    fn view(sort: SortKey) -> View {
        let start = Instant::now();
        let first = Scrape::read(
            start,
            &metrics_text([1.0, 0.5], 100, 2),
            Ok(&cohortz_text([100, 0])),
        )
        .expect("reads");
        let second = Scrape::read(
            start + Duration::from_secs(2),
            &metrics_text([2.5, 0.5], 24_100, 2),
            Ok(&cohortz_text([24_100, 20])),
        )
        .expect("reads");
        View::new(&second, Some(&first), sort)
    }

    fn frame<'a>(view: Option<&'a View>, width: usize, height: Option<usize>) -> Frame<'a> {
        Frame {
            admin: "127.0.0.1:1638",
            view,
            sort: SortKey::Deliveries,
            interval: Duration::from_secs(1),
            problem: None,
            width,
            height,
            keys: true,
        }
    }

    #[test]
    fn a_full_screen_shows_header_totals_cores_and_sorted_cohorts() {
        let view = view(SortKey::Deliveries);
        let lines = render(&frame(Some(&view), 120, Some(30)));
        assert_eq!(lines.len(), 30);
        assert_eq!(
            lines[0],
            "bps-broker top  admin 127.0.0.1:1638  driver epoll  cores 2  READY  every 1s"
        );
        assert_eq!(
            lines[1],
            "connections 5  cohorts 1  deliveries/s 12.0k  publications/s 0.0  resets/s 0.0"
        );
        assert_eq!(
            lines[2],
            "memory  worst case 512.0 MiB of budget 1.0 GiB (50%)  frames 1.0 MiB of 64.0 MiB (2%)  rss 40.0 MiB"
        );
        let text = lines.join("\n");
        assert!(
            text.contains(
                "   0   75.0      3      0.0    12.0k          4          2         6        1ms"
            ),
            "{text}"
        );
        assert!(text.contains("   1    0.0      2"), "{text}");
        assert!(text.contains("*DELIV/S"), "{text}");
        let first_cohort = lines
            .iter()
            .position(|line| line.starts_with("00112233aabbccdd"))
            .expect("first cohort shown");
        assert_eq!(
            lines[first_cohort],
            "00112233aabbccdd  aaaaaaaaaa..  feed_topic       4      12.0k       0.0        2"
        );
        assert!(lines[first_cohort + 1].starts_with("ffeeddccbbaa9988"));
        assert!(lines[29].starts_with("sort: deliveries/s  keys: d deliveries/s"));
    }

    #[test]
    fn the_sorted_column_is_marked_and_lines_fit_the_width() {
        let view = view(SortKey::Subscribers);
        let mut subscribers = frame(Some(&view), 40, Some(30));
        subscribers.sort = SortKey::Subscribers;
        let lines = render(&subscribers);
        assert!(lines.iter().all(|line| line.chars().count() <= 40));
        let wide = render(&Frame {
            width: 200,
            ..subscribers
        });
        let text = wide.join("\n");
        assert!(
            text.contains("*SUBS") && !text.contains("*DELIV/S"),
            "{text}"
        );
        assert!(text.contains("sort: subscribers"), "{text}");
        let first_cohort = wide
            .iter()
            .position(|line| line.starts_with("ffeeddccbbaa9988"))
            .expect("shown");
        assert!(wide[first_cohort + 1].starts_with("00112233aabbccdd"));
    }

    #[test]
    fn a_short_screen_counts_the_cohorts_left_out() {
        let view = view(SortKey::Deliveries);
        // Header 3 + blank + 3 core lines + blank + cohort header = 9; footer 1.
        let lines = render(&frame(Some(&view), 120, Some(11)));
        assert_eq!(lines.len(), 11);
        assert_eq!(lines[9], "... 2 more");
        let lines = render(&frame(Some(&view), 120, Some(12)));
        assert!(lines[9].starts_with("00112233aabbccdd"));
        assert!(lines[10].starts_with("ffeeddccbbaa9988"));
    }

    #[test]
    fn a_broker_that_is_down_shows_the_problem_and_once_has_no_footer() {
        let mut down = frame(None, 120, Some(10));
        down.problem = Some("cannot connect to 127.0.0.1:1638: refused; retrying every 1s");
        let lines = render(&down);
        assert_eq!(lines.len(), 10);
        assert_eq!(
            lines[1],
            "!! cannot connect to 127.0.0.1:1638: refused; retrying every 1s"
        );
        let view = view(SortKey::Deliveries);
        let once = render(&Frame {
            keys: false,
            height: None,
            ..frame(Some(&view), 120, None)
        });
        assert!(
            once.last()
                .is_some_and(|line| line.starts_with("ffeeddccbbaa9988"))
        );
        assert!(!once.iter().any(|line| line.starts_with("sort:")));
    }

    #[test]
    fn numbers_are_short() {
        assert_eq!(count(Some(9_999.0)), "9999");
        assert_eq!(count(Some(12_345.0)), "12.3k");
        assert_eq!(rate(Some(999.94)), "999.9");
        assert_eq!(rate(Some(2_500_000.0)), "2.5M");
        assert_eq!(bytes(Some(512.0)), "512 B");
        assert_eq!(bytes(Some(1536.0)), "1.5 KiB");
        assert_eq!(interval(Duration::from_millis(250)), "250ms");
    }
}
