//! Lower-case hex rendering for error messages. Owns nothing else; never allocates.

use core::fmt;

/// Displays bytes as lower-case hex without a prefix.
pub(crate) struct Hex<'a>(pub(crate) &'a [u8]);

impl fmt::Display for Hex<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for byte in self.0 {
            write!(f, "{byte:02x}")?;
        }
        Ok(())
    }
}
