//! The cohorts homed on one machine, by serial and by canonical key.
//!
//! Owns: `Cohorts`, the one place that keeps the two indexes in step, issues serials (R37: a
//! reclaimed key gets a new one) and states the machine's invariant that a stream's cohort is
//! live (`live`, `live_mut`): a cohort is removed only by `Machine::reclaim`, which forgets
//! every stream attached to it in the same step.
//! Never does: decide when a cohort is created or reclaimed, or touch its streams.

use std::collections::HashMap;

use bps_proto::CohortKey;

use crate::cohort::Cohort;
use crate::ids::CohortSerial;

#[derive(Debug)]
pub(super) struct Cohorts {
    by_serial: HashMap<CohortSerial, Cohort>,
    by_key: HashMap<CohortKey, CohortSerial>,
    next_serial: CohortSerial,
}

impl Cohorts {
    pub(super) fn new() -> Cohorts {
        Cohorts {
            by_serial: HashMap::new(),
            by_key: HashMap::new(),
            next_serial: CohortSerial::FIRST,
        }
    }

    /// The serial the next cohort gets; never one used before.
    pub(super) fn issue_serial(&mut self) -> CohortSerial {
        let serial = self.next_serial;
        self.next_serial = serial.next();
        serial
    }

    /// Starts tracking a new cohort under its serial and key.
    pub(super) fn insert(&mut self, cohort: Cohort) {
        self.by_key.insert(cohort.key.clone(), cohort.serial);
        self.by_serial.insert(cohort.serial, cohort);
    }

    /// Stops tracking a cohort, which must be live.
    ///
    /// # Panics
    /// If no cohort has that serial.
    pub(super) fn remove(&mut self, serial: CohortSerial) -> Cohort {
        let cohort = self
            .by_serial
            .remove(&serial)
            .expect("reclaimed cohort is live");
        self.by_key.remove(&cohort.key);
        cohort
    }

    /// The cohort of an attached stream (or of a serial just looked up by key).
    ///
    /// # Panics
    /// If the cohort was reclaimed: the machine never keeps a stream or a serial past it.
    pub(super) fn live(&self, serial: CohortSerial) -> &Cohort {
        self.by_serial
            .get(&serial)
            .expect("a stream's cohort is live")
    }

    /// `live`, mutably.
    pub(super) fn live_mut(&mut self, serial: CohortSerial) -> &mut Cohort {
        self.by_serial
            .get_mut(&serial)
            .expect("a stream's cohort is live")
    }

    /// The cohort with this serial, if it was not reclaimed (a deadline or an unsettled
    /// entry may outlive its cohort).
    pub(super) fn get(&self, serial: CohortSerial) -> Option<&Cohort> {
        self.by_serial.get(&serial)
    }

    /// `get`, mutably.
    pub(super) fn get_mut(&mut self, serial: CohortSerial) -> Option<&mut Cohort> {
        self.by_serial.get_mut(&serial)
    }

    /// The live cohort with canonical key `key`.
    pub(super) fn serial_of(&self, key: &CohortKey) -> Option<CohortSerial> {
        self.by_key.get(key).copied()
    }

    pub(super) fn len(&self) -> usize {
        self.by_serial.len()
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = &Cohort> {
        self.by_serial.values()
    }

    pub(super) fn iter_mut(&mut self) -> impl Iterator<Item = &mut Cohort> {
        self.by_serial.values_mut()
    }
}
