//! What `top` shows: the figures of the latest scrape with rates against the one before.
//!
//! Owns: [`View`] (header, totals, per-core rows, cohort rows), the rate of a counter
//! between two scrapes, and the cohort order ([`SortKey`]).
//! Never does: I/O or formatting (that is `render`).
//!
//! A rate needs two scrapes: on the first, and for a cohort the previous scrape did not
//! have, it is absent (shown as `-`), never a guess. A counter that went down means the
//! broker restarted between the scrapes; its rate is then its new value over the interval,
//! as Prometheus' `rate()` takes it.

use std::cmp::Ordering;

use super::scrape::{CohortFigures, CohortSource, Scrape};

/// The column the cohorts are sorted by, largest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum SortKey {
    /// Deliveries per second (key `d`).
    Deliveries,
    /// Publications per second (key `p`).
    Publications,
    /// Subscribers (key `s`).
    Subscribers,
    /// Resets since the cohort was created (key `r`).
    Resets,
}

impl SortKey {
    /// Every order with its key, in the order the footer lists them.
    pub const ALL: [(char, SortKey); 4] = [
        ('d', SortKey::Deliveries),
        ('p', SortKey::Publications),
        ('s', SortKey::Subscribers),
        ('r', SortKey::Resets),
    ];

    /// The order a key selects, if any.
    #[must_use]
    pub fn of_key(key: char) -> Option<SortKey> {
        SortKey::ALL
            .iter()
            .find(|(known, _)| *known == key)
            .map(|(_, sort)| *sort)
    }

    /// The name shown in the footer.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            SortKey::Deliveries => "deliveries/s",
            SortKey::Publications => "publications/s",
            SortKey::Subscribers => "subscribers",
            SortKey::Resets => "resets",
        }
    }
}

/// One core's row.
#[derive(Clone, Debug, PartialEq)]
pub struct CoreRow {
    pub core: usize,
    /// Percent of one CPU the core's thread used over the interval.
    pub busy_percent: Option<f64>,
    pub connections_open: f64,
    pub frames_in_per_s: Option<f64>,
    pub frames_out_per_s: Option<f64>,
    pub frames_in_flight: f64,
    pub verifications_in_flight: f64,
    pub verify_queue_depth: f64,
    pub heartbeat_age_ms: Option<f64>,
}

/// One cohort's row.
#[derive(Clone, Debug, PartialEq)]
pub struct CohortRow {
    pub id: String,
    pub topic: Option<String>,
    pub binding: String,
    pub subscribers: f64,
    pub deliveries_per_s: Option<f64>,
    pub publications_per_s: Option<f64>,
    /// Resets since the cohort was created.
    pub resets: f64,
}

impl CohortRow {
    /// The figure `sort` orders by (an absent rate counts as zero).
    fn key(&self, sort: SortKey) -> f64 {
        match sort {
            SortKey::Deliveries => self.deliveries_per_s.unwrap_or(0.0),
            SortKey::Publications => self.publications_per_s.unwrap_or(0.0),
            SortKey::Subscribers => self.subscribers,
            SortKey::Resets => self.resets,
        }
    }
}

/// Everything one screen shows.
#[derive(Clone, Debug, PartialEq)]
pub struct View {
    pub driver: Option<String>,
    pub ready: Option<bool>,
    pub connections_open: Option<f64>,
    pub cohorts_live: Option<f64>,
    pub deliveries_per_s: Option<f64>,
    pub publications_per_s: Option<f64>,
    pub resets_per_s: Option<f64>,
    pub memory_worst_case_bytes: Option<f64>,
    pub memory_budget_bytes: Option<f64>,
    pub frame_memory_bytes: Option<f64>,
    pub frame_memory_bytes_max: Option<f64>,
    pub rss_bytes: Option<f64>,
    pub cores: Vec<CoreRow>,
    /// In the order of the `sort` given to [`View::new`].
    pub cohorts: Vec<CohortRow>,
    pub cohort_source: CohortSource,
}

impl View {
    /// The view of `current`, with rates against `previous` when there is one.
    #[must_use]
    pub fn new(current: &Scrape, previous: Option<&Scrape>, sort: SortKey) -> View {
        let seconds = previous.map_or(0.0, |previous| {
            current
                .taken
                .saturating_duration_since(previous.taken)
                .as_secs_f64()
        });
        let rate_of = |pick: fn(&Scrape) -> Option<f64>| {
            rate(previous.and_then(pick), pick(current), seconds)
        };
        let cores = current
            .cores
            .iter()
            .map(|core| {
                let before = previous
                    .and_then(|previous| previous.cores.iter().find(|old| old.core == core.core));
                CoreRow {
                    core: core.core,
                    busy_percent: rate(
                        before.and_then(|old| old.busy_seconds),
                        core.busy_seconds,
                        seconds,
                    )
                    .map(|fraction| fraction * 100.0),
                    connections_open: core.connections_open,
                    frames_in_per_s: rate(
                        before.map(|old| old.frames_in),
                        Some(core.frames_in),
                        seconds,
                    ),
                    frames_out_per_s: rate(
                        before.map(|old| old.frames_out),
                        Some(core.frames_out),
                        seconds,
                    ),
                    frames_in_flight: core.frames_in_flight,
                    verifications_in_flight: core.verifications_in_flight,
                    verify_queue_depth: core.verify_queue_depth,
                    heartbeat_age_ms: core.heartbeat_age_ms,
                }
            })
            .collect();
        let mut view = View {
            driver: current.driver.clone(),
            ready: current.ready,
            connections_open: current.connections_open,
            cohorts_live: current.cohorts_live,
            deliveries_per_s: rate_of(|scrape| scrape.deliveries),
            publications_per_s: rate_of(|scrape| scrape.publications),
            resets_per_s: rate_of(|scrape| scrape.resets),
            memory_worst_case_bytes: current.memory_worst_case_bytes,
            memory_budget_bytes: current.memory_budget_bytes,
            frame_memory_bytes: current.frame_memory_bytes,
            frame_memory_bytes_max: current.frame_memory_bytes_max,
            rss_bytes: current.rss_bytes,
            cores,
            cohorts: current
                .cohorts
                .iter()
                .map(|cohort| cohort_row(cohort, previous, seconds))
                .collect(),
            cohort_source: current.cohort_source.clone(),
        };
        view.sort(sort);
        view
    }

