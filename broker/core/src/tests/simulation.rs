//! The seeded simulation (`crate::sim`) as a test: `BPS_SIM_STEPS` sets the number of steps
//! (default 100 000), `BPS_SIM_SEED` one seed to replay; the seed of every run is printed, so
//! a failure is reproducible.

use rand::SeedableRng;
use rand::rngs::StdRng;

use crate::sim::{COUNTERS_REACHED, Simulation};

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
