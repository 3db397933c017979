//! Signing an open-loop publisher's messages while the run goes on, a bounded number of
//! frames ahead of its sender (`--sign-ahead`), so a run of any length (a 30-minute soak)
//! holds that many frames in memory instead of every message of the run.
//!
//! Owns: [`SignFeed`], one signing thread per publisher that continues the publisher's
//! live session after the frames presigned before `t0`, and the bounded channel between
//! that thread and the sender, which takes the frames in sequence order.
//!
//! Signing stays off the clock only as long as the thread keeps ahead: one 4 KiB message
//! costs ~40 µs of one core, so a thread keeps ~25 000 messages per second. A feed that
//! falls behind makes the sender wait, and the wait shows as send lag and latency, never
//! as a lower offered rate hidden from the report.
//!
//! Never: writes to a socket, or holds more than `ahead` frames plus the one being signed.

use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread;

use bps_proto::{Hash, Spec};
use bps_verify::SigningKey;
use bytes::Bytes;

use crate::load::presign::{SignJob, session_publisher, sign_next};

/// A frame by sequence, or why signing stopped.
type Signed = Result<(u64, Bytes), String>;

/// The payload of message `sequence`.
pub type PayloadFn = Box<dyn Fn(u64) -> Vec<u8> + Send>;

/// What the signing thread continues.
#[derive(Debug)]
pub struct FeedJob {
    /// The cohort.
    pub spec: Spec,
    /// The publisher's key.
    pub key: SigningKey,
    /// The live stream's challenge.
    pub challenge: Hash,
    /// DATA index of sequence 0.
    pub base_index: u64,
    /// Messages of the run in all (sequences `0..count`).
    pub count: u64,
}

/// The frames of one publisher, signed ahead of its sender.
#[derive(Debug)]
pub struct SignFeed {
    frames: Receiver<Signed>,
    count: u64,
}

impl SignFeed {
    /// Starts a thread that hands on `presigned` (sequences `0..presigned.len()`), then signs
    /// the rest of `job`, at most `ahead` frames ahead of the taker (`ahead` at least the
    /// presigned ones, so those never wait).
    pub fn start(
        job: FeedJob,
        presigned: Vec<Bytes>,
        ahead: usize,
        payload: PayloadFn,
    ) -> std::io::Result<Self> {
        let (sender, frames) = sync_channel(ahead.max(presigned.len()).max(1));
        let count = job.count;
        thread::Builder::new()
            .name("bps-bench-sign".to_owned())
            .spawn(move || feed(&job, presigned, &sender, &payload))?;
        Ok(Self { frames, count })
    }

    /// Messages of the run in all.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The frame of `sequence`, waiting for the signing thread if need be; frames of earlier
    /// sequences (warm-up messages the sender skipped) are dropped on the way.
    pub fn frame(&self, sequence: u64) -> Result<Bytes, String> {
        loop {
            match self.frames.recv() {
                Ok(Ok((signed, frame))) if signed == sequence => return Ok(frame),
                Ok(Ok((signed, _))) if signed < sequence => {}
                Ok(Ok((signed, _))) => {
                    return Err(format!(
                        "signing feed is at sequence {signed}, past the wanted {sequence}"
                    ));
                }
                Ok(Err(error)) => return Err(error),
                Err(_) => return Err(format!("signing feed ended before sequence {sequence}")),
            }
        }
    }
}

/// The signing thread: ends when the run is signed, signing fails, or the taker is gone.
fn feed(job: &FeedJob, presigned: Vec<Bytes>, sender: &SyncSender<Signed>, payload: &PayloadFn) {
    let start = presigned.len() as u64;
    for (sequence, frame) in (0..).zip(presigned) {
        if sender.send(Ok((sequence, frame))).is_err() {
            return;
        }
    }
    let sign_job = SignJob {
        spec: job.spec,
        key: &job.key,
        challenge: job.challenge,
        base_index: job.base_index,
        count: job.count,
    };
    let mut publisher = match session_publisher(&sign_job, start) {
        Ok(publisher) => publisher,
        Err(error) => {
            let _gone = sender.send(Err(format!("signing: {error}")));
            return;
        }
    };
    for sequence in start..job.count {
        let signed = match sign_next(&mut publisher, payload(sequence)) {
            Ok(Some(frame)) => Ok((sequence, frame)),
            Ok(None) => Err(format!("signing: no frame for sequence {sequence}")),
            Err(error) => Err(format!("signing: {error}")),
        };
        let failed = signed.is_err();
        if sender.send(signed).is_err() || failed {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::Duration;

    use bps_proto::Binding;

    use super::*;
    use crate::load::presign::presign;

    fn job(key: &SigningKey, count: u64) -> FeedJob {
        FeedJob {
            spec: Spec {
                topic: [3; 32],
                binding: Binding::FeedTopic,
                admin: Some(key.address()),
                all: false,
                history: false,
                closed: false,
            },
            key: key.clone(),
            challenge: [7; 32],
            base_index: 1000,
            count,
        }
    }

    fn payload_of(sequence: u64) -> Vec<u8> {
        let mut payload = vec![0x5a; 64];
        payload[..8].copy_from_slice(&sequence.to_be_bytes());
        payload
    }

    #[test]
    fn the_feed_continues_the_presigned_frames_with_the_frames_presign_would_sign() {
        let key = SigningKey::random();
        let feed_job = job(&key, 12);
        let sign_job = SignJob {
            spec: feed_job.spec,
            key: &key,
            challenge: feed_job.challenge,
            base_index: feed_job.base_index,
            count: 12,
        };
        let all = presign(&sign_job, 2, &payload_of).expect("signs");
        let feed = SignFeed::start(feed_job, all[..3].to_vec(), 4, Box::new(payload_of))
            .expect("thread starts");
        assert_eq!(feed.count(), 12);
        // Sequences 5 and 6 are skipped, as a sender skips overdue warm-up messages.
        for sequence in [0, 1, 2, 3, 4, 7, 8, 9, 10, 11] {
            assert_eq!(
                feed.frame(sequence).expect("signed"),
                all[sequence as usize],
                "sequence {sequence}"
            );
        }
        assert!(feed.frame(12).is_err(), "the run has 12 messages");
    }

    /// The highest sequence the signing thread asked a payload for, after it had time to
    /// run ahead as far as it may.
    fn highest_signed(highest: &AtomicU64) -> u64 {
        thread::sleep(Duration::from_millis(300));
        highest.load(Ordering::Relaxed)
    }

    #[test]
    fn the_signing_thread_stays_at_most_ahead_frames_in_front_of_the_taker() {
        let key = SigningKey::random();
        let highest = Arc::new(AtomicU64::new(0));
        let recorded = Arc::clone(&highest);
        let payload = Box::new(move |sequence| {
            recorded.fetch_max(sequence, Ordering::Relaxed);
            payload_of(sequence)
        });
        let feed = SignFeed::start(job(&key, 1000), Vec::new(), 3, payload).expect("starts");
        // Three frames queued (0..=2) and the fourth signed, waiting for room.
        assert_eq!(highest_signed(&highest), 3);
        feed.frame(0).expect("signed");
        feed.frame(1).expect("signed");
        assert_eq!(highest_signed(&highest), 5);
    }
}