    /// Puts the cohorts in `sort`'s order: largest first, ties by id.
    pub fn sort(&mut self, sort: SortKey) {
        self.cohorts.sort_by(|first, second| {
            second
                .key(sort)
                .partial_cmp(&first.key(sort))
                .unwrap_or(Ordering::Equal)
                .then_with(|| first.id.cmp(&second.id))
        });
    }
}

fn cohort_row(cohort: &CohortFigures, previous: Option<&Scrape>, seconds: f64) -> CohortRow {
    let before =
        previous.and_then(|previous| previous.cohorts.iter().find(|old| old.id == cohort.id));
    CohortRow {
        id: cohort.id.clone(),
        topic: cohort.topic.clone(),
        binding: cohort.binding.clone(),
        subscribers: cohort.subscribers,
        deliveries_per_s: before
            .and_then(|old| rate(Some(old.deliveries), Some(cohort.deliveries), seconds)),
        publications_per_s: before
            .and_then(|old| rate(Some(old.publications), Some(cohort.publications), seconds)),
        resets: cohort.resets,
    }
}

/// The per-second rate of a counter from `before` to `now` over `seconds`; a counter that
/// went down restarted from zero.
#[must_use]
pub fn rate(before: Option<f64>, now: Option<f64>, seconds: f64) -> Option<f64> {
    let (before, now) = (before?, now?);
    if seconds <= 0.0 {
        return None;
    }
    let increase = if now >= before { now - before } else { now };
    Some(increase / seconds)
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::super::scrape::tests::{cohortz_text, metrics_text};
    use super::*;

    fn scrape(taken: Instant, busy: [f64; 2], deliveries: u64, cohortz: [u64; 2]) -> Scrape {
        Scrape::read(
            taken,
            &metrics_text(busy, deliveries, 2),
            Ok(&cohortz_text(cohortz)),
        )
        .expect("reads")
    }

    #[test]
    fn rates_need_two_scrapes_and_survive_a_restart() {
        assert_eq!(rate(Some(10.0), Some(30.0), 2.0), Some(10.0));
        assert_eq!(rate(Some(30.0), Some(4.0), 2.0), Some(2.0));
        assert_eq!(rate(None, Some(4.0), 2.0), None);
        assert_eq!(rate(Some(1.0), None, 2.0), None);
        assert_eq!(rate(Some(1.0), Some(2.0), 0.0), None);
    }

    #[test]
    fn the_first_scrape_has_figures_but_no_rates() {
        let view = View::new(
            &scrape(Instant::now(), [1.0, 1.0], 100, [100, 0]),
            None,
            SortKey::Deliveries,
        );
        assert_eq!(view.connections_open, Some(5.0));
        assert_eq!(view.deliveries_per_s, None);
        assert_eq!(view.cores[0].busy_percent, None);
        assert_eq!(view.cores[0].frames_in_flight, 4.0);
        assert!(
            view.cohorts
                .iter()
                .all(|row| row.deliveries_per_s.is_none())
        );
    }

    #[test]
    fn busy_percent_and_deliveries_per_second_from_two_scrapes() {
        let start = Instant::now();
        let first = scrape(start, [1.0, 0.5], 100, [100, 0]);
        let second = scrape(start + Duration::from_secs(2), [2.5, 0.5], 500, [500, 20]);
        let view = View::new(&second, Some(&first), SortKey::Deliveries);
        assert_eq!(view.cores[0].busy_percent, Some(75.0));
        assert_eq!(view.cores[1].busy_percent, Some(0.0));
        assert_eq!(view.deliveries_per_s, Some(200.0));
        assert_eq!(view.publications_per_s, Some(0.0));
        assert_eq!(view.cores[0].frames_out_per_s, Some(200.0));
        let ids: Vec<&str> = view.cohorts.iter().map(|row| row.id.as_str()).collect();
        assert_eq!(ids, ["00112233aabbccdd", "ffeeddccbbaa9988"]);
        assert_eq!(view.cohorts[0].deliveries_per_s, Some(200.0));
        assert_eq!(view.cohorts[1].deliveries_per_s, Some(10.0));
    }

    #[test]
    fn sort_keys_reorder_the_cohorts() {
        let start = Instant::now();
        let first = scrape(start, [1.0, 1.0], 100, [100, 0]);
        let second = scrape(start + Duration::from_secs(1), [1.0, 1.0], 200, [200, 50]);
        let mut view = View::new(&second, Some(&first), SortKey::Deliveries);
        assert_eq!(view.cohorts[0].id, "00112233aabbccdd");
        view.sort(SortKey::Subscribers);
        assert_eq!(view.cohorts[0].id, "ffeeddccbbaa9988");
        view.sort(SortKey::Resets);
        assert_eq!(view.cohorts[0].id, "00112233aabbccdd");
        assert_eq!(SortKey::of_key('s'), Some(SortKey::Subscribers));
        assert_eq!(SortKey::of_key('S'), None);
        assert_eq!(SortKey::of_key('x'), None);
    }
}
