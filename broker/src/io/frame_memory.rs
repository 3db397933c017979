//! The broker-wide bound on frame bytes: every frame read from a peer, from the read until
//! the last queue or table holding it lets go, and the read buffers that grew to read them.
//!
//! Owns: `FrameMemory` (bytes in use, the bound `limits.frame_memory_bytes_max`, the cores
//! waiting for room), `frame` (a received frame copied into its own allocation, charged until
//! its last `Bytes` handle drops: in an outbound queue, a roster kept as the latest, a
//! history ring) and reservations for the reads of grown buffers.
//! Never does: refuse a frame already read. The bound is applied before reading: a reader
//! finds no room, withholds its read (TCP pushes back on the peer) and waits for a release,
//! which rings the cores that wait. A read into an idle-sized buffer is not reserved (an
//! idle subscriber's pending read would pin its share forever), so the bound can be passed
//! by at most one idle-sized read per connection (counted in the memory budget), and a
//! grown buffer's read is reserved in full before it is issued.
//!
//! Why a copy: splitting frames out of the read buffer zero-copy would let one queued frame
//! keep its whole 64 KiB read buffer alive, sixteen times its size. Copying each frame once
//! into an exact allocation (the same bytes every receiver then shares) costs a few hundred
//! nanoseconds against tens of microseconds of verification, and it is the only copy on the
//! way to the subscribers: the frame is delivered as read.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use bytes::Bytes;

use super::lane::Doorbell;
use crate::protocol::CoreId;

/// Frame bytes in use, against their bound; shared by every core.
#[derive(Debug)]
pub struct FrameMemory {
    used: AtomicUsize,
    bytes_max: usize,
    /// Cores with a reader waiting for room, and how many of them.
    waiting: Box<[AtomicBool]>,
    waiting_cores: AtomicUsize,
    doorbells: Arc<[Arc<Doorbell>]>,
}

/// Bytes charged to frame memory that are not a frame (a gather list and the facts it
/// copied); dropping it gives them back.
#[derive(Debug)]
pub struct Charge {
    bytes: usize,
    memory: Arc<FrameMemory>,
}

impl Drop for Charge {
    fn drop(&mut self) {
        self.memory.release(self.bytes);
    }
}

/// A frame's bytes and the memory they are charged to; dropping it gives them back.
struct Charged {
    bytes: Box<[u8]>,
    memory: Arc<FrameMemory>,
}

impl AsRef<[u8]> for Charged {
    fn as_ref(&self) -> &[u8] {
        &self.bytes
    }
}

impl Drop for Charged {
    fn drop(&mut self) {
        self.memory.release(self.bytes.len());
    }
}

impl FrameMemory {
    /// Memory of at most `bytes_max` frame bytes for the cores behind `doorbells`.
    pub fn new(bytes_max: usize, doorbells: Arc<[Arc<Doorbell>]>) -> Self {
        FrameMemory {
            used: AtomicUsize::new(0),
            bytes_max,
            waiting: doorbells.iter().map(|_| AtomicBool::new(false)).collect(),
            waiting_cores: AtomicUsize::new(0),
            doorbells,
        }
    }

    /// Bytes in use now.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    /// The bound.
    pub fn bytes_max(&self) -> usize {
        self.bytes_max
    }

    /// Whether a reader may read now.
    pub fn has_room(&self) -> bool {
        self.used() < self.bytes_max
    }

    /// `data` as a frame of its own, charged until its last handle drops.
    pub fn frame(self: &Arc<Self>, data: &[u8]) -> Bytes {
        self.used.fetch_add(data.len(), Ordering::Relaxed);
        Bytes::from_owner(Charged {
            bytes: data.into(),
            memory: Arc::clone(self),
        })
    }

    /// `bytes` of other memory that frames keep alive, charged until the `Charge` drops.
    pub fn charge(self: &Arc<Self>, bytes: usize) -> Charge {
        self.used.fetch_add(bytes, Ordering::Relaxed);
        Charge {
            bytes,
            memory: Arc::clone(self),
        }
    }

    /// Takes `bytes` for a read about to be issued or a buffer about to grow; false when
    /// they do not fit.
    pub fn try_reserve(&self, bytes: usize) -> bool {
        let mut used = self.used();
        loop {
            let Some(after) = used
                .checked_add(bytes)
                .filter(|after| *after <= self.bytes_max)
            else {
                return false;
            };
            match self
                .used
                .compare_exchange_weak(used, after, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return true,
                Err(current) => used = current,
            }
        }
    }

    /// Gives back reserved or charged bytes, ringing the cores that wait for room.
    pub fn release(&self, bytes: usize) {
        let before = self.used.fetch_sub(bytes, Ordering::Relaxed);
        assert!(before >= bytes, "frame memory released more than it held");
        if self.waiting_cores.load(Ordering::Relaxed) > 0 && before - bytes < self.bytes_max {
            for (core, waiting) in self.waiting.iter().enumerate() {
                if waiting.swap(false, Ordering::AcqRel) {
                    self.waiting_cores.fetch_sub(1, Ordering::Relaxed);
                    self.doorbells[core].ring();
                }
            }
        }
    }

    /// Core `core` has a reader waiting for room: ring it at the next release.
    pub fn wait_for_room(&self, core: CoreId) {
        if !self.waiting[core.index()].swap(true, Ordering::AcqRel) {
            self.waiting_cores.fetch_add(1, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::task::{Context, Poll, Waker};

    use super::FrameMemory;
    use crate::io::lane::Doorbell;
    use crate::protocol::CoreId;

    fn memory(bytes_max: usize) -> (Arc<FrameMemory>, Arc<Doorbell>) {
        let bell = Arc::new(Doorbell::default());
        let memory = Arc::new(FrameMemory::new(bytes_max, vec![Arc::clone(&bell)].into()));
        (memory, bell)
    }

    #[test]
    fn a_frame_is_charged_until_its_last_handle_drops() {
        let (memory, _) = memory(100);
        let frame = memory.frame(&[7; 40]);
        let copy = frame.clone();
        assert_eq!(memory.used(), 40);
        assert_eq!(&copy[..], &[7; 40]);
        drop(frame);
        assert_eq!(memory.used(), 40);
        drop(copy);
        assert_eq!(memory.used(), 0);
    }

    #[test]
    fn reservations_never_pass_the_bound_and_a_release_rings_the_waiters() {
        let (memory, bell) = memory(100);
        assert!(memory.try_reserve(60));
        assert!(!memory.try_reserve(41));
        assert!(!memory.has_room() || memory.used() == 60);
        let frame = memory.frame(&[0; 40]);
        assert!(!memory.has_room());
        memory.wait_for_room(CoreId::new(0));
        let mut cx = Context::from_waker(Waker::noop());
        assert_eq!(bell.poll_rung(&mut cx), Poll::Pending);
        drop(frame);
        assert_eq!(bell.poll_rung(&mut cx), Poll::Ready(()));
        memory.release(60);
        assert_eq!(memory.used(), 0);
        assert!(memory.try_reserve(100));
    }
}
