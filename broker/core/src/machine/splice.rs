//! Edge mode's spliced streams (docs/SCALING.md, "Publishers at an edge"): a stream that
//! may publish is verified by the cohort's root against the root's challenge, so the edge
//! joins the root on its behalf and passes every frame through, byte for byte, both ways.
//!
//! Owns: the spliced streams (a local stream and, once the root answered OK, its upstream
//! stream), the per-peer bounds the edge applies to them (R32, R33: a peer's spliced
//! streams in a cohort count as its streams there), the root's Ack handed on as the
//! stream's own, frames relayed in order, and the end of one side ending the other.
//! Backpressure towards the root: a local frame is consumed once it is written upstream
//! (a write notice), so a publisher holds at most its read window between edge and root.
//! Never does: check a spliced frame (the root does, R13..R18) or decide a role.

use std::collections::{HashMap, VecDeque};

use bps_proto::{Address, CohortKey, Frame, RelayId, Spec};
use bytes::Bytes;

use super::Machine;
use crate::action::{Action, CloseReason, FullCause};
use crate::arrival::Arrival;
use crate::counters::Counter;
use crate::ids::{PeerId, StreamId, WriteNotice};

/// One spliced local stream.
#[derive(Debug)]
pub(super) struct Splice {
    peer: PeerId,
    key: CohortKey,
    /// Its upstream stream, once the root answered OK.
    upstream: Option<StreamId>,
    /// Frames read before the root's Ack (at most the read window: none is consumed yet).
    early: VecDeque<Frame>,
}

/// What became of the upstream Join of a spliced stream (`Machine::on_splice`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SpliceOutcome {
    /// The root answered OK (`ack`, the whole frame); `upstream` carries the stream from now on.
    Joined { upstream: StreamId, ack: Bytes },
    /// The root answered FULL or REJECTED (`ack`, the whole frame).
    Refused { ack: Bytes },
    /// No broker of the list could be reached, or none answered with an Ack in time.
    Unreachable,
}

/// The spliced streams of one machine, and what they hold of the per-peer bounds.
#[derive(Debug, Default)]
pub(super) struct Splices {
    by_local: HashMap<StreamId, Splice>,
    by_upstream: HashMap<StreamId, StreamId>,
    /// Local frames written upstream whose consumption waits for the write, by notice.
    written: HashMap<WriteNotice, StreamId>,
    /// Spliced streams per (peer, cohort key), for R32 and R33.
    of_peer: HashMap<(PeerId, CohortKey), usize>,
}

impl Machine {
    /// A Join at an edge that may publish: within the edge's per-peer bounds it is spliced
    /// (the I/O layer joins the root with `path` and reports `on_splice`), else FULL.
    pub(super) fn splice(
        &mut self,
        (stream, arrival): (StreamId, Arrival),
        key: &CohortKey,
        (spec, addr): (&Spec, &Address),
        path: Vec<RelayId>,
    ) {
        let peer = arrival.peer;
        if let Err(cause) = self.admit_splice(peer, key) {
            return self.refuse(stream, None, CloseReason::Full(cause));
        }
        *self.splices.of_peer.entry((peer, key.clone())).or_default() += 1;
        self.splices.by_local.insert(
            stream,
            Splice {
                peer,
                key: key.clone(),
                upstream: None,
                early: VecDeque::new(),
            },
        );
        self.out.push(Action::OpenSplice {
            stream,
            key: key.clone(),
            join: spec.to_join(addr),
            path,
        });
    }

    /// R33 and R32 for a spliced stream: its peer's streams in the cohort, local and
    /// spliced together; and its peer's cohorts, where its splices in one cohort count as
    /// one entry of their own (a peer with a local stream there too counts it twice: a
    /// conservative bound, and the edge keeps no cohort for splices).
    fn admit_splice(&self, peer: PeerId, key: &CohortKey) -> Result<(), FullCause> {
        let spliced = self
            .splices
            .of_peer
            .get(&(peer, key.clone()))
            .copied()
            .unwrap_or(0);
        let local = self
            .cohorts
            .serial_of(key)
            .map_or(0, |serial| self.cohorts.live(serial).streams_of_peer(peer));
        let held = spliced + local;
        if held >= self.config.streams_per_peer_per_cohort_max
            && held >= self.ledger.streams_per_peer_per_cohort_max(peer)
        {
            return Err(FullCause::PeerStreams);
        }
        if spliced == 0 {
            self.ledger.try_enter_cohort(peer)?;
        }
        Ok(())
    }

