//! One scrape of a running broker: the figures `top` shows, read from `/metrics` and
//! `/cohortz` at one instant.
//!
//! Owns: [`Scrape`], [`CoreFigures`], [`CohortFigures`] and their construction from the
//! text of the two endpoints (which families and fields mean what).
//! Never does: I/O or arithmetic across scrapes (rates are `model`'s).
//!
//! Cohorts come from `/cohortz` (every live cohort up to its largest page, with its topic)
//! when it answered, else from the per-cohort series of `/metrics` (the
//! `limits.cohort_series_max` cohorts with the most subscribers, without topics).

use std::time::Instant;

use serde_json::Value;

use super::exposition::{Exposition, Series};

/// Counters whose sum is a cohort's or the broker's publications: every accepted frame that
/// is fanned out (AUTH frames are accepted but never delivered).
pub const PUBLICATION_COUNTERS: [&str; 3] = ["accepted_data", "accepted_roster", "accepted_eos"];

/// The counter of resets: streams reset because their outbound queue was full (R26).
pub const RESET_COUNTER: &str = "queue_reset";

/// The counter of deliveries: frames handed to the I/O layer for receiving streams.
pub const DELIVERY_COUNTER: &str = "deliveries";

/// One core's figures.
#[derive(Clone, Debug, PartialEq)]
pub struct CoreFigures {
    /// The core's index (the `core` label).
    pub core: usize,
    /// CPU seconds its thread has used (`bps_core_busy_seconds_total`); absent when the
    /// broker does not export it or the thread is not running.
    pub busy_seconds: Option<f64>,
    /// Connections open on the core.
    pub connections_open: f64,
    /// Frames read and written since start.
    pub frames_in: f64,
    pub frames_out: f64,
    /// Frames read and not yet consumed by their home core.
    pub frames_in_flight: f64,
    /// Verification jobs issued and not answered.
    pub verifications_in_flight: f64,
    /// Verification jobs waiting in the queue (core 0 reports the pool's).
    pub verify_queue_depth: f64,
    /// Milliseconds since the core last began a turn.
    pub heartbeat_age_ms: Option<f64>,
}

/// One cohort's figures.
#[derive(Clone, Debug, PartialEq)]
pub struct CohortFigures {
    /// The metric series' id: 16 hex digits of a hash of the canonical key.
    pub id: String,
    /// The topic in hex (only from `/cohortz`).
    pub topic: Option<String>,
    /// The binding's name.
    pub binding: String,
    /// Streams receiving deliveries: publishers and spectators (R25).
    pub subscribers: f64,
    /// Counters since the cohort was created.
    pub deliveries: f64,
    pub publications: f64,
    pub resets: f64,
}

/// Where the cohorts of a scrape came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CohortSource {
    /// `/cohortz` answered.
    Cohortz,
    /// `/cohortz` failed (the reason): the per-cohort series of `/metrics`.
    Metrics(String),
}

/// The figures of one scrape.
#[derive(Clone, Debug)]
pub struct Scrape {
    /// When the scrape was taken (just before `/metrics` was asked).
    pub taken: Instant,
    /// `io_uring` or `epoll`.
    pub driver: Option<String>,
    /// `bps_ready`: taking new streams (true) or draining (false).
    pub ready: Option<bool>,
    pub connections_open: Option<f64>,
    pub cohorts_live: Option<f64>,
    /// Broker-wide counters since start.
    pub deliveries: Option<f64>,
    pub publications: Option<f64>,
    pub resets: Option<f64>,
    /// The memory budget: the worst case of the running configuration, and the budget.
    pub memory_worst_case_bytes: Option<f64>,
    pub memory_budget_bytes: Option<f64>,
    /// Frame memory held now, and its bound.
    pub frame_memory_bytes: Option<f64>,
    pub frame_memory_bytes_max: Option<f64>,
    /// Resident memory of the broker process.
    pub rss_bytes: Option<f64>,
    /// Per core, in core order.
    pub cores: Vec<CoreFigures>,
    /// The live cohorts this scrape saw (see the module header).
    pub cohorts: Vec<CohortFigures>,
    /// Where `cohorts` came from.
    pub cohort_source: CohortSource,
}

