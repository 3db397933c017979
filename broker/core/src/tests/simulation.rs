//! The seeded simulation (`crate::sim`) as a test: `BPS_SIM_STEPS` sets the number of steps
//! (default 100 000), `BPS_SIM_SEED` one seed to replay; the seed of every run is printed, so
//! a failure is reproducible.

use rand::SeedableRng;
use rand::rngs::StdRng;

use crate::sim::{COUNTERS_REACHED, InputChoices, Simulation};

fn run(seed: u64, steps: u64) {
    eprintln!("simulation seed {seed}, {steps} steps (replay with BPS_SIM_SEED={seed})");
    let mut sim = Simulation::new(StdRng::seed_from_u64(seed), seed);
    for _ in 0..steps {
        sim.step();
    }
    sim.finish();
    let totals = sim.totals();
    eprintln!("totals: {totals:?}");
    for counter in COUNTERS_REACHED {
        assert!(
            totals[counter.name()] > 0,
            "the simulation never reached {}",
            counter.name()
        );
    }
}

#[test]
fn seeded_simulation_keeps_every_invariant() {
    let steps = std::env::var("BPS_SIM_STEPS")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(100_000);
    match std::env::var("BPS_SIM_SEED")
        .ok()
        .and_then(|value| value.parse().ok())
    {
        Some(seed) => run(seed, steps),
        None => {
            for seed in [1, 2, 3, 4] {
                run(seed, steps / 4);
            }
        }
    }
}

/// Fuzz target `machine` found this: once the input's choices are used up every choice is
/// 0, and `finish` answered "none this time" to pending verifications forever.
#[test]
fn finish_answers_every_verification_when_the_choices_are_used_up() {
    let input =
        include_bytes!("../../../../fuzz/corpus/machine/regression-finish-with-choices-used-up");
    let (seed, choices) = input.split_at(8);
    let seed = u64::from_le_bytes(seed.try_into().expect("8 seed bytes"));
    let mut sim = Simulation::new(InputChoices::new(choices), seed);
    while !sim.choices().exhausted() {
        sim.step();
    }
    assert!(
        sim.verifications_pending() > 0,
        "the input leaves verifications pending at the end"
    );
    sim.finish();
}
