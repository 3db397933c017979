//! Single-threaded wake-ups between tasks of one core.
//!
//! Owns `LocalNotify` (a one-slot waker with a pending flag, so a notify before the wait
//! is not lost) and `yield_turn` (gives the other tasks of the runtime a turn; monoio
//! 0.2.4's own `yield_now` does not, see ARCHITECTURE.md). Never crosses threads: the
//! cross-core path is `inbox.rs`.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

/// Wakes one waiting task; remembers a notify that came before the wait.
#[derive(Debug, Default)]
pub struct LocalNotify {
    pending: Cell<bool>,
    waker: RefCell<Option<Waker>>,
}

impl LocalNotify {
    /// Marks the notify pending and wakes the waiter, if any.
    pub fn notify(&self) {
        self.pending.set(true);
        if let Some(waker) = self.waker.borrow_mut().take() {
            waker.wake();
        }
    }

    /// Completes once a notify is pending, and clears it.
    pub fn notified(&self) -> Notified<'_> {
        Notified { notify: self }
    }

    /// Polls for a pending notify, registering `cx`'s waker when there is none.
    pub fn poll_notified(&self, cx: &mut Context<'_>) -> Poll<()> {
        if self.pending.replace(false) {
            return Poll::Ready(());
        }
        let mut slot = self.waker.borrow_mut();
        match slot.as_ref() {
            Some(waker) if waker.will_wake(cx.waker()) => {}
            _ => *slot = Some(cx.waker().clone()),
        }
        Poll::Pending
    }
}

/// Future of [`LocalNotify::notified`].
#[derive(Debug)]
pub struct Notified<'a> {
    notify: &'a LocalNotify,
}

impl Future for Notified<'_> {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.notify.poll_notified(cx)
    }
}

/// Returns `Pending` once after re-scheduling itself, so every other ready task of this
/// runtime runs before the caller continues.
pub fn yield_turn() -> YieldTurn {
    YieldTurn { yielded: false }
}

/// Future of [`yield_turn`].
#[derive(Debug)]
pub struct YieldTurn {
    yielded: bool,
}

impl Future for YieldTurn {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.yielded {
            return Poll::Ready(());
        }
        self.yielded = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}
