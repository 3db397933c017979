//! Multi-lane keccak256 of 64-byte messages: the BMT's pair hashes, several at a time.
//!
//! Owns: [`Lanes`] (which keccak-f\[1600\] implementation to use, chosen once per process
//! by CPU feature detection), [`hash_pairs`], which hashes a run of 64-byte messages with
//! it, and, for the AVX2 lane tree (`bmt/lane_tree.rs`), the 4-lane permutation on lane-major
//! words with its loads and stores, and a scalar keccak for one lone message. The BMT
//! ([`crate::bmt`]) is the only user.
//!
//! Never: hashes a message of another length (the 64-byte padding is fixed below), or
//! runs an instruction the CPU lacks: the SIMD and BMI functions are reachable only
//! through [`hash_pairs`] and the lane tree, which check the features first.
//!
//! Keccak256 of a 64-byte message is one keccak-f\[1600\] permutation: the rate is 136
//! bytes (17 words), so the message fills words 0..8, the padding byte `0x01` goes into
//! byte 64 (word 8, lowest byte) and `0x80` into byte 135 (word 16, highest byte),
//! everything else is zero; the digest is words 0..4, little-endian. A multi-lane
//! implementation keeps one 64-bit lane per message in each SIMD register (`__m256i`: 4
//! messages with AVX2, `__m512i`: 8 with AVX-512F) and runs the 24 rounds on all of them at
//! once. AVX-512F has a rotate (`vprolq`) and three-input logic (`vpternlogq`: 3-way XOR
//! for theta, the whole `a ^ (!b & c)` of chi in one instruction); AVX2 builds rotations
//! from two shifts and an OR (a byte shuffle for the rotations by 8 and 56). The rounds are
//! written once, in `keccak256_of_pairs!` and the macros below it, and instantiated per
//! instruction set: AVX2, AVX-512F, and plain `u64` (the scalar keccak with BMI, and a
//! third implementation in the tests, so the shared round code is checked on every CPU).
//!
//! Why the AVX2 path is fast. A round is about 184 vector instructions for four messages
//! (theta 40, rho and pi 68, chi 50, the XOR of theta's effect 25, iota 1), and that count
//! is the floor with AVX2's instruction set; what is left to win is how close the core
//! gets to four of them per cycle. Four things matter, measured on AMD EPYC (Zen 3):
//! - The round is computed one output row at a time (pi source, theta's effect, rho, then
//!   chi on the row), so only two rows' lanes, theta's five words and the parities are
//!   live: the compiler stores each lane about once per round (23 stores) and reloads it as
//!   a memory operand.
//! - The rows are skewed by one: the next row's rho (two shifts and an OR per lane; the
//!   shifts run on two of Zen 3's four vector pipes) is issued before this row's chi
//!   (AND-NOT and XOR, any pipe), so that the scheduler always has both kinds at hand.
//!   That took a call from 0.387 to 0.375 µs and the BMT from 12.7 to 12.3 µs; taking the
//!   rows in the order 2, 0, 3, 1, 4 then gave 0.371 µs and 12.2 µs. A call is now about
//!   4,300 instructions in 1,200 cycles, 3.6 per cycle (a round's instruction mix with no
//!   dependencies at all runs at 3.9). It hashes four messages in 0.37 µs, where
//!   tiny-keccak takes 0.40 µs for one; the loop over all 25 lanes at once that this
//!   replaced took 0.42 µs.
//! - The first round is peeled (the padded state's zero and constant lanes fold away) and
//!   the last computes only the digest's four lanes.
//! - The permutation realigns its stack frame (`realign_frame!`): otherwise every other
//!   spill straddles a cache line, which cost 15 % to 40 % depending on where the process's
//!   stack happened to start.
//!
//! Measured and left out: two 4-lane groups interleaved (8 messages per call: 1.5 % faster
//! alone, 10 % slower inside the tree), other row orders, a 4-round loop, rotations by 1
//! without a shift (all within 1 % in the tree), skewing by two rows or lane by lane (no
//! better than by one), other row orders with the skew (up to +4 %), parities accumulated
//! row by row (+1 % to +10 %), a full unroll (+33 %), one call per round (+60 %), and a
//! scalar lane run alongside the four SIMD ones (+60 % per call for +25 % messages).
//!
//! Safety: the SIMD and BMI functions are `#[target_feature]` functions (safe inside,
//! `unsafe` to call from code not compiled for the feature; the AVX-512 group driver is an
//! `unsafe fn` whose contract is "the CPU has AVX-512F"). Their callers outside such code,
//! [`hash_pairs`] and the lane tree, check [`Lanes::is_available`] or BMI first, which read
//! `is_x86_feature_detected!` (cached in a `OnceLock`): the instructions exist on this CPU,
//! which is the whole of the contract. Memory is touched only through references and
//! fixed-size arrays; the raw-pointer uses (unaligned SIMD loads and stores of fixed-size
//! byte and word arrays) are in bounds by the array types.

