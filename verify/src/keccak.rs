//! Multi-lane keccak256 of 64-byte messages: the BMT's pair hashes, several at a time.
//!
//! Owns: [`Lanes`] (which keccak-f[1600] implementation to use, chosen once per process
//! by CPU feature detection) and [`hash_pairs`], which hashes a run of 64-byte messages
//! with it. The BMT ([`crate::bmt`]) is the only user.
//!
//! Never: hashes a message of another length (the 64-byte padding is fixed below), or
//! runs an instruction the CPU lacks: the SIMD functions are reachable only through
//! [`hash_pairs`], which asserts [`Lanes::is_available`] first.
//!
//! Keccak256 of a 64-byte message is one keccak-f[1600] permutation: the rate is 136 bytes
//! (17 words), so the message fills words 0..8, the padding byte `0x01` goes into byte 64
//! (word 8, lowest byte) and `0x80` into byte 135 (word 16, highest byte), everything else
//! is zero; the digest is words 0..4, little-endian. A multi-lane implementation keeps one
//! 64-bit lane per message in each SIMD register (`__m256i`: 4 messages with AVX2,
//! `__m512i`: 8 with AVX-512F) and runs the 24 rounds on all of them at once. AVX-512F has
//! a rotate (`vprolq`) and three-input logic (`vpternlogq`: 3-way XOR for theta, the whole
//! `a ^ (!b & c)` of chi in one instruction); AVX2 builds rotations from two shifts and an
//! OR (a byte shuffle for the rotations by 8 and 56). The round body is written once, in
//! [`keccak_rounds!`], and instantiated per instruction set.
//!
//! Safety: the permutations are `#[target_feature]` functions (safe inside, `unsafe` to
//! call from code not compiled for the feature); the group drivers that call them are
//! `unsafe fn`s whose contract is "the CPU has the feature". [`hash_pairs`], the only
//! caller, asserts [`Lanes::is_available`] first, which reads
//! `is_x86_feature_detected!` (cached in a `OnceLock`): the instructions exist on this
//! CPU, which is the whole of the contract. Memory is touched only through references and
//! fixed-size arrays; the one raw-pointer use (unaligned SIMD loads and stores of local
//! `[u64; LANES]` arrays) is in bounds by the array types.

use std::sync::OnceLock;

use crate::wire::keccak256;

/// Bytes of one BMT pair message (two 32-byte child hashes).
pub const PAIR_SIZE: usize = 64;
/// Bytes of one keccak256 digest.
pub const DIGEST_SIZE: usize = 32;

/// A keccak-f[1600] implementation: how many messages one permutation call hashes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Lanes {
    /// One message at a time (tiny-keccak, the reference); every CPU.
    Scalar,
    /// Four messages per call in `__m256i` registers; x86_64 with AVX2.
    Avx2,
    /// Eight messages per call in `__m512i` registers, a short rest in one padded call;
    /// x86_64 with AVX-512F.
    Avx512,
}

impl Lanes {
    /// Every variant, narrowest first.
    pub const ALL: [Lanes; 3] = [Lanes::Scalar, Lanes::Avx2, Lanes::Avx512];

    /// Messages hashed per permutation call.
    pub const fn width(self) -> usize {
        match self {
            Lanes::Scalar => 1,
            Lanes::Avx2 => 4,
            Lanes::Avx512 => 8,
        }
    }

    /// Whether this CPU runs this implementation (detected once per process).
    pub fn is_available(self) -> bool {
        let features = detected();
        match self {
            Lanes::Scalar => true,
            Lanes::Avx2 => features.avx2,
            Lanes::Avx512 => features.avx512f,
        }
    }

    /// The widest implementation this CPU runs; what [`crate::bmt_root`] uses.
    pub fn fastest() -> Lanes {
        static FASTEST: OnceLock<Lanes> = OnceLock::new();
        *FASTEST.get_or_init(|| {
            Lanes::ALL
                .into_iter()
                .rev()
                .find(|lanes| lanes.is_available())
                .unwrap_or(Lanes::Scalar)
        })
    }

    /// The implementations this CPU runs, narrowest first (tests and benches try each).
    pub fn available() -> impl Iterator<Item = Lanes> {
        Lanes::ALL.into_iter().filter(|lanes| lanes.is_available())
    }
}