impl Scrape {
    /// The figures of the `/metrics` text `metrics` and the `/cohortz` answer `cohortz`
    /// (its JSON body, or why it failed), taken at `taken`.
    ///
    /// # Errors
    /// When `/metrics` does not parse, or is not a bps-broker's (no `bps_cores`).
    pub fn read(
        taken: Instant,
        metrics: &str,
        cohortz: Result<&str, String>,
    ) -> Result<Scrape, String> {
        let exposition = Exposition::parse(metrics)?;
        if exposition.value("bps_cores").is_none() {
            return Err("the metrics have no bps_cores: not a bps-broker's admin port".to_owned());
        }
        let sum = |names: &[&str]| -> Option<f64> {
            names
                .iter()
                .map(|name| exposition.value(&format!("bps_{name}_total")))
                .sum()
        };
        let (cohorts, cohort_source) = match cohortz.and_then(cohorts_of_cohortz) {
            Ok(cohorts) => (cohorts, CohortSource::Cohortz),
            Err(reason) => (
                cohorts_of_metrics(&exposition),
                CohortSource::Metrics(reason),
            ),
        };
        Ok(Scrape {
            taken,
            driver: exposition
                .label_of("bps_driver_info", "driver")
                .map(str::to_owned),
            ready: exposition.value("bps_ready").map(|ready| ready > 0.0),
            connections_open: exposition.value("bps_connections_open"),
            cohorts_live: exposition.value("bps_cohorts_live"),
            deliveries: sum(&[DELIVERY_COUNTER]),
            publications: sum(&PUBLICATION_COUNTERS),
            resets: sum(&[RESET_COUNTER]),
            memory_worst_case_bytes: exposition.value("bps_memory_worst_case_bytes"),
            memory_budget_bytes: exposition.value("bps_memory_budget_bytes"),
            frame_memory_bytes: exposition.value("bps_frame_memory_bytes"),
            frame_memory_bytes_max: exposition.value("bps_frame_memory_bytes_max"),
            rss_bytes: exposition.value("bps_rss_bytes"),
            cores: cores_of(&exposition),
            cohorts,
            cohort_source,
        })
    }
}

/// The per-core figures, one entry per core any `bps_core_*` series names.
fn cores_of(exposition: &Exposition) -> Vec<CoreFigures> {
    let per_core = |name: &str| -> Vec<(usize, f64)> {
        exposition
            .family(name)
            .iter()
            .filter_map(|series| Some((series.label("core")?.parse().ok()?, series.value)))
            .collect()
    };
    let busy = per_core("bps_core_busy_seconds_total");
    let open = per_core("bps_core_connections_open");
    let frames_in = per_core("bps_core_frames_in_total");
    let frames_out = per_core("bps_core_frames_out_total");
    let in_flight = per_core("bps_core_frames_in_flight");
    let verifying = per_core("bps_core_verifications_in_flight");
    let queue = per_core("bps_core_verify_queue_depth");
    let heartbeat = per_core("bps_core_heartbeat_age_ms");
    let find = |figures: &[(usize, f64)], core: usize| {
        figures
            .iter()
            .find(|(index, _)| *index == core)
            .map(|(_, value)| *value)
    };
    let mut indices: Vec<usize> = [&busy, &open, &in_flight, &heartbeat]
        .iter()
        .flat_map(|figures| figures.iter().map(|(core, _)| *core))
        .collect();
    indices.sort_unstable();
    indices.dedup();
    indices
        .into_iter()
        .map(|core| CoreFigures {
            core,
            busy_seconds: find(&busy, core),
            connections_open: find(&open, core).unwrap_or(0.0),
            frames_in: find(&frames_in, core).unwrap_or(0.0),
            frames_out: find(&frames_out, core).unwrap_or(0.0),
            frames_in_flight: find(&in_flight, core).unwrap_or(0.0),
            verifications_in_flight: find(&verifying, core).unwrap_or(0.0),
            verify_queue_depth: find(&queue, core).unwrap_or(0.0),
            heartbeat_age_ms: find(&heartbeat, core),
        })
        .collect()
}

/// The cohorts with their own series in `/metrics`.
fn cohorts_of_metrics(exposition: &Exposition) -> Vec<CohortFigures> {
    let mut cohorts = Vec::new();
    for series in exposition.family("bps_cohort_streams") {
        if let Some(cohort) = cohort_of(&mut cohorts, series)
            && matches!(series.label("role"), Some("publisher" | "spectator"))
        {
            cohort.subscribers += series.value;
        }
    }
    let counters: [(&str, FigureOf); 5] = [
        (DELIVERY_COUNTER, |cohort| &mut cohort.deliveries),
        (RESET_COUNTER, |cohort| &mut cohort.resets),
        (PUBLICATION_COUNTERS[0], |cohort| &mut cohort.publications),
        (PUBLICATION_COUNTERS[1], |cohort| &mut cohort.publications),
        (PUBLICATION_COUNTERS[2], |cohort| &mut cohort.publications),
    ];
    for (name, figure) in counters {
        for series in exposition.family(&format!("bps_cohort_{name}_total")) {
            if let Some(cohort) = cohort_of(&mut cohorts, series) {
                *figure(cohort) += series.value;
            }
        }
    }
    cohorts
}

/// Picks the figure of a cohort that a per-cohort counter adds to.
type FigureOf = fn(&mut CohortFigures) -> &mut f64;

