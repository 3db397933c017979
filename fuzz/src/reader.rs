//! A reader over fuzz input that never fails: a field past the end of the input reads as
//! zeros, so every byte string is some input and the fuzzer wastes no executions on
//! rejected layouts.
//!
//! Owns: [`Reader`]. Never: interprets what it reads (the input layouts do).

/// Reads fixed-size fields off the front of the input, then hands out the rest.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    /// A reader at the start of `input`.
    pub fn new(input: &'a [u8]) -> Self {
        Self { rest: input }
    }

    /// The next `N` bytes, zero-filled where the input has ended.
    pub fn array<const N: usize>(&mut self) -> [u8; N] {
        let mut field = [0u8; N];
        let taken = self.rest.len().min(N);
        field[..taken].copy_from_slice(&self.rest[..taken]);
        self.rest = &self.rest[taken..];
        field
    }

    /// The next byte, or 0.
    pub fn byte(&mut self) -> u8 {
        let [byte] = self.array::<1>();
        byte
    }

    /// The next two bytes as a little-endian u16.
    pub fn u16_le(&mut self) -> u16 {
        u16::from_le_bytes(self.array())
    }

    /// The next eight bytes as a little-endian u64.
    pub fn u64_le(&mut self) -> u64 {
        u64::from_le_bytes(self.array())
    }

    /// Everything not read yet.
    pub fn rest(self) -> &'a [u8] {
        self.rest
    }
}