impl core::fmt::Display for Lanes {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            Lanes::Scalar => "scalar",
            Lanes::Avx2 => "avx2",
            Lanes::Avx512 => "avx512",
        })
    }
}

#[derive(Clone, Copy, Debug)]
struct Features {
    avx2: bool,
    avx512f: bool,
}

fn detected() -> Features {
    static FEATURES: OnceLock<Features> = OnceLock::new();
    *FEATURES.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        {
            Features {
                avx2: std::arch::is_x86_feature_detected!("avx2"),
                avx512f: std::arch::is_x86_feature_detected!("avx512f"),
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            Features {
                avx2: false,
                avx512f: false,
            }
        }
    })
}

/// Hashes `input.len() / 64` messages of 64 bytes with `lanes`, writing digest `i` to
/// `output[32i..32i + 32]`. A rest narrower than a full call goes through one call padded
/// with zero messages where that is cheaper than hashing it one by one, else through the
/// scalar code.
///
/// # Panics
/// If `lanes` is not available on this CPU, if `input` is not a whole number of messages,
/// or if `output` is not 32 bytes per message: all caller bugs.
pub fn hash_pairs(lanes: Lanes, input: &[u8], output: &mut [u8]) {
    assert!(
        lanes.is_available(),
        "keccak lanes {lanes} are not available on this CPU"
    );
    assert!(
        input.len().is_multiple_of(PAIR_SIZE)
            && output.len() == input.len() / PAIR_SIZE * DIGEST_SIZE,
        "hash_pairs: {} input bytes and {} output bytes are not whole 64-byte messages and \
         their 32-byte digests",
        input.len(),
        output.len()
    );
    let mut inputs = input.chunks_exact(PAIR_SIZE);
    let mut outputs = output.chunks_exact_mut(DIGEST_SIZE);
    #[cfg(target_arch = "x86_64")]
    match lanes {
        // SAFETY: asserted above: `Lanes::Avx512.is_available()`, so
        // `is_x86_feature_detected!("avx512f")` held, as `hash_avx512` requires.
        Lanes::Avx512 => unsafe { simd::hash_avx512(&mut inputs, &mut outputs) },
        // SAFETY: asserted above: `Lanes::Avx2.is_available()`, so
        // `is_x86_feature_detected!("avx2")` held, as `hash_avx2` requires.
        Lanes::Avx2 => unsafe { simd::hash_avx2(&mut inputs, &mut outputs) },
        Lanes::Scalar => {}
    }
    for (message, digest) in inputs.zip(outputs) {
        digest.copy_from_slice(&keccak256(message));
    }
}

/// keccak-f[1600] round constants (iota).
const ROUND_CONSTANTS: [u64; 24] = [
    0x0000_0000_0000_0001,
    0x0000_0000_0000_8082,
    0x8000_0000_0000_808a,
    0x8000_0000_8000_8000,
    0x0000_0000_0000_808b,
    0x0000_0000_8000_0001,
    0x8000_0000_8000_8081,
    0x8000_0000_0000_8009,
    0x0000_0000_0000_008a,
    0x0000_0000_0000_0088,
    0x0000_0000_8000_8009,
    0x0000_0000_8000_000a,
    0x0000_0000_8000_808b,
    0x8000_0000_0000_008b,
    0x8000_0000_0000_8089,
    0x8000_0000_0000_8003,
    0x8000_0000_0000_8002,
    0x8000_0000_0000_0080,
    0x0000_0000_0000_800a,
    0x8000_0000_8000_000a,
    0x8000_0000_8000_8081,
    0x8000_0000_0000_8080,
    0x0000_0000_8000_0001,
    0x8000_0000_8000_8008,
];

/// Words of a 64-byte message.
const MESSAGE_WORDS: usize = PAIR_SIZE / 8;
/// Word holding padding byte 64 (`0x01`, its lowest byte).
const PAD_FIRST_WORD: usize = 8;
/// Word holding padding byte 135 (`0x80`, its highest byte): the last word of the rate.
const PAD_LAST_WORD: usize = 16;
/// Words of the digest.
const DIGEST_WORDS: usize = DIGEST_SIZE / 8;
const _: () = assert!(PAD_FIRST_WORD == MESSAGE_WORDS && (PAD_LAST_WORD + 1) * 8 == 136);

