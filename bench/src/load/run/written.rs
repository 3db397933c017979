//! What the publishers wrote, against what the counting streams received.
//!
//! Owns: [`Written`]: frames written by cohort and by publisher, what each counting stream
//! should have received (everything of its cohort but its own publisher's, R25), and the
//! counted streams' tally.

use crate::load::plan::Plan;
use crate::load::receiver::CountedStream;
use crate::load::report::CountedFigures;
use crate::load::sender::SendOutcome;

/// Frames the publishers wrote completely, by cohort and by publisher: what each counting
/// stream must have received.
pub(super) struct Written {
    by_cohort: Vec<u64>,
    by_publisher: Vec<u64>,
}

impl Written {
    pub(super) fn of(
        plan: &Plan,
        outcomes: &[SendOutcome],
        cohort_of: &dyn Fn(u32) -> u32,
    ) -> Self {
        let mut written = Self {
            by_cohort: vec![0; plan.cohorts.len()],
            by_publisher: vec![0; plan.publisher_count()],
        };
        for outcome in outcomes {
            if let Some(count) = written
                .by_cohort
                .get_mut(cohort_of(outcome.publisher) as usize)
            {
                *count += outcome.written;
            }
            if let Some(count) = written.by_publisher.get_mut(outcome.publisher as usize) {
                *count = outcome.written;
            }
        }
        written
    }

    /// What one counting stream should have received: all of its cohort, less its own
    /// publisher's (never echo, R25).
    fn expected_for(&self, cohort: u32, own_publisher: Option<u32>) -> u64 {
        let all = self.by_cohort.get(cohort as usize).copied().unwrap_or(0);
        let own = own_publisher
            .and_then(|publisher| self.by_publisher.get(publisher as usize))
            .copied()
            .unwrap_or(0);
        all.saturating_sub(own)
    }

    /// Frames all counting streams should receive: `counted_subscribers` per cohort, plus
    /// every publisher stream of a cohort with several publishers.
    pub(super) fn expected_total(&self, counted_subscribers: &[u64], plan: &Plan) -> u64 {
        let subscribers: u64 = counted_subscribers
            .iter()
            .enumerate()
            .map(|(cohort, count)| count * self.by_cohort.get(cohort).copied().unwrap_or(0))
            .sum();
        let publisher_streams: u64 = plan
            .cohorts
            .iter()
            .filter(|cohort| cohort.publishers.len() > 1)
            .flat_map(|cohort| cohort.publishers.iter())
            .map(|publisher| self.expected_for(publisher.cohort, Some(publisher.global)))
            .sum();
        subscribers + publisher_streams
    }

    /// The counting streams' tally against what was written to them.
    pub(super) fn tally(&self, streams: &[CountedStream], measured_frames: u64) -> CountedFigures {
        let mut figures = CountedFigures {
            measured_frames,
            ..CountedFigures::default()
        };
        for stream in streams {
            let expected = self.expected_for(stream.cohort, stream.own_publisher);
            figures.expected_frames += expected;
            figures.received_frames += stream.frames.min(expected);
            figures.short_streams += u64::from(stream.is_short(expected));
            figures.reset_streams += u64::from(!stream.open);
        }
        figures
    }
}

#[cfg(test)]
mod tests {
    use bps_proto::Binding;

    use super::*;
    use crate::load::latency::LatencySummary;

    fn outcome(publisher: u32, written: u64) -> SendOutcome {
        SendOutcome {
            publisher,
            sent: written,
            written,
            measured: 0,
            measured_sent: 0,
            exhausted: false,
            backlog: 0,
            lag: LatencySummary::default(),
            skipped: 0,
            realtime: false,
            error: None,
        }
    }

    fn stream(
        own_publisher: Option<u32>,
        frames: u64,
        partial_bytes: u64,
        open: bool,
    ) -> CountedStream {
        CountedStream {
            cohort: 0,
            own_publisher,
            frames,
            partial_bytes,
            server_pings: 0,
            open,
        }
    }

    #[test]
    fn counted_streams_expect_everyone_but_their_own_publisher_and_loss_shows() {
        // One ALL cohort of three publishers (D7): 10, 20 and 30 frames written.
        let plan = Plan::new(1, 1, 3, 2, Binding::Mnemonic).expect("plan");
        let outcomes = [outcome(0, 10), outcome(1, 20), outcome(2, 30)];
        let written = Written::of(&plan, &outcomes, &|_| 0);
        assert_eq!(
            written.expected_for(0, None),
            60,
            "a subscriber gets everything"
        );
        assert_eq!(written.expected_for(0, Some(1)), 40, "never its own (R25)");
        // Two counting subscribers and the three publisher streams.
        assert_eq!(written.expected_total(&[2], &plan), 2 * 60 + 50 + 40 + 30);
        let streams = [
            stream(None, 60, 0, true),
            stream(None, 57, 100, false),
            stream(Some(0), 50, 0, true),
            stream(Some(1), 40, 0, true),
            stream(Some(2), 31, 0, true),
        ];
        let tally = written.tally(&streams, 200);
        assert_eq!(tally.expected_frames, 60 + 60 + 50 + 40 + 30);
        assert_eq!(
            tally.received_frames,
            60 + 57 + 50 + 40 + 30,
            "a stream's surplus never hides another's loss"
        );
        assert_eq!((tally.short_streams, tally.reset_streams), (1, 1));
        assert_eq!(tally.measured_frames, 200);
    }
}
