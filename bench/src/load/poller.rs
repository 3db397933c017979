//! A minimal level-triggered epoll wrapper: the generator multiplexes hundreds or
//! thousands of nonblocking sockets per thread with it.
//!
//! Owns: the epoll file descriptor, registration of a socket under a caller-chosen token,
//! and waiting for readiness ([`Poller::wait`]), plus [`PollSet`], a `ppoll` over a few
//! sockets with nanosecond timeouts for the publishers' pacing.
//!
//! Never: reads or writes a socket; the callers own their sockets and buffers.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

/// Readiness of one registered socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ready {
    /// The token given at registration.
    pub token: u64,
    /// Data (or EOF) can be read.
    pub readable: bool,
    /// The send buffer has room.
    pub writable: bool,
}

/// Which readiness to wait for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interest {
    /// Nothing (errors and hang-ups are still reported): a paused stream.
    Nothing,
    /// Readable only.
    Read,
    /// Writable only.
    Write,
    /// Readable or writable.
    ReadWrite,
}

impl Interest {
    /// The interest for a stream that wants to read and/or write.
    pub fn of(read: bool, write: bool) -> Self {
        match (read, write) {
            (false, false) => Self::Nothing,
            (true, false) => Self::Read,
            (false, true) => Self::Write,
            (true, true) => Self::ReadWrite,
        }
    }

    fn events(self) -> u32 {
        let read = (libc::EPOLLIN | libc::EPOLLRDHUP) as u32;
        let write = libc::EPOLLOUT as u32;
        match self {
            Self::Nothing => 0,
            Self::Read => read,
            Self::Write => write,
            Self::ReadWrite => read | write,
        }
    }
}

/// An epoll instance.
#[derive(Debug)]
pub struct Poller {
    epoll: OwnedFd,
    events: Vec<libc::epoll_event>,
}

/// Events taken from the kernel per wait: a thousand streams ready at once are one wait.
const EVENTS_PER_WAIT: usize = 1024;

impl Poller {
    /// A new epoll instance.
    pub fn new() -> io::Result<Self> {
        // SAFETY: epoll_create1 has no memory arguments; the result is checked below.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd is a fresh descriptor owned by nobody else.
        let epoll = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Self {
            epoll,
            events: vec![libc::epoll_event { events: 0, u64: 0 }; EVENTS_PER_WAIT],
        })
    }

    /// Registers `fd` under `token`.
    pub fn add(&self, fd: RawFd, token: u64, interest: Interest) -> io::Result<()> {
        self.control(libc::EPOLL_CTL_ADD, fd, token, interest)
    }

    /// Changes what `fd` is watched for.
    pub fn modify(&self, fd: RawFd, token: u64, interest: Interest) -> io::Result<()> {
        self.control(libc::EPOLL_CTL_MOD, fd, token, interest)
    }

    /// Stops watching `fd` (closing it does so too).
    pub fn remove(&self, fd: RawFd) -> io::Result<()> {
        self.control(libc::EPOLL_CTL_DEL, fd, 0, Interest::Read)
    }

    fn control(&self, operation: i32, fd: RawFd, token: u64, interest: Interest) -> io::Result<()> {
        let mut event = libc::epoll_event {
            events: interest.events(),
            u64: token,
        };
        // SAFETY: `event` is a valid epoll_event for the duration of the call.
        let result = unsafe { libc::epoll_ctl(self.epoll.as_raw_fd(), operation, fd, &mut event) };
        if result < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Waits up to `timeout` and appends what became ready to `ready` (cleared first).
    pub fn wait(&mut self, ready: &mut Vec<Ready>, timeout: Duration) -> io::Result<()> {
        ready.clear();
        let millis = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
        let capacity = i32::try_from(self.events.len()).unwrap_or(i32::MAX);
        // SAFETY: the buffer holds `capacity` epoll_events and outlives the call.
        let count = unsafe {
            libc::epoll_wait(
                self.epoll.as_raw_fd(),
                self.events.as_mut_ptr(),
                capacity,
                millis,
            )
        };
        if count < 0 {
            let error = io::Error::last_os_error();
            return if error.kind() == io::ErrorKind::Interrupted {
                Ok(())
            } else {
                Err(error)
            };
        }
        let count = usize::try_from(count).unwrap_or(0);
        for event in &self.events[..count] {
            let flags = event.events;
            ready.push(Ready {
                token: event.u64,
                readable: flags
                    & (libc::EPOLLIN | libc::EPOLLRDHUP | libc::EPOLLHUP | libc::EPOLLERR) as u32
                    != 0,
                writable: flags & libc::EPOLLOUT as u32 != 0,
            });
        }
        Ok(())
    }
}