/// The 24 rounds of keccak-f[1600] on the state `$a: [V; 25]` (lane `x + 5y`), for any
/// lane type `V` given its operations as macros: `$xor2!(a, b)`, `$xor5!(a, b, c, d, e)`,
/// `$rol!(v, literal)`, `$chi!(a, b, c) = a ^ (!b & c)` and `$splat!(u64)`. Theta, rho and
/// pi are fused (each lane is XORed with its column's D and rotated straight into its
/// pi position), then chi and iota.
macro_rules! keccak_rounds {
    ($a:ident, $xor2:ident, $xor5:ident, $rol:ident, $chi:ident, $splat:ident) => {
        for round_constant in ROUND_CONSTANTS {
            let c0 = $xor5!($a[0], $a[5], $a[10], $a[15], $a[20]);
            let c1 = $xor5!($a[1], $a[6], $a[11], $a[16], $a[21]);
            let c2 = $xor5!($a[2], $a[7], $a[12], $a[17], $a[22]);
            let c3 = $xor5!($a[3], $a[8], $a[13], $a[18], $a[23]);
            let c4 = $xor5!($a[4], $a[9], $a[14], $a[19], $a[24]);
            let d0 = $xor2!(c4, $rol!(c1, 1));
            let d1 = $xor2!(c0, $rol!(c2, 1));
            let d2 = $xor2!(c1, $rol!(c3, 1));
            let d3 = $xor2!(c2, $rol!(c4, 1));
            let d4 = $xor2!(c3, $rol!(c0, 1));
            let b0 = $xor2!($a[0], d0);
            let b1 = $rol!($xor2!($a[6], d1), 44);
            let b2 = $rol!($xor2!($a[12], d2), 43);
            let b3 = $rol!($xor2!($a[18], d3), 21);
            let b4 = $rol!($xor2!($a[24], d4), 14);
            let b5 = $rol!($xor2!($a[3], d3), 28);
            let b6 = $rol!($xor2!($a[9], d4), 20);
            let b7 = $rol!($xor2!($a[10], d0), 3);
            let b8 = $rol!($xor2!($a[16], d1), 45);
            let b9 = $rol!($xor2!($a[22], d2), 61);
            let b10 = $rol!($xor2!($a[1], d1), 1);
            let b11 = $rol!($xor2!($a[7], d2), 6);
            let b12 = $rol!($xor2!($a[13], d3), 25);
            let b13 = $rol!($xor2!($a[19], d4), 8);
            let b14 = $rol!($xor2!($a[20], d0), 18);
            let b15 = $rol!($xor2!($a[4], d4), 27);
            let b16 = $rol!($xor2!($a[5], d0), 36);
            let b17 = $rol!($xor2!($a[11], d1), 10);
            let b18 = $rol!($xor2!($a[17], d2), 15);
            let b19 = $rol!($xor2!($a[23], d3), 56);
            let b20 = $rol!($xor2!($a[2], d2), 62);
            let b21 = $rol!($xor2!($a[8], d3), 55);
            let b22 = $rol!($xor2!($a[14], d4), 39);
            let b23 = $rol!($xor2!($a[15], d0), 41);
            let b24 = $rol!($xor2!($a[21], d1), 2);
            $a = [
                $chi!(b0, b1, b2),
                $chi!(b1, b2, b3),
                $chi!(b2, b3, b4),
                $chi!(b3, b4, b0),
                $chi!(b4, b0, b1),
                $chi!(b5, b6, b7),
                $chi!(b6, b7, b8),
                $chi!(b7, b8, b9),
                $chi!(b8, b9, b5),
                $chi!(b9, b5, b6),
                $chi!(b10, b11, b12),
                $chi!(b11, b12, b13),
                $chi!(b12, b13, b14),
                $chi!(b13, b14, b10),
                $chi!(b14, b10, b11),
                $chi!(b15, b16, b17),
                $chi!(b16, b17, b18),
                $chi!(b17, b18, b19),
                $chi!(b18, b19, b15),
                $chi!(b19, b15, b16),
                $chi!(b20, b21, b22),
                $chi!(b21, b22, b23),
                $chi!(b22, b23, b24),
                $chi!(b23, b24, b20),
                $chi!(b24, b20, b21),
            ];
            $a[0] = $xor2!($a[0], $splat!(round_constant));
        }
    };
}