    /// What the I/O layer's upstream Join of the spliced stream `stream` came to.
    pub(super) fn spliced(&mut self, stream: StreamId, outcome: SpliceOutcome) {
        let Some(splice) = self.splices.by_local.get_mut(&stream) else {
            // The local stream closed while the root was being joined.
            if let SpliceOutcome::Joined { upstream, .. } = outcome {
                self.out.push(Action::Close {
                    stream: upstream,
                    reason: CloseReason::UpstreamUnwanted,
                });
            }
            return;
        };
        match outcome {
            SpliceOutcome::Joined { upstream, ack } => {
                splice.upstream = Some(upstream);
                let early = std::mem::take(&mut splice.early);
                self.splices.by_upstream.insert(upstream, stream);
                self.out.push(send(stream, ack, None));
                for frame in early {
                    self.spliced_frame(stream, frame);
                }
            }
            SpliceOutcome::Refused { ack } => {
                self.out.push(send(stream, ack, None));
                self.end_splice(stream, CloseReason::RootRefused);
            }
            SpliceOutcome::Unreachable => self.end_splice(stream, CloseReason::RootUnreachable),
        }
    }

    /// A frame of a spliced stream, either side; false when `stream` is neither.
    pub(super) fn spliced_frame(&mut self, stream: StreamId, frame: Frame) -> bool {
        if let Some(&local) = self.splices.by_upstream.get(&stream) {
            // From the root: to the local stream as it came; the local queue's R26 bound
            // applies to it as to any receiver.
            self.out.push(send(local, frame.bytes().clone(), None));
            self.out.consumed(stream);
            self.out.registry.add_total(Counter::RelaySplicedFrames, 1);
            return true;
        }
        let Some(splice) = self.splices.by_local.get_mut(&stream) else {
            return false;
        };
        let Some(upstream) = splice.upstream else {
            splice.early.push_back(frame);
            return true;
        };
        let notice = WriteNotice(self.next_notice);
        self.next_notice += 1;
        self.splices.written.insert(notice, stream);
        self.out
            .push(send(upstream, frame.bytes().clone(), Some(notice)));
        self.out.registry.add_total(Counter::RelaySplicedFrames, 1);
        true
    }

    /// A local frame is on its way to the root: its read credit goes back.
    pub(super) fn splice_written(&mut self, notice: WriteNotice) -> bool {
        let Some(local) = self.splices.written.remove(&notice) else {
            return false;
        };
        self.out.consumed(local);
        true
    }

    /// The I/O layer ended one side of a splice; false when `stream` is neither. The other
    /// side ends gracefully, after what is queued for it (a publisher's last frames, an EOS
    /// from the root).
    pub(super) fn splice_closed(&mut self, stream: StreamId) -> bool {
        if let Some(local) = self.splices.by_upstream.remove(&stream) {
            self.end_splice(local, CloseReason::UpstreamEnded);
            return true;
        }
        let Some(splice) = self.splices.by_local.get(&stream) else {
            return false;
        };
        if let Some(upstream) = splice.upstream {
            self.out.push(Action::Close {
                stream: upstream,
                reason: CloseReason::UpstreamEnded,
            });
        }
        self.forget_splice(stream);
        true
    }

    /// Closes a spliced local stream for `reason` and forgets it.
    fn end_splice(&mut self, local: StreamId, reason: CloseReason) {
        self.out.push(Action::Close {
            stream: local,
            reason,
        });
        self.forget_splice(local);
    }

    /// Forgets a spliced local stream: its frames still held are consumed, its upstream's
    /// entry goes, and its peer's entry of the cohort goes with its last splice there.
    fn forget_splice(&mut self, local: StreamId) {
        let Some(splice) = self.splices.by_local.remove(&local) else {
            return;
        };
        if let Some(upstream) = splice.upstream {
            self.splices.by_upstream.remove(&upstream);
        }
        let mut pending = splice.early.len();
        self.splices.written.retain(|_, stream| {
            let mine = *stream == local;
            pending += usize::from(mine);
            !mine
        });
        for _ in 0..pending {
            self.out.consumed(local);
        }
        let slot = (splice.peer, splice.key.clone());
        let left = self.splices.of_peer.get_mut(&slot).map_or(0, |count| {
            *count -= 1;
            *count
        });
        if left == 0 {
            self.splices.of_peer.remove(&slot);
            self.ledger.leave_cohort(splice.peer);
        }
    }

    /// Whether `stream` is either side of a splice.
    pub(super) fn is_spliced(&self, stream: StreamId) -> bool {
        self.splices.by_local.contains_key(&stream)
            || self.splices.by_upstream.contains_key(&stream)
    }
}

fn send(stream: StreamId, frame: Bytes, notice: Option<WriteNotice>) -> Action {
    Action::Send {
        stream,
        frame,
        notice,
    }
}