/// A set of sockets to wait on together with nanosecond timeouts (`ppoll`): the
/// publishers' pacing, several publisher streams per thread.
#[derive(Debug, Default)]
pub struct PollSet {
    fds: Vec<libc::pollfd>,
}

impl PollSet {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Forgets every socket.
    pub fn clear(&mut self) {
        self.fds.clear();
    }

    /// Whether the set watches nothing.
    pub fn is_empty(&self) -> bool {
        self.fds.is_empty()
    }

    /// Watches `fd` for reading and/or writing; returns its slot.
    pub fn push(&mut self, fd: RawFd, read: bool, write: bool) -> usize {
        let mut events = 0;
        if read {
            events |= libc::POLLIN;
        }
        if write {
            events |= libc::POLLOUT;
        }
        self.fds.push(libc::pollfd {
            fd,
            events,
            revents: 0,
        });
        self.fds.len() - 1
    }

    /// Waits until a watched socket is ready or `timeout` passes (an empty set sleeps).
    pub fn wait(&mut self, timeout: Duration) -> io::Result<()> {
        let spec = libc::timespec {
            tv_sec: libc::time_t::try_from(timeout.as_secs()).unwrap_or(libc::time_t::MAX),
            tv_nsec: timeout.subsec_nanos() as libc::c_long,
        };
        let count = libc::nfds_t::try_from(self.fds.len()).unwrap_or(libc::nfds_t::MAX);
        // SAFETY: `fds` holds `count` pollfds and `spec` is valid for the call; no signal
        // mask is passed.
        let result = unsafe { libc::ppoll(self.fds.as_mut_ptr(), count, &spec, std::ptr::null()) };
        if result < 0 {
            let error = io::Error::last_os_error();
            if error.kind() != io::ErrorKind::Interrupted {
                return Err(error);
            }
            for fd in &mut self.fds {
                fd.revents = 0;
            }
        }
        Ok(())
    }

    /// (readable, writable) of `slot` after the last wait; an error or hang-up counts as
    /// both, so the owner finds out on its next read or write.
    pub fn readiness(&self, slot: usize) -> (bool, bool) {
        self.fds.get(slot).map_or((false, false), |fd| {
            let failed = fd.revents & (libc::POLLHUP | libc::POLLERR) != 0;
            (
                failed || fd.revents & libc::POLLIN != 0,
                failed || fd.revents & libc::POLLOUT != 0,
            )
        })
    }
}

/// Lets this thread's timed waits wake within 1 µs of their deadline instead of the default
/// 50 µs timer slack (the publishers' pacing depends on it).
pub fn tighten_timer_slack() {
    // SAFETY: PR_SET_TIMERSLACK takes an integer and touches no memory of ours.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1000 as libc::c_ulong);
    }
}

/// Raises the soft limit on open files to the hard limit (thousands of streams); returns
/// the limit in force.
pub fn raise_open_files_limit() -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `limit` is a valid rlimit for both calls.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return 0;
        }
        if limit.rlim_cur < limit.rlim_max {
            let raised = libc::rlimit {
                rlim_cur: limit.rlim_max,
                rlim_max: limit.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                limit = raised;
            }
        }
    }
    limit.rlim_cur
}
