//! A core's execution of the machine's actions, in the order the machine decided them.
//!
//! Owns: sends, backlogs and deliveries (queued on this core's ports, or sent to the core
//! that owns the stream), closes, credits for consumed frames, the verification jobs and
//! relay outcomes handed on, the machine's timer, and resetting a slow consumer (R26).
//! Never does: decide anything about the protocol, or touch a socket (carriers do, through
//! their ports).

use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;

use super::Shard;
use crate::io::encoding::Renditions;
use crate::io::outbound::Queued;
use crate::io::outgoing::Outgoing;
use crate::io::port::{Closing, Port};
use crate::io::receivers;
use crate::io::router::OwnerMsg;
use crate::io::splice;
use crate::protocol::{
    Action, ChunkFacts, CloseReason, CoreId, Delivered, StreamId, Targets, WriteNotice,
};

impl Shard {
    /// Carries out what the machine decided, in order.
    pub(super) fn execute(&self) {
        let mut actions = std::mem::take(&mut *self.actions.borrow_mut());
        self.machine.borrow_mut().drain_actions(&mut actions);
        for action in actions.drain(..) {
            match action {
                Action::Send {
                    stream,
                    frame,
                    notice,
                } => self.send(stream, frame, notice),
                Action::Backlog { stream, frames } => self.backlog(stream, frames),
                Action::Deliver {
                    frame,
                    targets,
                    facts,
                } => self.deliver(frame, targets, facts),
                Action::Verify { ticket, request } => self.verify(ticket, request),
                Action::Relayed { reply, outcome } => self.answer_relay(reply, outcome),
                Action::Consumed { stream } => self.consumed(stream),
                Action::Close { stream, reason } => {
                    self.cancel_queued(stream);
                    let owner = CoreId::of_stream(stream);
                    if owner == self.link.core {
                        self.close_local(stream, &reason);
                    } else {
                        self.link
                            .router
                            .to_owner(owner, OwnerMsg::Close { stream, reason });
                    }
                }
                Action::Blocklist { peer, until } => {
                    if self.link.may_log() {
                        tracing::info!(%peer, until_ms = until.as_ms(), "peer blocklisted");
                    }
                }
                Action::OpenUpstream {
                    cohort,
                    key,
                    spec,
                    path,
                } => self.upstreams.open(&self.link, cohort, &key, &spec, path),
                Action::DropUpstream { cohort } => self.upstreams.close(cohort),
                Action::OpenSplice {
                    stream,
                    key,
                    join,
                    path,
                } => splice::splice(&self.link, stream, (&key, &join), path),
                Action::ArmTimer { at } => {
                    if self
                        .machine_deadline
                        .get()
                        .is_none_or(|current| at < current)
                    {
                        self.machine_deadline.set(Some(at));
                    }
                }
            }
        }
        *self.actions.borrow_mut() = actions;
        self.report_cancelled();
    }

    /// Closes one of this core's streams as its home core decided (the home knows already).
    pub(super) fn close_local(&self, stream: StreamId, reason: &CloseReason) {
        if let Some(port) = self.link.port(stream) {
            port.mark_reported();
            port.note_closing(Closing::Decided(reason.clone()));
            if reason.graceful() {
                self.link.flush(&port);
            } else {
                port.reset();
            }
        }
    }

    fn send(&self, stream: StreamId, frame: Bytes, notice: Option<WriteNotice>) {
        let owner = CoreId::of_stream(stream);
        if owner == self.link.core {
            self.enqueue_single(stream, &frame, notice);
        } else {
            self.link.router.to_owner(
                owner,
                OwnerMsg::Send {
                    stream,
                    frame,
                    notice,
                },
            );
        }
    }

    /// D11: a history backlog, queued here or sent to the stream's own core.
    fn backlog(&self, stream: StreamId, frames: Vec<Delivered>) {
        let owner = CoreId::of_stream(stream);
        if owner == self.link.core {
            self.enqueue_backlog(stream, frames);
        } else {
            self.link
                .router
                .to_owner(owner, OwnerMsg::Backlog { stream, frames });
        }
    }