use std::sync::OnceLock;

use crate::wire::keccak256;

/// Bytes of one BMT pair message (two 32-byte child hashes).
pub const PAIR_SIZE: usize = 64;
/// Bytes of one keccak256 digest.
pub const DIGEST_SIZE: usize = 32;

/// A keccak-f\[1600\] implementation: how many messages one permutation call hashes.
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
    /// BMI1 and BMI2 (`andn`, `rorx`): what the scalar keccak of [`keccak256_bmi`] needs.
    bmi: bool,
}

fn detected() -> Features {
    static FEATURES: OnceLock<Features> = OnceLock::new();
    *FEATURES.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        {
            Features {
                avx2: std::arch::is_x86_feature_detected!("avx2"),
                avx512f: std::arch::is_x86_feature_detected!("avx512f"),
                bmi: std::arch::is_x86_feature_detected!("bmi1")
                    && std::arch::is_x86_feature_detected!("bmi2"),
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            Features {
                avx2: false,
                avx512f: false,
                bmi: false,
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
    #[cfg(target_arch = "x86_64")]
    let hashed = match lanes {
        // SAFETY: asserted above: `Lanes::Avx512.is_available()`, so
        // `is_x86_feature_detected!("avx512f")` held, as `hash_avx512` requires.
        Lanes::Avx512 => unsafe { simd::hash_avx512(input, output) },
        // SAFETY: asserted above: `Lanes::Avx2.is_available()`, so
        // `is_x86_feature_detected!("avx2")` held, which `hash_avx2`'s target feature needs.
        Lanes::Avx2 => unsafe { simd::hash_avx2(input, output) },
        Lanes::Scalar => 0,
    };
    #[cfg(not(target_arch = "x86_64"))]
    let hashed = 0;
    let messages = input[PAIR_SIZE * hashed..].chunks_exact(PAIR_SIZE);
    let digests = output[DIGEST_SIZE * hashed..].chunks_exact_mut(DIGEST_SIZE);
    for (message, digest) in messages.zip(digests) {
        digest.copy_from_slice(&keccak256(message));
    }
}

/// keccak-f\[1600\] round constants (iota).
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
pub(crate) const MESSAGE_WORDS: usize = PAIR_SIZE / 8;
/// Word holding padding byte 64 (`0x01`, its lowest byte).
const PAD_FIRST_WORD: usize = 8;
/// Word holding padding byte 135 (`0x80`, its highest byte): the last word of the rate.
const PAD_LAST_WORD: usize = 16;
/// Words of the digest.
pub(crate) const DIGEST_WORDS: usize = DIGEST_SIZE / 8;
/// Rounds of keccak-f\[1600\].
const ROUNDS: usize = ROUND_CONSTANTS.len();
const _: () = assert!(PAD_FIRST_WORD == MESSAGE_WORDS && (PAD_LAST_WORD + 1) * 8 == 136);
const _: () = assert!(ROUNDS == 24 && DIGEST_WORDS == 4);

// The round body, written once for any lane type `V` (a `u64`, or a SIMD register holding
// one lane of several states). The lane type comes as an operations macro `$op`:
// `$op!(xor a, b)`, `$op!(xor5 a, b, c, d, e)`, `$op!(chi a, b, c)` = `a ^ (!b & c)`,
// `$op!(rol v, literal)` and `$op!(splat u64)`. The state is `[V; 25]`, lane `x + 5y`.
//
// A round reads one state array and writes the other (`$from => $to`), one row of five
// output lanes at a time: each lane is fetched from its pi source, XORed with theta's effect
// on the source column and rotated (rho), and the row goes through chi at once, one row
// behind the rho of the next (module docs: the shifts and the logic interleave). Only two
// rows' lanes and theta's five words are live at a time, which keeps the compiler's spills
// down to about one store per lane per round. The column parities of the output are
// computed at the end of the round for the next one.

/// Column parities `C[x]` of a state.
macro_rules! column_parity {
    ($state:ident, $op:ident) => {
        [
            $op!(xor5 $state[0], $state[5], $state[10], $state[15], $state[20]),
            $op!(xor5 $state[1], $state[6], $state[11], $state[16], $state[21]),
            $op!(xor5 $state[2], $state[7], $state[12], $state[17], $state[22]),
            $op!(xor5 $state[3], $state[8], $state[13], $state[18], $state[23]),
            $op!(xor5 $state[4], $state[9], $state[14], $state[19], $state[24]),
        ]
    };
}

/// Theta's effect on column `x`: `C[x - 1] ^ rol(C[x + 1], 1)`.
macro_rules! theta_effect {
    ($parity:ident, $op:ident) => {
        [
            $op!(xor $parity[4], $op!(rol $parity[1], 1)),
            $op!(xor $parity[0], $op!(rol $parity[2], 1)),
            $op!(xor $parity[1], $op!(rol $parity[3], 1)),
            $op!(xor $parity[2], $op!(rol $parity[4], 1)),
            $op!(xor $parity[3], $op!(rol $parity[0], 1)),
        ]
    };
}

/// The five lanes of one output row before chi: `(source lane, rho rotation)` each.
macro_rules! rho_pi_row {
    ($from:ident, $effect:ident, $op:ident, [$(($lane:literal, $rotation:tt)),+]) => {
        [$($op!(rol $op!(xor $from[$lane], $effect[$lane % 5]), $rotation)),+]
    };
}

/// Chi along one row, written to `$to[5 * $row..5 * $row + 5]`.
macro_rules! chi_row {
    ($to:ident, $row:literal, $lanes:ident, $op:ident) => {
        $to[5 * $row] = $op!(chi $lanes[0], $lanes[1], $lanes[2]);
        $to[5 * $row + 1] = $op!(chi $lanes[1], $lanes[2], $lanes[3]);
        $to[5 * $row + 2] = $op!(chi $lanes[2], $lanes[3], $lanes[4]);
        $to[5 * $row + 3] = $op!(chi $lanes[3], $lanes[4], $lanes[0]);
        $to[5 * $row + 4] = $op!(chi $lanes[4], $lanes[0], $lanes[1]);
    };
}

/// Pi sources and rho rotations of output row 0 (the digest's row).
macro_rules! row_0_sources {
    ($from:ident, $effect:ident, $op:ident) => {
        rho_pi_row!(
            $from,
            $effect,
            $op,
            [(0, 0), (6, 44), (12, 43), (18, 21), (24, 14)]
        )
    };
}

/// Round `$round` from `$from` into `$to`; `$parity` holds the column parities of `$from`
/// on entry and of `$to` on exit. Each row's rho comes one step before its chi; the rows
/// go in the order 2, 0, 3, 1, 4, which measured 0.7 % faster than 0 to 4 (module docs).
macro_rules! keccak_round {
    ($from:ident => $to:ident, $parity:ident, $round:expr, $op:ident) => {{
        let effect = theta_effect!($parity, $op);
        let row2 = rho_pi_row!($from, effect, $op, [(1, 1), (7, 6), (13, 25), (19, 8), (20, 18)]);
        let row0 = row_0_sources!($from, effect, $op);
        chi_row!($to, 2, row2, $op);
        let row3 = rho_pi_row!($from, effect, $op, [(4, 27), (5, 36), (11, 10), (17, 15), (23, 56)]);
        chi_row!($to, 0, row0, $op);
        $to[0] = $op!(xor $to[0], $op!(splat ROUND_CONSTANTS[$round]));
        let row1 = rho_pi_row!($from, effect, $op, [(3, 28), (9, 20), (10, 3), (16, 45), (22, 61)]);
        chi_row!($to, 3, row3, $op);
        let row4 = rho_pi_row!($from, effect, $op, [(2, 62), (8, 55), (14, 39), (15, 41), (21, 2)]);
        chi_row!($to, 1, row1, $op);
        chi_row!($to, 4, row4, $op);
        $parity = column_parity!($to, $op);
    }};
}

/// Keccak256 of 64-byte messages, one per lane of `V`: `$message: [V; MESSAGE_WORDS]`
/// (word `w` of each message in `$message[w]`) to the digest words `[V; DIGEST_WORDS]`.
///
/// The first round is peeled so that the compiler folds the 15 zero and 2 constant lanes of
/// the padded state into it; the last round computes only the four digest lanes; the 22
/// between run as 11 pairs, so that the two state arrays swap roles without copies.
macro_rules! keccak256_of_pairs {
    ($message:expr, $op:ident, $zero:expr) => {{
        let mut state = [$zero; 25];
        state[..MESSAGE_WORDS].copy_from_slice(&$message);
        state[PAD_FIRST_WORD] = $op!(splat 0x01u64);
        state[PAD_LAST_WORD] = $op!(splat 0x80u64 << 56);
        let mut next = [$zero; 25];
        let mut parity = column_parity!(state, $op);
        keccak_round!(state => next, parity, 0, $op);
        for pair in 0..(ROUNDS - 2) / 2 {
            keccak_round!(next => state, parity, 1 + 2 * pair, $op);
            keccak_round!(state => next, parity, 2 + 2 * pair, $op);
        }
        let effect = theta_effect!(parity, $op);
        let row = row_0_sources!(next, effect, $op);
        [
            $op!(xor $op!(chi row[0], row[1], row[2]), $op!(splat ROUND_CONSTANTS[ROUNDS - 1])),
            $op!(chi row[1], row[2], row[3]),
            $op!(chi row[2], row[3], row[4]),
            $op!(chi row[3], row[4], row[0]),
        ]
    }};
}

/// `u64` lanes for [`keccak256_of_pairs!`]: the scalar keccak of [`keccak256_bmi`] and the
/// tests' third implementation.
macro_rules! word {
    // A call, not `^`: the macros' `a = a ^ b` is not to be an `^=` for one lane type.
    (xor $x:expr, $y:expr) => {
        core::ops::BitXor::bitxor($x, $y)
    };
    (xor5 $a:expr, $b:expr, $c:expr, $d:expr, $e:expr) => {
        $a ^ $b ^ $c ^ $d ^ $e
    };
    (chi $x:expr, $y:expr, $z:expr) => {
        $x ^ (!$y & $z)
    };
    (rol $v:expr, $n:literal) => {
        u64::rotate_left($v, $n)
    };
    (splat $word:expr) => {
        $word
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
pub(crate) use simd::{Avx2Words, keccak256_bmi, keccak256_x4, load_messages_x4, store_digests_x4};

/// Whether this CPU has BMI1 and BMI2, which [`keccak256_bmi`] needs (detected once).
#[cfg(target_arch = "x86_64")]
pub(crate) fn bmi_available() -> bool {
    detected().bmi
}

#[cfg(target_arch = "x86_64")]
mod simd {
    use core::arch::x86_64::*;

    use super::{
        DIGEST_SIZE, DIGEST_WORDS, MESSAGE_WORDS, PAD_FIRST_WORD, PAD_LAST_WORD, PAIR_SIZE,
        ROUND_CONSTANTS, ROUNDS, transpose_in, transpose_out,
    };

    /// Messages left from which a padded AVX-512 call beats hashing them one by one.
    /// Measured on AMD EPYC (Zen 5): one 8-lane call 0.21 µs, one scalar hash 0.27 µs, so
    /// always.
    const AVX512_PADDED_MIN: usize = 1;
    /// Messages per AVX2 call.
    const AVX2_LANES: usize = 4;
    /// Bytes of the messages of one AVX2 call.
    const AVX2_BLOCK_BYTES: usize = AVX2_LANES * PAIR_SIZE;

    /// One keccak lane of four states: word `w` of four messages or digests in one
    /// register, lanes 0..4 = states 0..4.
    pub(crate) type Avx2Words<const WORDS: usize> = [__m256i; WORDS];

    type Inputs<'a> = core::slice::ChunksExact<'a, u8>;
    type Outputs<'a> = core::slice::ChunksExactMut<'a, u8>;

    /// Makes the compiler realign the calling function's stack frame to 64 bytes, so that
    /// its SIMD spill slots are aligned. Without it LLVM spills `ymm` registers to 32-byte
    /// slots at offsets only 16-aligned from an unaligned stack pointer: every other spill
    /// then straddles two cache lines, and store-to-load forwarding fails on split
    /// accesses. That cost the AVX2 BMT 15% to 40% depending on where a process's stack
    /// happened to start (12.7 µs aligned, 14.7 to 21 µs otherwise, on AMD EPYC Zen 3).
    /// An over-aligned local whose address escapes is what makes LLVM realign; it is
    /// never written.
    macro_rules! realign_frame {
        () => {
            #[repr(align(64))]
            struct CacheLine(#[allow(dead_code)] [u8; 64]);
            let mut cache_line = core::mem::MaybeUninit::<CacheLine>::uninit();
            core::hint::black_box(cache_line.as_mut_ptr());
        };
    }

    /// Hashes groups of 8 messages from `input` (and a padded last group if at least
    /// [`AVX512_PADDED_MIN`] remain) into `output`; returns how many it hashed, leaving the
    /// rest for the scalar code.
    ///
    /// # Safety
    /// The CPU must have AVX-512F (`is_x86_feature_detected!("avx512f")`).
    pub(super) unsafe fn hash_avx512(input: &[u8], output: &mut [u8]) -> usize {
        let mut inputs = input.chunks_exact(PAIR_SIZE);
        let mut outputs = output.chunks_exact_mut(DIGEST_SIZE);
        hash_groups::<8>(
            &mut inputs,
            &mut outputs,
            AVX512_PADDED_MIN,
            |messages, digests| {
                // SAFETY: this function's own contract: the CPU has AVX-512F.
                unsafe { keccak_x8(messages, digests) }
            },
        );
        input.len() / PAIR_SIZE - inputs.len()
    }

    /// Hashes the messages of `input` four per call into `output`, a short rest in one call
    /// padded with zero messages (measured on AMD EPYC, Zen 3: one 4-lane call 0.37 µs,
    /// one scalar hash 0.40 µs, so padding always pays); returns how many it hashed: all.
    #[target_feature(enable = "avx2")]
    pub(super) fn hash_avx2(input: &[u8], output: &mut [u8]) -> usize {
        let blocks = input.chunks_exact(AVX2_BLOCK_BYTES);
        let rest = blocks.remainder();
        let mut digest_blocks = output.chunks_exact_mut(AVX2_BLOCK_BYTES / 2);
        for (block, digests) in blocks.zip(&mut digest_blocks) {
            let block: &[u8; AVX2_BLOCK_BYTES] = block.try_into().expect("chunks_exact");
            let digests: &mut [u8; AVX2_BLOCK_BYTES / 2] =
                digests.try_into().expect("chunks_exact_mut");
            store_digests_x4(&keccak256_x4(&load_messages_x4(block)), digests);
        }
        if !rest.is_empty() {
            let mut block = [0u8; AVX2_BLOCK_BYTES];
            block[..rest.len()].copy_from_slice(rest);
            let mut digests = [0u8; AVX2_BLOCK_BYTES / 2];
            store_digests_x4(&keccak256_x4(&load_messages_x4(&block)), &mut digests);
            let tail = digest_blocks.into_remainder();
            tail.copy_from_slice(&digests[..tail.len()]);
        }
        input.len() / PAIR_SIZE
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

    /// AVX-512F lanes for [`keccak256_of_pairs!`]: a rotate instruction, and three-input
    /// logic for theta's 5-way XOR and for the whole of chi.
    macro_rules! avx512 {
        (xor $x:expr, $y:expr) => {
            _mm512_xor_si512($x, $y)
        };
        (xor5 $a:expr, $b:expr, $c:expr, $d:expr, $e:expr) => {
            _mm512_ternarylogic_epi64::<0x96>(_mm512_ternarylogic_epi64::<0x96>($a, $b, $c), $d, $e)
        };
        // 0xd2 is the truth table of a ^ (!b & c) over (a, b, c) = (0xf0, 0xcc, 0xaa).
        (chi $x:expr, $y:expr, $z:expr) => {
            _mm512_ternarylogic_epi64::<0xd2>($x, $y, $z)
        };
        (rol $v:expr, 0) => {
            $v
        };
        (rol $v:expr, $n:literal) => {
            _mm512_rol_epi64::<$n>($v)
        };
        (splat $word:expr) => {
            _mm512_set1_epi64($word as i64)
        };
    }

    /// Keccak256 of eight 64-byte messages with AVX-512F.
    #[target_feature(enable = "avx512f")]
    fn keccak_x8(messages: &[&[u8]; 8], digests: &mut [&mut [u8]; 8]) {
        realign_frame!();
        let words = transpose_in(messages);
        let mut message = [_mm512_setzero_si512(); MESSAGE_WORDS];
        for (lane, word) in message.iter_mut().zip(&words) {
            // SAFETY: `word` is a `[u64; 8]`, 64 readable bytes; the load is unaligned.
            *lane = unsafe { _mm512_loadu_si512(word.as_ptr().cast()) };
        }
        let digest = keccak256_of_pairs!(message, avx512, _mm512_setzero_si512());
        let mut out = [[0u64; 8]; DIGEST_WORDS];
        for (word, lane) in out.iter_mut().zip(&digest) {
            // SAFETY: `word` is a `[u64; 8]`, 64 writable bytes; the store is unaligned.
            unsafe { _mm512_storeu_si512(word.as_mut_ptr().cast(), *lane) };
        }
        transpose_out(&out, digests);
    }

    /// AVX2 lanes for [`keccak256_of_pairs!`]. AVX2 has no rotate: a rotation is two shifts
    /// and an OR, except by whole bytes (8 and 56: one byte shuffle within each 64-bit
    /// lane) and by 1 (the left shift is an add, which runs on more ports than a shift).
    macro_rules! avx2 {
        (xor $x:expr, $y:expr) => {
            _mm256_xor_si256($x, $y)
        };
        (xor5 $a:expr, $b:expr, $c:expr, $d:expr, $e:expr) => {
            _mm256_xor_si256(
                _mm256_xor_si256(_mm256_xor_si256($a, $b), _mm256_xor_si256($c, $d)),
                $e,
            )
        };
        (chi $x:expr, $y:expr, $z:expr) => {
            _mm256_xor_si256($x, _mm256_andnot_si256($y, $z))
        };
        (rol $v:expr, 0) => {
            $v
        };
        (rol $v:expr, 1) => {{
            let value = $v;
            _mm256_or_si256(
                _mm256_add_epi64(value, value),
                _mm256_srli_epi64::<63>(value),
            )
        }};
        (rol $v:expr, 8) => {
            _mm256_shuffle_epi8(
                $v,
                _mm256_setr_epi8(
                    7, 0, 1, 2, 3, 4, 5, 6, 15, 8, 9, 10, 11, 12, 13, 14, 7, 0, 1, 2, 3, 4, 5, 6,
                    15, 8, 9, 10, 11, 12, 13, 14,
                ),
            )
        };
        (rol $v:expr, 56) => {
            _mm256_shuffle_epi8(
                $v,
                _mm256_setr_epi8(
                    1, 2, 3, 4, 5, 6, 7, 0, 9, 10, 11, 12, 13, 14, 15, 8, 1, 2, 3, 4, 5, 6, 7, 0,
                    9, 10, 11, 12, 13, 14, 15, 8,
                ),
            )
        };
        (rol $v:expr, $n:literal) => {{
            let value = $v;
            _mm256_or_si256(
                _mm256_slli_epi64::<$n>(value),
                _mm256_srli_epi64::<{ 64 - $n }>(value),
            )
        }};
        (splat $word:expr) => {
            _mm256_set1_epi64x($word as i64)
        };
    }

    /// Keccak256 of four 64-byte messages with AVX2, lane-major in and out: `message[w]`
    /// holds word `w` of messages 0..4 in lanes 0..4, and so does the result for the
    /// digests. Callers that keep their data in this form (the lane tree) skip the
    /// transposes altogether.
    #[target_feature(enable = "avx2")]
    pub(crate) fn keccak256_x4(message: &Avx2Words<MESSAGE_WORDS>) -> Avx2Words<DIGEST_WORDS> {
        realign_frame!();
        keccak256_of_pairs!(*message, avx2, _mm256_setzero_si256())
    }

    /// Keccak256 of one 64-byte message as words, on the integer units: the same rounds on
    /// `u64` lanes, with BMI's three-operand `andn` and `rorx` (measured on AMD EPYC, Zen 3:
    /// 0.27 µs, against 0.40 µs for tiny-keccak and 0.37 µs for a 4-lane AVX2 call).
    /// The lane tree's root, a single hash nothing else can share a call with, uses it.
    #[target_feature(enable = "bmi1,bmi2")]
    pub(crate) fn keccak256_bmi(message: &[u64; MESSAGE_WORDS]) -> [u64; DIGEST_WORDS] {
        keccak256_of_pairs!(*message, word, 0u64)
    }

    /// Four consecutive 64-byte messages as lane-major words for [`keccak256_x4`]: eight
    /// loads and two 4×4 transposes of 64-bit words, all in registers.
    #[target_feature(enable = "avx2")]
    pub(crate) fn load_messages_x4(block: &[u8; AVX2_BLOCK_BYTES]) -> Avx2Words<MESSAGE_WORDS> {
        // `rows[2m]` holds words 0..4 of message `m`, `rows[2m + 1]` words 4..8.
        let rows: [__m256i; 8] = core::array::from_fn(|row| {
            let bytes: &[u8; 32] = block[32 * row..32 * (row + 1)]
                .try_into()
                .expect("32-byte row of a 256-byte block");
            // SAFETY: `bytes` is 32 readable bytes; the load is unaligned.
            unsafe { _mm256_loadu_si256(bytes.as_ptr().cast()) }
        });
        let low = transpose_4x4([rows[0], rows[2], rows[4], rows[6]]);
        let high = transpose_4x4([rows[1], rows[3], rows[5], rows[7]]);
        [
            low[0], low[1], low[2], low[3], high[0], high[1], high[2], high[3],
        ]
    }

    /// Lane-major digest words back to four consecutive 32-byte digests (the transpose of
    /// a 4×4 block is its own inverse).
    #[target_feature(enable = "avx2")]
    pub(crate) fn store_digests_x4(
        words: &Avx2Words<DIGEST_WORDS>,
        digests: &mut [u8; AVX2_BLOCK_BYTES / 2],
    ) {
        for (digest, row) in digests.chunks_exact_mut(32).zip(transpose_4x4(*words)) {
            let bytes: &mut [u8; 32] = digest.try_into().expect("chunks_exact_mut(32)");
            // SAFETY: `bytes` is 32 writable bytes; the store is unaligned.
            unsafe { _mm256_storeu_si256(bytes.as_mut_ptr().cast(), row) };
        }
    }

    /// Transposes a 4×4 matrix of 64-bit words held in four registers (one row each).
    #[target_feature(enable = "avx2")]
    fn transpose_4x4(rows: [__m256i; 4]) -> [__m256i; 4] {
        // Pairs of rows interleaved within each 128-bit half, then the halves regrouped.
        let even_01 = _mm256_unpacklo_epi64(rows[0], rows[1]);
        let odd_01 = _mm256_unpackhi_epi64(rows[0], rows[1]);
        let even_23 = _mm256_unpacklo_epi64(rows[2], rows[3]);
        let odd_23 = _mm256_unpackhi_epi64(rows[2], rows[3]);
        [
            _mm256_permute2x128_si256::<0x20>(even_01, even_23),
            _mm256_permute2x128_si256::<0x20>(odd_01, odd_23),
            _mm256_permute2x128_si256::<0x31>(even_01, even_23),
            _mm256_permute2x128_si256::<0x31>(odd_01, odd_23),
        ]
    }

    const _: () = assert!(MESSAGE_WORDS == 8 && ROUNDS.is_multiple_of(2));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The round macros on plain `u64` lanes: a third implementation, checked against
    /// tiny-keccak, so a wrong rotation offset, pi source or peeled round shows up even
    /// where no SIMD path runs (the AVX-512 path shares every line of it but the lane
    /// operations).
    fn keccak_one_word_lanes(message: &[u8]) -> [u8; 32] {
        let words = transpose_in::<1>(&[message]);
        let lanes: [u64; MESSAGE_WORDS] = core::array::from_fn(|word| words[word][0]);
        let digest_words = keccak256_of_pairs!(lanes, word, 0u64);
        let out: [[u64; 1]; DIGEST_WORDS] = core::array::from_fn(|word| [digest_words[word]]);
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

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn bmi_scalar_matches_tiny_keccak() {
        if !bmi_available() {
            return;
        }
        let data = messages(64, 11);
        for message in data
            .chunks_exact(PAIR_SIZE)
            .chain([&[0u8; 64][..], &[0xff; 64]])
        {
            let words: [u64; MESSAGE_WORDS] = core::array::from_fn(|word| {
                u64::from_le_bytes(message[8 * word..8 * word + 8].try_into().expect("8 bytes"))
            });
            // SAFETY: `bmi_available()` held: the CPU has BMI1 and BMI2.
            let digest = unsafe { keccak256_bmi(&words) };
            let bytes: Vec<u8> = digest.iter().flat_map(|word| word.to_le_bytes()).collect();
            assert_eq!(bytes, keccak256(message));
        }
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
