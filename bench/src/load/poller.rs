//! A minimal level-triggered epoll wrapper: the generator multiplexes hundreds or
//! thousands of nonblocking sockets per thread with it.
//!
//! Owns: the epoll file descriptor, registration of a socket under a caller-chosen token,
//! and waiting for readiness ([`Poller::wait`]), plus [`wait_fd`], a one-socket `ppoll` with
//! nanosecond timeouts for the publishers' pacing.
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

/// Events taken from the kernel per wait.
const EVENTS_PER_WAIT: usize = 512;

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

/// Waits until `fd` is readable (or also writable when `write` is set) or `timeout` passes,
/// with nanosecond resolution (`ppoll`). Returns (readable, writable).
pub fn wait_fd(fd: RawFd, write: bool, timeout: Duration) -> io::Result<(bool, bool)> {
    let mut events = libc::POLLIN;
    if write {
        events |= libc::POLLOUT;
    }
    let mut poll = libc::pollfd {
        fd,
        events,
        revents: 0,
    };
    let spec = libc::timespec {
        tv_sec: libc::time_t::try_from(timeout.as_secs()).unwrap_or(libc::time_t::MAX),
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: `poll` and `spec` are valid for the call; no signal mask is passed.
    let result = unsafe { libc::ppoll(&mut poll, 1, &spec, std::ptr::null()) };
    if result < 0 {
        let error = io::Error::last_os_error();
        return if error.kind() == io::ErrorKind::Interrupted {
            Ok((false, false))
        } else {
            Err(error)
        };
    }
    let readable = poll.revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0;
    let writable = poll.revents & libc::POLLOUT != 0;
    Ok((readable, writable))
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
