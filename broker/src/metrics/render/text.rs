//! The Prometheus text exposition format 0.0.4, line by line: a family's `# HELP` and `# TYPE`
//! lines, one sample with its labels, and the escaping both need.
//!
//! Owns: escaping of help texts and label values, and the characters a metric name may hold.
//! Never does: know a metric; every family is named by its renderer.

use std::fmt::Write as _;

/// Writes the `# HELP` and `# TYPE` lines of a family.
pub(super) fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    out.push_str("# HELP ");
    out.push_str(name);
    out.push(' ');
    for character in help.chars() {
        match character {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            other => out.push(other),
        }
    }
    out.push('\n');
    out.push_str("# TYPE ");
    out.push_str(name);
    out.push(' ');
    out.push_str(kind);
    out.push('\n');
}

/// Writes one sample line with its labels (values escaped as the format requires).
pub(super) fn line(out: &mut String, name: &str, labels: &[(&str, &str)], value: &str) {
    out.push_str(name);
    if !labels.is_empty() {
        out.push('{');
        for (index, (label, label_value)) in labels.iter().enumerate() {
            if index > 0 {
                out.push(',');
            }
            out.push_str(label);
            out.push_str("=\"");
            for character in label_value.chars() {
                match character {
                    '\\' => out.push_str("\\\\"),
                    '"' => out.push_str("\\\""),
                    '\n' => out.push_str("\\n"),
                    other => out.push(other),
                }
            }
            out.push('"');
        }
        out.push('}');
    }
    // Writing to a String cannot fail.
    let _ = writeln!(out, " {value}");
}

/// A metric name made of the characters Prometheus allows (`[a-zA-Z0-9_:]`); anything else
/// becomes `_`. Names come from code, so this only guards against a typo breaking a scrape.
pub(super) fn sanitize_name(name: &str) -> String {
    name.chars()
        .map(|character| {
            if character.is_ascii_alphanumeric() || character == '_' || character == ':' {
                character
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_and_names_are_escaped() {
        let mut out = String::new();
        line(&mut out, "m", &[("l", "a\"b\\c\nd")], "1");
        assert_eq!(out, "m{l=\"a\\\"b\\\\c\\nd\"} 1\n");
        assert_eq!(sanitize_name("a-b.c:d_e"), "a_b_c:d_e");
    }
}
