//! Tests of the machine through its inputs and actions, one or more per rule (named `rNN_…`
//! after docs/PROTOCOL.md §5) and the five configurations end to end, all with real signed
//! chunks and real verification.

mod configs;
mod driver;
mod machine_api;
mod rules_bridge;
mod rules_cohorts;
mod rules_edge;
mod rules_frames;
mod rules_history;
mod rules_relay_loop;
mod rules_roles;
mod rules_roster;
mod rules_splice;
mod rules_trusted;
mod simulation;