    /// A backlog, each frame framed for the stream's carrier like a delivery.
    pub(super) fn enqueue_backlog(&self, stream: StreamId, frames: Vec<Delivered>) {
        let Some(port) = self.link.port(stream) else {
            return;
        };
        let memory = self.link.memory();
        let messages = frames
            .iter()
            .filter_map(|delivered| {
                port.rendition(&mut Renditions::new(
                    &delivered.frame,
                    &delivered.facts,
                    memory,
                ))
            })
            .collect();
        match port.enqueue_backlog(messages) {
            Ok(()) => self.link.touched(&port),
            Err(unread) => self.slow_consumer(&port, &unread),
        }
    }

    /// Fans one frame out: local targets directly, one message per other core.
    fn deliver(&self, frame: Bytes, targets: Targets, facts: Arc<ChunkFacts>) {
        let read_at = self.current_read_at.get();
        let all = Arc::clone(&targets.all);
        let mut from = 0;
        while from < all.len() {
            let core = CoreId::of_stream(all[from]);
            let to =
                from + all[from..].partition_point(|stream| CoreId::of_stream(*stream) == core);
            if core == self.link.core {
                let mut renditions = Renditions::new(&frame, &facts, self.link.memory());
                for stream in &all[from..to] {
                    if !targets.excludes(*stream) {
                        self.enqueue_delivery(*stream, &mut renditions, read_at);
                    }
                }
            } else {
                self.link.router.to_owner(
                    core,
                    OwnerMsg::Deliver {
                        frame: frame.clone(),
                        targets: targets.clone(),
                        facts: Arc::clone(&facts),
                        from,
                        to,
                        read_at,
                    },
                );
            }
            from = to;
        }
    }

    /// One stream's share of a delivery, framed for its carrier.
    pub(super) fn enqueue_delivery(
        &self,
        stream: StreamId,
        renditions: &mut Renditions<'_>,
        read_at: Option<Instant>,
    ) {
        self.turn_deliveries.set(self.turn_deliveries.get() + 1);
        let Some(port) = self.link.port(stream) else {
            return;
        };
        if let Some(message) = port.rendition(renditions) {
            self.enqueue(&port, message, None, read_at);
        }
    }

    /// A frame for one stream (an Ack, a roster on its own), framed for its carrier; one
    /// that its carrier does not pass on is written at once, as far as notices go.
    pub(super) fn enqueue_single(
        &self,
        stream: StreamId,
        frame: &Bytes,
        notice: Option<WriteNotice>,
    ) {
        let Some(port) = self.link.port(stream) else {
            return;
        };
        match port.single(frame, self.link.memory()) {
            Some(message) => self.enqueue(&port, message, notice, None),
            None => {
                if let Some(notice) = notice {
                    self.link.notice_written(&port, notice);
                }
            }
        }
    }

    fn enqueue(
        &self,
        port: &Rc<Port>,
        message: Outgoing,
        notice: Option<WriteNotice>,
        read_at: Option<Instant>,
    ) {
        match port.enqueue(message, notice, read_at) {
            Ok(Queued::Within) => self.link.touched(port),
            Ok(Queued::InSlack) => {
                self.link.metrics().queue_slack.inc();
                self.link.touched(port);
            }
            Err(full) => self.slow_consumer(port, &full),
        }
    }

    /// Resets a stream that does not keep up (R26) and tells its home core.
    fn slow_consumer(&self, port: &Port, why: &dyn std::fmt::Display) {
        receivers::reset_slow(&self.link, port, why);
    }

    fn consumed(&self, stream: StreamId) {
        let owner = CoreId::of_stream(stream);
        if owner == self.link.core {
            self.link.credit(stream);
        } else {
            self.link.router.credit(owner, stream);
        }
    }
}