/// The entry of the cohort a per-cohort series names, added when new.
fn cohort_of<'a>(
    cohorts: &'a mut Vec<CohortFigures>,
    series: &Series,
) -> Option<&'a mut CohortFigures> {
    let id = series.label("cohort")?;
    let index = match cohorts.iter().position(|cohort| cohort.id == id) {
        Some(index) => index,
        None => {
            cohorts.push(CohortFigures {
                id: id.to_owned(),
                topic: None,
                binding: series.label("binding").unwrap_or_default().to_owned(),
                subscribers: 0.0,
                deliveries: 0.0,
                publications: 0.0,
                resets: 0.0,
            });
            cohorts.len() - 1
        }
    };
    cohorts.get_mut(index)
}

/// The cohorts of a `/cohortz` page.
fn cohorts_of_cohortz(body: &str) -> Result<Vec<CohortFigures>, String> {
    let page: Value =
        serde_json::from_str(body).map_err(|error| format!("/cohortz is not JSON: {error}"))?;
    let cohorts = page["cohorts"]
        .as_array()
        .ok_or("/cohortz has no cohorts list")?;
    cohorts
        .iter()
        .map(|cohort| {
            let counter = |name: &str| cohort["counters"][name].as_f64().unwrap_or(0.0);
            Ok(CohortFigures {
                id: cohort["id"]
                    .as_str()
                    .ok_or("a /cohortz cohort without an id")?
                    .to_owned(),
                topic: cohort["topic"].as_str().map(str::to_owned),
                binding: cohort["binding"].as_str().unwrap_or_default().to_owned(),
                subscribers: cohort["subscribers"].as_f64().unwrap_or(0.0),
                deliveries: counter(DELIVERY_COUNTER),
                publications: PUBLICATION_COUNTERS.iter().map(|name| counter(name)).sum(),
                resets: counter(RESET_COUNTER),
            })
        })
        .collect()
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// A `/metrics` text of a two-core broker with one shown cohort, as the broker renders
    /// its families (abridged to the ones `top` reads, plus neighbours it must ignore).
    pub fn metrics_text(busy: [f64; 2], deliveries: u64, resets: u64) -> String {
        format!(
            "# TYPE bps_driver_info gauge\nbps_driver_info{{driver=\"epoll\"}} 1\n\
             bps_cores 2\nbps_ready 1\nbps_connections_open 5\nbps_cohorts_live 1\n\
             bps_deliveries_total {deliveries}\nbps_accepted_data_total 10\n\
             bps_accepted_roster_total 1\nbps_accepted_eos_total 0\nbps_accepted_auth_total 7\n\
             bps_queue_reset_total {resets}\nbps_queue_resets_total 99\n\
             bps_memory_worst_case_bytes 536870912\nbps_memory_budget_bytes 1073741824\n\
             bps_frame_memory_bytes 1048576\nbps_frame_memory_bytes_max 67108864\n\
             bps_rss_bytes 41943040\n\
             bps_core_busy_seconds_total{{core=\"0\"}} {}\n\
             bps_core_busy_seconds_total{{core=\"1\"}} {}\n\
             bps_core_connections_open{{core=\"0\"}} 3\nbps_core_connections_open{{core=\"1\"}} 2\n\
             bps_core_frames_in_total{{core=\"0\"}} 100\nbps_core_frames_in_total{{core=\"1\"}} 0\n\
             bps_core_frames_out_total{{core=\"0\"}} {deliveries}\nbps_core_frames_out_total{{core=\"1\"}} 0\n\
             bps_core_frames_in_flight{{core=\"0\"}} 4\nbps_core_frames_in_flight{{core=\"1\"}} 0\n\
             bps_core_verifications_in_flight{{core=\"0\"}} 2\n\
             bps_core_verify_queue_depth{{core=\"0\"}} 6\n\
             bps_core_heartbeat_age_ms{{core=\"0\"}} 1\nbps_core_heartbeat_age_ms{{core=\"1\"}} 3\n\
             bps_cohort_streams{{cohort=\"00112233aabbccdd\",binding=\"feed_topic\",admin=\"ab\",role=\"spectator\"}} 3\n\
             bps_cohort_streams{{cohort=\"00112233aabbccdd\",binding=\"feed_topic\",admin=\"ab\",role=\"publisher\"}} 1\n\
             bps_cohort_streams{{cohort=\"00112233aabbccdd\",binding=\"feed_topic\",admin=\"ab\",role=\"pending\"}} 2\n\
             bps_cohort_deliveries_total{{cohort=\"00112233aabbccdd\",binding=\"feed_topic\",admin=\"ab\"}} {deliveries}\n\
             bps_cohort_accepted_data_total{{cohort=\"00112233aabbccdd\",binding=\"feed_topic\",admin=\"ab\"}} 10\n\
             bps_cohort_accepted_roster_total{{cohort=\"00112233aabbccdd\",binding=\"feed_topic\",admin=\"ab\"}} 1\n\
             bps_cohort_queue_reset_total{{cohort=\"00112233aabbccdd\",binding=\"feed_topic\",admin=\"ab\"}} {resets}\n",
            busy[0], busy[1]
        )
    }

    /// A `/cohortz` page with two cohorts.
    pub fn cohortz_text(deliveries: [u64; 2]) -> String {
        serde_json::json!({
            "cohorts_total": 2,
            "cohorts": [
                {
                    "id": "00112233aabbccdd", "topic": "aa".repeat(32), "binding": "feed_topic",
                    "subscribers": 4,
                    "counters": {"deliveries": deliveries[0], "accepted_data": 10, "accepted_roster": 1,
                                 "accepted_eos": 0, "accepted_auth": 7, "queue_reset": 2}
                },
                {
                    "id": "ffeeddccbbaa9988", "topic": "bb".repeat(32), "binding": "mnemonic",
                    "subscribers": 9,
                    "counters": {"deliveries": deliveries[1], "queue_reset": 0}
                }
            ]
        })
        .to_string()
    }

    #[test]
    fn reads_the_broker_wide_and_per_core_figures() {
        let scrape = Scrape::read(
            Instant::now(),
            &metrics_text([1.5, 0.25], 400, 2),
            Err("down".to_owned()),
        )
        .expect("reads");
        assert_eq!(scrape.driver.as_deref(), Some("epoll"));
        assert_eq!(scrape.ready, Some(true));
        assert_eq!(scrape.connections_open, Some(5.0));
        assert_eq!(scrape.deliveries, Some(400.0));
        // DATA, ROSTER and EOS; never AUTH.
        assert_eq!(scrape.publications, Some(11.0));
        // The R26 protocol counter, not the I/O layer's queue_resets.
        assert_eq!(scrape.resets, Some(2.0));
        assert_eq!(scrape.memory_budget_bytes, Some(1_073_741_824.0));
        assert_eq!(scrape.cores.len(), 2);
        assert_eq!(scrape.cores[0].busy_seconds, Some(1.5));
        assert_eq!(scrape.cores[0].verify_queue_depth, 6.0);
        assert_eq!(scrape.cores[1].connections_open, 2.0);
        assert_eq!(scrape.cores[1].verifications_in_flight, 0.0);
        assert_eq!(scrape.cores[1].heartbeat_age_ms, Some(3.0));
    }

    #[test]
    fn cohorts_come_from_cohortz_or_else_from_the_metrics_series() {
        let metrics = metrics_text([1.0, 1.0], 400, 2);
        let cohortz = cohortz_text([400, 7]);
        let scrape = Scrape::read(Instant::now(), &metrics, Ok(&cohortz)).expect("reads");
        assert_eq!(scrape.cohort_source, CohortSource::Cohortz);
        assert_eq!(scrape.cohorts.len(), 2);
        assert_eq!(scrape.cohorts[0].topic, Some("aa".repeat(32)));
        assert_eq!(scrape.cohorts[0].publications, 11.0);
        assert_eq!(scrape.cohorts[0].resets, 2.0);
        assert_eq!(scrape.cohorts[1].subscribers, 9.0);
        assert_eq!(scrape.cohorts[1].deliveries, 7.0);

        let scrape =
            Scrape::read(Instant::now(), &metrics, Err("answered 503".to_owned())).expect("reads");
        assert_eq!(
            scrape.cohort_source,
            CohortSource::Metrics("answered 503".to_owned())
        );
        assert_eq!(
            scrape.cohorts,
            vec![CohortFigures {
                id: "00112233aabbccdd".to_owned(),
                topic: None,
                binding: "feed_topic".to_owned(),
                // Publisher and spectators receive; the pending stream does not.
                subscribers: 4.0,
                deliveries: 400.0,
                publications: 11.0,
                resets: 2.0,
            }]
        );
        let broken =
            Scrape::read(Instant::now(), &metrics, Ok("{\"nope\": 1}")).expect("still reads");
        assert!(matches!(broken.cohort_source, CohortSource::Metrics(_)));
    }

    #[test]
    fn refuses_text_that_is_not_a_brokers_metrics() {
        let error = Scrape::read(Instant::now(), "node_load1 0.5\n", Err(String::new()))
            .expect_err("not ours");
        assert!(error.contains("bps_cores"), "{error}");
        let error =
            Scrape::read(Instant::now(), "<html>\n", Err(String::new())).expect_err("not metrics");
        assert!(error.contains("metrics line 1"), "{error}");
    }
}
