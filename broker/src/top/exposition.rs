//! The Prometheus text exposition format (0.0.4), read back: what `/metrics` answers.
//!
//! Owns: [`Exposition`] (every sample of one scrape as a name, its labels and a value) and
//! its parser, plus the lookups the scrape model needs (one value, every series of a family).
//! Never does: I/O, or interpret what a family means (that is `scrape`).
//!
//! `# HELP` and `# TYPE` lines and blank lines are skipped; a sample's optional timestamp is
//! ignored. A malformed line is an error naming its line number, never a guess.

use std::collections::HashMap;

/// A sample's labels, `(name, value)` in the order written.
pub type Labels = Vec<(String, String)>;

/// One sample: `name{labels} value`.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    /// The metric name, e.g. `bps_core_busy_seconds_total`.
    pub name: String,
    /// The labels.
    pub labels: Labels,
    /// The sample's value.
    pub value: f64,
}

impl Series {
    /// The value of label `name`, if the series has it.
    #[must_use]
    pub fn label(&self, name: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(label, _)| label == name)
            .map(|(_, value)| value.as_str())
    }
}

/// Every sample of one exposition, grouped by metric name.
#[derive(Clone, Debug, Default)]
pub struct Exposition {
    by_name: HashMap<String, Vec<Series>>,
}

impl Exposition {
    /// Parses a whole exposition.
    ///
    /// # Errors
    /// A line that is neither a comment, blank, nor a well-formed sample, with its number.
    pub fn parse(text: &str) -> Result<Exposition, String> {
        let mut by_name: HashMap<String, Vec<Series>> = HashMap::new();
        for (index, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let series = parse_sample(line)
                .map_err(|problem| format!("metrics line {}: {problem}: {line:?}", index + 1))?;
            by_name.entry(series.name.clone()).or_default().push(series);
        }
        Ok(Exposition { by_name })
    }

    /// Every series of metric `name` (empty when the scrape has none).
    #[must_use]
    pub fn family(&self, name: &str) -> &[Series] {
        self.by_name.get(name).map_or(&[], Vec::as_slice)
    }

    /// The value of the series of `name` without labels, if present.
    #[must_use]
    pub fn value(&self, name: &str) -> Option<f64> {
        self.family(name)
            .iter()
            .find(|series| series.labels.is_empty())
            .map(|series| series.value)
    }

    /// The label `label` of the first series of `name` (e.g. the driver of
    /// `bps_driver_info{driver="io_uring"}`).
    #[must_use]
    pub fn label_of(&self, name: &str, label: &str) -> Option<&str> {
        self.family(name)
            .iter()
            .find_map(|series| series.label(label))
    }
}

/// One sample line (already trimmed, not a comment).
fn parse_sample(line: &str) -> Result<Series, String> {
    let name_end = line
        .find(|character: char| character == '{' || character.is_whitespace())
        .ok_or("no value")?;
    let name = &line[..name_end];
    if !valid_name(name) {
        return Err("bad metric name".to_owned());
    }
    let mut rest = &line[name_end..];
    let mut labels = Vec::new();
    if let Some(after_brace) = rest.strip_prefix('{') {
        let (parsed, after_labels) = parse_labels(after_brace)?;
        labels = parsed;
        rest = after_labels;
    }
    let mut fields = rest.split_whitespace();
    let value = fields.next().ok_or("no value")?;
    let value: f64 = value.parse().map_err(|_| format!("bad value {value:?}"))?;
    // An optional timestamp (integer milliseconds) may follow; nothing else may.
    if let Some(timestamp) = fields.next()
        && timestamp.parse::<i64>().is_err()
    {
        return Err(format!("bad timestamp {timestamp:?}"));
    }
    if fields.next().is_some() {
        return Err("text after the timestamp".to_owned());
    }
    Ok(Series {
        name: name.to_owned(),
        labels,
        value,
    })
}

/// `[a-zA-Z_:][a-zA-Z0-9_:]*`.
fn valid_name(name: &str) -> bool {
    let mut characters = name.chars();
    characters
        .next()
        .is_some_and(|first| first.is_ascii_alphabetic() || first == '_' || first == ':')
        && characters.all(|character| {
            character.is_ascii_alphanumeric() || character == '_' || character == ':'
        })
}

