//! A core's intake: what its control mailbox and its lanes bring, handed to the machine.
//!
//! Owns: taking control messages, credits, home messages (Joins, frames, closes, write
//! notices, W5 relays) and owner messages (sends, backlogs and deliveries for this core's
//! streams, closes, relay outcomes), each within the turn's limits, and answering a relay to
//! the core that holds its POST.
//! Never does: decide how much a turn takes (the turn, in `mod.rs`, passes the budget), or
//! carry out the machine's actions (`actions`).

use bps_proto::{CohortKey, Hash};

use super::{DELIVERIES_PER_TURN_MAX, MESSAGES_PER_TURN, Shard};
use crate::io::control::Control;
use crate::io::encoding::Renditions;
use crate::io::router::{HomeMsg, OwnerMsg, RelayFrames};
use crate::metrics::Stage;
use crate::protocol::{Millis, RelayOutcome, RelayReply};

impl Shard {
    pub(super) fn take_control(&self) {
        let mailbox = &self.link.shared.mailboxes[self.link.core.index()];
        while let Some(message) = mailbox.take() {
            match message {
                Control::Ping { reply } => {
                    let _ = reply.send(());
                }
                Control::Reload(config) => self.machine.borrow_mut().reconfigure(*config),
                Control::Drain => self.link.start_drain(),
                Control::Cohorts { reply } => {
                    let _ = reply.send(self.machine.borrow().summaries(self.link.shared.now()));
                }
                Control::CohortStreams {
                    key,
                    offset,
                    limit,
                    reply,
                } => {
                    let page = self.machine.borrow().cohort_streams(
                        &key,
                        (offset, limit),
                        self.link.shared.now(),
                    );
                    let _ = reply.send(page);
                }
            }
            self.execute();
        }
    }

    pub(super) fn take_credits(&self) {
        let lanes = self.link.router.inbound();
        while let Some(stream) = lanes.pop_credit() {
            self.link.credit(stream);
        }
    }

    pub(super) fn take_home(&self, now: Millis) {
        for _ in 0..MESSAGES_PER_TURN {
            let Some(msg) = self.link.router.pop_home() else {
                return;
            };
            match msg {
                HomeMsg::Join {
                    stream,
                    arrival,
                    frame,
                } => self
                    .machine
                    .borrow_mut()
                    .on_join(now, stream, arrival, frame),
                HomeMsg::Frame {
                    stream,
                    frame,
                    read_at,
                } => {
                    self.timed_since(Stage::ReadToTurn, read_at);
                    self.current_read_at.set(Some(read_at));
                    self.machine.borrow_mut().on_frame(now, stream, frame);
                }
                HomeMsg::Closed { stream, cause } => {
                    self.machine.borrow_mut().on_closed(now, stream, cause);
                    self.cancel_queued(stream);
                }
                HomeMsg::Written { stream, notice } => {
                    self.machine.borrow_mut().on_written(now, stream, notice);
                }
                HomeMsg::Upstream {
                    stream,
                    cohort,
                    root,
                } => {
                    self.machine
                        .borrow_mut()
                        .on_upstream(now, (stream, cohort), root);
                }
                HomeMsg::Spliced { stream, outcome } => {
                    self.machine.borrow_mut().on_splice(now, stream, outcome);
                }
                HomeMsg::Relay {
                    key,
                    named,
                    frames,
                    reply,
                } => self.relay(now, (&key, named.as_ref()), &frames, reply),
            }
            self.execute();
            self.current_read_at.set(None);
        }
    }

    /// W5: a service chunk posted for a cohort of this core. Its one signature check, if
    /// the machine asks for it, goes to the pool like a stream frame's; the outcome goes back
    /// now when no check is needed, else when the result is applied (`Action::Relayed`).
    fn relay(
        &self,
        now: Millis,
        target: (&CohortKey, Option<&Hash>),
        frames: &RelayFrames,
        reply: RelayReply,
    ) {
        let decided = self.machine.borrow_mut().on_relay(
            now,
            target,
            &mut |challenge| (frames.0)(challenge),
            reply,
        );
        self.execute();
        if let Some(outcome) = decided {
            self.answer_relay(reply, outcome);
        }
    }

    /// The outcome of a relay, to the core that holds its POST.
    pub(super) fn answer_relay(&self, reply: RelayReply, outcome: RelayOutcome) {
        let core = reply.core;
        if core == self.link.core {
            self.link.relayed(reply.relay, outcome);
        } else {
            self.link.router.to_owner(
                core,
                OwnerMsg::Relayed {
                    relay: reply.relay,
                    outcome,
                },
            );
        }
    }

    /// Owner messages from other cores; deliveries count against `budget` (what is left of
    /// the fan-out budget), the rest only against `MESSAGES_PER_TURN`. Returns the
    /// deliveries taken.
    pub(super) fn take_owner(&self, budget: usize) -> usize {
        let owner = &self.link.router.inbound().owner;
        let mut fanouts = 0;
        for _ in 0..MESSAGES_PER_TURN {
            if fanouts >= budget || self.turn_deliveries.get() >= DELIVERIES_PER_TURN_MAX {
                break;
            }
            let Some(msg) = owner.pop() else {
                break;
            };
            match msg {
                OwnerMsg::Send {
                    stream,
                    frame,
                    notice,
                } => self.enqueue_single(stream, &frame, notice),
                OwnerMsg::Backlog { stream, frames } => self.enqueue_backlog(stream, frames),
                OwnerMsg::Deliver {
                    frame,
                    targets,
                    facts,
                    from,
                    to,
                    read_at,
                } => {
                    fanouts += 1;
                    let mut renditions = Renditions::new(&frame, &facts, self.link.memory());
                    for stream in &targets.all[from..to] {
                        if !targets.excludes(*stream) {
                            self.enqueue_delivery(*stream, &mut renditions, read_at);
                        }
                    }
                }
                OwnerMsg::Close { stream, reason } => self.close_local(stream, &reason),
                OwnerMsg::Relayed { relay, outcome } => self.link.relayed(relay, outcome),
            }
        }
        fanouts
    }
}
