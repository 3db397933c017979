//! Rounding of the figures the reports print, in a module of its own so that what measures
//! a figure (`thread_cpu`) and what prints it (`report`) need not import each other.

/// `value` rounded to `digits` decimals (for the JSON's rates).
pub fn round(value: f64, digits: i32) -> f64 {
    let scale = 10f64.powi(digits);
    (value * scale).round() / scale
}