/// Message words transposed for `LANES` messages: `words[w][lane]` is word `w` of message
/// `lane`, so `words[w]` loads as one SIMD register.
#[cfg(any(target_arch = "x86_64", test))]
fn transpose_in<const LANES: usize>(messages: &[&[u8]; LANES]) -> [[u64; LANES]; MESSAGE_WORDS] {
    let mut words = [[0u64; LANES]; MESSAGE_WORDS];
    for (lane, message) in messages.iter().enumerate() {
        for (word, bytes) in message.chunks_exact(8).enumerate() {
            let mut le = [0u8; 8];
            le.copy_from_slice(bytes);
            words[word][lane] = u64::from_le_bytes(le);
        }
    }
    words
}

/// Writes digest words `words[w][lane]` to `digests[lane]`.
#[cfg(any(target_arch = "x86_64", test))]
fn transpose_out<const LANES: usize>(
    words: &[[u64; LANES]; DIGEST_WORDS],
    digests: &mut [&mut [u8]; LANES],
) {
    for (lane, digest) in digests.iter_mut().enumerate() {
        for (word, bytes) in digest.chunks_exact_mut(8).enumerate() {
            bytes.copy_from_slice(&words[word][lane].to_le_bytes());
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod simd {
    use core::arch::x86_64::*;

    use super::{
        DIGEST_WORDS, MESSAGE_WORDS, PAD_FIRST_WORD, PAD_LAST_WORD, PAIR_SIZE, ROUND_CONSTANTS,
        transpose_in, transpose_out,
    };

    /// Messages left from which a padded AVX-512 call beats hashing them one by one.
    /// Measured here (AMD EPYC, Zen 5): one 8-lane call 0.21 µs, one scalar hash 0.27 µs,
    /// so always.
    const AVX512_PADDED_MIN: usize = 1;
    /// Messages left from which a padded AVX2 call beats hashing them one by one.
    /// Measured here: one 4-lane call 0.36 µs, one scalar hash 0.27 µs.
    const AVX2_PADDED_MIN: usize = 2;

    type Inputs<'a> = core::slice::ChunksExact<'a, u8>;
    type Outputs<'a> = core::slice::ChunksExactMut<'a, u8>;

    /// Hashes groups of 8 from `inputs` (and a padded last group if at least
    /// [`AVX512_PADDED_MIN`] remain), leaving the rest for the scalar code.
    ///
    /// # Safety
    /// The CPU must have AVX-512F (`is_x86_feature_detected!("avx512f")`).
    pub(super) unsafe fn hash_avx512(inputs: &mut Inputs<'_>, outputs: &mut Outputs<'_>) {
        hash_groups::<8>(inputs, outputs, AVX512_PADDED_MIN, |messages, digests| {
            // SAFETY: this function's own contract: the CPU has AVX-512F.
            unsafe { keccak_x8(messages, digests) }
        });
    }

    /// Hashes groups of 4 from `inputs` (and a padded last group if at least
    /// [`AVX2_PADDED_MIN`] remain), leaving the rest for the scalar code.
    ///
    /// # Safety
    /// The CPU must have AVX2 (`is_x86_feature_detected!("avx2")`).
    pub(super) unsafe fn hash_avx2(inputs: &mut Inputs<'_>, outputs: &mut Outputs<'_>) {
        hash_groups::<4>(inputs, outputs, AVX2_PADDED_MIN, |messages, digests| {
            // SAFETY: this function's own contract: the CPU has AVX2.
            unsafe { keccak_x4(messages, digests) }
        });
    }

    fn hash_groups<const LANES: usize>(
        inputs: &mut Inputs<'_>,
        outputs: &mut Outputs<'_>,
        padded_min: usize,
        permute: impl Fn(&[&[u8]; LANES], &mut [&mut [u8]; LANES]),
    ) {
        const ZERO_MESSAGE: [u8; PAIR_SIZE] = [0; PAIR_SIZE];
        loop {
            let left = inputs.len();
            if left == 0 || (left < LANES && left < padded_min) {
                return;
            }
            // Short groups are filled with zero messages whose digests go to scratch.
            let mut scratch = [[0u8; 32]; LANES];
            let messages: [&[u8]; LANES] =
                core::array::from_fn(|_| inputs.next().unwrap_or(&ZERO_MESSAGE));
            let mut digests: [&mut [u8]; LANES] = {
                let mut spare = scratch.iter_mut();
                core::array::from_fn(|_| match outputs.next() {
                    Some(digest) => digest,
                    None => spare.next().map_or(&mut [][..], |slot| &mut slot[..]),
                })
            };
            permute(&messages, &mut digests);
        }
    }

    /// Keccak256 of eight 64-byte messages with AVX-512F.
    #[target_feature(enable = "avx512f")]
    fn keccak_x8(messages: &[&[u8]; 8], digests: &mut [&mut [u8]; 8]) {
        macro_rules! xor2 {
            ($x:expr, $y:expr) => {
                _mm512_xor_si512($x, $y)
            };
        }
        macro_rules! xor5 {
            ($a:expr, $b:expr, $c:expr, $d:expr, $e:expr) => {
                _mm512_ternarylogic_epi64::<0x96>(
                    _mm512_ternarylogic_epi64::<0x96>($a, $b, $c),
                    $d,
                    $e,
                )
            };
        }
        macro_rules! rol {
            ($v:expr, $n:literal) => {
                _mm512_rol_epi64::<$n>($v)
            };
        }
        // 0xd2 is the truth table of a ^ (!b & c) over (a, b, c) = (0xf0, 0xcc, 0xaa).
        macro_rules! chi {
            ($x:expr, $y:expr, $z:expr) => {
                _mm512_ternarylogic_epi64::<0xd2>($x, $y, $z)
            };
        }
        macro_rules! splat {
            ($word:expr) => {
                _mm512_set1_epi64($word as i64)
            };
        }

        let words = transpose_in(messages);
        let mut state = [_mm512_setzero_si512(); 25];
        for (lane, word) in state.iter_mut().zip(&words) {
            // SAFETY: `word` is a `[u64; 8]`, 64 readable bytes; the load is unaligned.
            *lane = unsafe { _mm512_loadu_si512(word.as_ptr().cast()) };
        }
        state[PAD_FIRST_WORD] = splat!(0x01u64);
        state[PAD_LAST_WORD] = splat!(0x80u64 << 56);
        keccak_rounds!(state, xor2, xor5, rol, chi, splat);
        let mut out = [[0u64; 8]; DIGEST_WORDS];
        for (word, lane) in out.iter_mut().zip(&state) {
            // SAFETY: `word` is a `[u64; 8]`, 64 writable bytes; the store is unaligned.
            unsafe { _mm512_storeu_si512(word.as_mut_ptr().cast(), *lane) };
        }
        transpose_out(&out, digests);
    }

    /// Keccak256 of four 64-byte messages with AVX2.
    #[target_feature(enable = "avx2")]
    fn keccak_x4(messages: &[&[u8]; 4], digests: &mut [&mut [u8]; 4]) {
        macro_rules! xor2 {
            ($x:expr, $y:expr) => {
                _mm256_xor_si256($x, $y)
            };
        }
        macro_rules! xor5 {
            ($a:expr, $b:expr, $c:expr, $d:expr, $e:expr) => {
                _mm256_xor_si256(
                    _mm256_xor_si256(_mm256_xor_si256($a, $b), _mm256_xor_si256($c, $d)),
                    $e,
                )
            };
        }
        // Rotations by whole bytes are one byte shuffle within each 64-bit lane.
        let rotate_8 = _mm256_setr_epi8(
            7, 0, 1, 2, 3, 4, 5, 6, 15, 8, 9, 10, 11, 12, 13, 14, 7, 0, 1, 2, 3, 4, 5, 6, 15, 8, 9,
            10, 11, 12, 13, 14,
        );
        let rotate_56 = _mm256_setr_epi8(
            1, 2, 3, 4, 5, 6, 7, 0, 9, 10, 11, 12, 13, 14, 15, 8, 1, 2, 3, 4, 5, 6, 7, 0, 9, 10,
            11, 12, 13, 14, 15, 8,
        );
        macro_rules! rol {
            ($v:expr, 8) => {
                _mm256_shuffle_epi8($v, rotate_8)
            };
            ($v:expr, 56) => {
                _mm256_shuffle_epi8($v, rotate_56)
            };
            ($v:expr, $n:literal) => {{
                let value = $v;
                _mm256_or_si256(
                    _mm256_slli_epi64::<$n>(value),
                    _mm256_srli_epi64::<{ 64 - $n }>(value),
                )
            }};
        }
        macro_rules! chi {
            ($x:expr, $y:expr, $z:expr) => {
                _mm256_xor_si256($x, _mm256_andnot_si256($y, $z))
            };
        }
        macro_rules! splat {
            ($word:expr) => {
                _mm256_set1_epi64x($word as i64)
            };
        }

        let words = transpose_in(messages);
        let mut state = [_mm256_setzero_si256(); 25];
        for (lane, word) in state.iter_mut().zip(&words) {
            // SAFETY: `word` is a `[u64; 4]`, 32 readable bytes; the load is unaligned.
            *lane = unsafe { _mm256_loadu_si256(word.as_ptr().cast()) };
        }
        state[PAD_FIRST_WORD] = splat!(0x01u64);
        state[PAD_LAST_WORD] = splat!(0x80u64 << 56);
        keccak_rounds!(state, xor2, xor5, rol, chi, splat);
        let mut out = [[0u64; 4]; DIGEST_WORDS];
        for (word, lane) in out.iter_mut().zip(&state) {
            // SAFETY: `word` is a `[u64; 4]`, 32 writable bytes; the store is unaligned.
            unsafe { _mm256_storeu_si256(word.as_mut_ptr().cast(), *lane) };
        }
        transpose_out(&out, digests);
    }

    const _: () = assert!(MESSAGE_WORDS == 8);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The round macro on plain `u64` lanes: a third implementation, checked against
    /// tiny-keccak, so a wrong rotation offset or pi position shows up even where no SIMD
    /// path runs.
    fn keccak_one_word_lanes(message: &[u8]) -> [u8; 32] {
        macro_rules! xor2 {
            ($x:expr, $y:expr) => {
                core::ops::BitXor::bitxor($x, $y)
            };
        }
        macro_rules! xor5 {
            ($a:expr, $b:expr, $c:expr, $d:expr, $e:expr) => {
                $a ^ $b ^ $c ^ $d ^ $e
            };
        }
        macro_rules! rol {
            ($v:expr, $n:literal) => {
                u64::rotate_left($v, $n)
            };
        }
        macro_rules! chi {
            ($x:expr, $y:expr, $z:expr) => {
                $x ^ (!$y & $z)
            };
        }
        macro_rules! splat {
            ($word:expr) => {
                $word
            };
        }
        let words = transpose_in::<1>(&[message]);
        let mut state = [0u64; 25];
        for (lane, word) in state.iter_mut().zip(&words) {
            *lane = word[0];
        }
        state[PAD_FIRST_WORD] = 0x01;
        state[PAD_LAST_WORD] = 0x80 << 56;
        keccak_rounds!(state, xor2, xor5, rol, chi, splat);
        let out: [[u64; 1]; DIGEST_WORDS] = core::array::from_fn(|word| [state[word]]);
        let mut digest = [0u8; 32];
        transpose_out::<1>(&out, &mut [&mut digest[..]]);
        digest
    }

    fn messages(count: usize, seed: u8) -> Vec<u8> {
        (0..count * PAIR_SIZE)
            .map(|i| (i as u8).wrapping_mul(167).wrapping_add(seed))
            .collect()
    }

    #[test]
    fn round_macro_matches_tiny_keccak() {
        let data = messages(16, 3);
        for message in data.chunks_exact(PAIR_SIZE) {
            assert_eq!(keccak_one_word_lanes(message), keccak256(message));
        }
        assert_eq!(keccak_one_word_lanes(&[0; 64]), keccak256(&[0; 64]));
        assert_eq!(keccak_one_word_lanes(&[0xff; 64]), keccak256(&[0xff; 64]));
    }

    #[test]
    fn every_available_path_matches_scalar_for_every_count() {
        for count in 0..=20 {
            let input = messages(count, count as u8);
            let expected: Vec<u8> = input.chunks_exact(PAIR_SIZE).flat_map(keccak256).collect();
            for lanes in Lanes::available() {
                let mut output = vec![0u8; count * DIGEST_SIZE];
                hash_pairs(lanes, &input, &mut output);
                assert_eq!(output, expected, "{lanes}, {count} messages");
            }
        }
    }

    #[test]
    fn fastest_is_available_and_scalar_always_is() {
        assert!(Lanes::fastest().is_available());
        assert!(Lanes::Scalar.is_available());
        assert_eq!(Lanes::available().next(), Some(Lanes::Scalar));
    }

    #[test]
    #[should_panic(expected = "whole 64-byte messages")]
    fn ragged_input_is_a_caller_bug() {
        hash_pairs(Lanes::Scalar, &[0; 65], &mut [0; 32]);
    }
}
