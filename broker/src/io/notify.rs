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

/// Returns `Pending` once, so every other task of this runtime that is ready runs, and the
/// driver reaps completions, before the caller continues.
///
/// A task that wakes itself while it is being polled goes to the *front* of monoio 0.2.4's
/// queue (`Schedule::yield_now`) and runs again at once, so `wake_by_ref` would not yield.
/// A task woken while it is not running goes to the back: the wake comes from a task
/// spawned here, which runs after every task already queued, and the runtime submits and
/// reaps the ring between rounds of its queue.
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
        let waker = cx.waker().clone();
        monoio::spawn(async move { waker.wake() });
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::rc::Rc;

    use super::yield_turn;

    fn runtime() -> monoio::Runtime<monoio::time::TimeDriver<monoio::LegacyDriver>> {
        monoio::RuntimeBuilder::<monoio::LegacyDriver>::new()
            .enable_timer()
            .build()
            .expect("a monoio runtime")
    }

    /// How many turns of `yield_turn` a task spawned before them waits to start.
    async fn turns_until_spawned_task_runs() -> usize {
        let started = Rc::new(Cell::new(false));
        let flag = Rc::clone(&started);
        monoio::spawn(async move { flag.set(true) });
        let mut turns = 0;
        while !started.get() && turns < 8 {
            yield_turn().await;
            turns += 1;
        }
        turns
    }

    #[test]
    fn the_main_future_yielding_lets_a_ready_task_run() {
        assert_eq!(runtime().block_on(turns_until_spawned_task_runs()), 1);
    }

    #[test]
    fn a_spawned_task_yielding_lets_a_ready_task_run() {
        let turns =
            runtime().block_on(async { monoio::spawn(turns_until_spawned_task_runs()).await });
        assert_eq!(turns, 1);
    }

    #[test]
    fn a_yielding_task_lets_the_driver_deliver_a_readable_socket() {
        let delivered = runtime().block_on(async {
            let listener = monoio::net::TcpListener::bind("127.0.0.1:0").expect("bind");
            let address = listener.local_addr().expect("address");
            let mut client = std::net::TcpStream::connect(address).expect("connect");
            let (stream, _) = listener.accept().await.expect("accept");
            std::io::Write::write_all(&mut client, b"x").expect("write");
            let got = Rc::new(Cell::new(false));
            let flag = Rc::clone(&got);
            monoio::spawn(async move {
                let (result, _) =
                    monoio::io::AsyncReadRent::read(&mut { stream }, vec![0; 1]).await;
                flag.set(result.is_ok_and(|read| read == 1));
            });
            // Each turn gives the reader a chance and the runtime one look at the driver; the
            // byte is already there, so a few turns suffice and none waits on a timer.
            let mut turns = 0;
            while !got.get() && turns < 64 {
                yield_turn().await;
                turns += 1;
            }
            got.get()
        });
        assert!(
            delivered,
            "the reader never saw the byte while the caller kept yielding"
        );
    }
}