/// The labels after `{` up to the closing `}`; returns them and what follows the brace.
fn parse_labels(mut text: &str) -> Result<(Labels, &str), String> {
    let mut labels = Vec::new();
    loop {
        text = text.trim_start();
        if let Some(rest) = text.strip_prefix('}') {
            return Ok((labels, rest));
        }
        let (name, after_name) = text.split_once('=').ok_or("a label without a value")?;
        let name = name.trim();
        if !valid_name(name) || name.contains(':') {
            return Err(format!("bad label name {name:?}"));
        }
        let quoted = after_name
            .trim_start()
            .strip_prefix('"')
            .ok_or("a label value without quotes")?;
        let (value, after_value) = unescape_until_quote(quoted)?;
        labels.push((name.to_owned(), value));
        text = after_value.trim_start();
        if let Some(rest) = text.strip_prefix(',') {
            text = rest;
        } else if !text.starts_with('}') {
            return Err("labels not separated by a comma".to_owned());
        }
    }
}

/// A label value up to its closing quote, with `\\`, `\"` and `\n` unescaped; returns it
/// and what follows the quote.
fn unescape_until_quote(text: &str) -> Result<(String, &str), String> {
    let mut value = String::new();
    let mut characters = text.char_indices();
    while let Some((at, character)) = characters.next() {
        match character {
            '"' => return Ok((value, &text[at + 1..])),
            '\\' => match characters.next() {
                Some((_, 'n')) => value.push('\n'),
                Some((_, escaped @ ('\\' | '"'))) => value.push(escaped),
                _ => return Err("a bad escape in a label value".to_owned()),
            },
            other => value.push(other),
        }
    }
    Err("an unterminated label value".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_samples_with_and_without_labels() {
        let text = "# HELP bps_cores Cores.\n# TYPE bps_cores gauge\nbps_cores 2\n\n\
                    bps_core_busy_seconds_total{core=\"0\"} 1.250000\n\
                    bps_core_busy_seconds_total{core=\"1\"} 0.5 1700000000000\n\
                    bps_driver_info{driver=\"io_uring\"} 1\n";
        let exposition = Exposition::parse(text).expect("parses");
        assert_eq!(exposition.value("bps_cores"), Some(2.0));
        let busy = exposition.family("bps_core_busy_seconds_total");
        assert_eq!(busy.len(), 2);
        assert_eq!(busy[0].label("core"), Some("0"));
        assert!((busy[0].value - 1.25).abs() < 1e-9);
        assert_eq!(busy[1].value, 0.5);
        assert_eq!(
            exposition.label_of("bps_driver_info", "driver"),
            Some("io_uring")
        );
        assert_eq!(exposition.value("bps_core_busy_seconds_total"), None);
        assert!(exposition.family("absent").is_empty());
    }

    #[test]
    fn unescapes_label_values_and_takes_special_values() {
        let text = "m{a=\"x\\\"y\",b=\"back\\\\slash\\nnext\", c = \"}\"} +Inf\nn NaN\n";
        let exposition = Exposition::parse(text).expect("parses");
        let series = &exposition.family("m")[0];
        assert_eq!(series.label("a"), Some("x\"y"));
        assert_eq!(series.label("b"), Some("back\\slash\nnext"));
        assert_eq!(series.label("c"), Some("}"));
        assert_eq!(series.value, f64::INFINITY);
        assert!(exposition.value("n").is_some_and(f64::is_nan));
    }

    #[test]
    fn malformed_lines_are_errors_naming_the_line() {
        for (text, expected) in [
            ("ok 1\nbroken\n", "metrics line 2: no value"),
            ("m{a=\"1\" 2\n", "labels not separated"),
            ("m{a=1} 2\n", "without quotes"),
            ("m{a=\"1} 2\n", "unterminated"),
            ("m{a=\"\\t\"} 2\n", "bad escape"),
            ("m one\n", "bad value"),
            ("m 1 later\n", "bad timestamp"),
            ("m 1 2 3\n", "after the timestamp"),
            ("9m 1\n", "bad metric name"),
            ("m{9=\"1\"} 1\n", "bad label name"),
        ] {
            let error = Exposition::parse(text).expect_err(text);
            assert!(error.contains(expected), "{text:?}: {error}");
        }
    }
}
