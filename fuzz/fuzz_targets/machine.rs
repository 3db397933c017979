//! Fuzz target `machine`: the protocol state machine (`bps_core::Machine`) driven by
//! arbitrary sequences of Joins, frames, verification results, closes, write notices and
//! ticks, through the seeded simulation (`bps_core::sim`) with its choices read from the
//! input instead of a random generator.
//!
//! Asserts what the simulation asserts after every step (its module docs): nothing is
//! delivered that was not accepted, never to the publishing identity (R25), no frame twice
//! to one stream, every credited frame consumed exactly once, the per-cohort and per-peer
//! bounds (R30..R33) and the ledger's counts hold, backlogs (D11) hold only retained DATA of
//! the stream's cohort; and at the end, with every verification answered and every stream
//! closed, that nothing is left behind in the machine or the ledger. A panic is a finding.
//!
//! Input layout: the first 8 bytes seed the machine's challenge generator (R4); the rest
//! are the simulation's choices, two bytes each, until they run out or `STEPS_MAX` steps.

#![no_main]

use bps_core::sim::{InputChoices, Simulation};
use libfuzzer_sys::fuzz_target;

/// Steps one input drives at most, so a long input stays a fast execution.
const STEPS_MAX: usize = 2048;

fuzz_target!(|data: &[u8]| {
    let (seed, choices) = data.split_at(data.len().min(8));
    let mut seed_bytes = [0u8; 8];
    seed_bytes[..seed.len()].copy_from_slice(seed);
    let mut sim = Simulation::new(InputChoices::new(choices), u64::from_le_bytes(seed_bytes));
    let mut steps = 0;
    while !sim.choices().exhausted() && steps < STEPS_MAX {
        sim.step();
        steps += 1;
    }
    sim.finish();
});
