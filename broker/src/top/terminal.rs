//! The terminal: raw mode on the alternate screen, keys, size, drawing, and putting it all
//! back.
//!
//! Owns: [`RawTerminal`] (termios and the alternate screen, restored on drop, on a panic and
//! therefore on every way out of `top`), [`Input`] (keys read with a deadline), the screen
//! size, and the signal flags (`SIGTERM`, `SIGINT`, `SIGHUP` end `top`; `SIGWINCH` redraws).
//! Never does: decide what a key means or what to draw.
//!
//! Plain ANSI escapes and `termios` through libc: the alternate screen (`?1049`), the cursor
//! hidden (`?25`), home and erase. Input keeps `ISIG` off, so Ctrl-C arrives as a key and
//! `top` leaves through the same restoring path as `q`.

use std::io::{self, Write};
use std::os::fd::RawFd;
use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use signal_hook::consts::signal::{SIGHUP, SIGINT, SIGTERM, SIGWINCH};

/// Enter the alternate screen, hide the cursor, clear.
const ENTER: &str = "\x1b[?1049h\x1b[?25l\x1b[H\x1b[2J";
/// Show the cursor, leave the alternate screen (the shell's screen comes back as it was).
const LEAVE: &str = "\x1b[?25h\x1b[?1049l";

/// The size assumed when the terminal does not report one.
const FALLBACK_SIZE: (usize, usize) = (80, 24);

/// The terminal settings before raw mode, for the panic hook.
static ORIGINAL: OnceLock<libc::termios> = OnceLock::new();

/// What waiting for keys gave.
#[derive(Debug, PartialEq, Eq)]
pub enum Input {
    /// The bytes typed (one read's worth).
    Keys(Vec<u8>),
    /// Nothing before the deadline, or a signal arrived.
    Nothing,
    /// The terminal is gone (end of input or hang-up).
    Closed,
}

/// Flags raised by signals.
#[derive(Debug)]
pub struct Signals {
    /// `SIGTERM`, `SIGINT` or `SIGHUP` arrived: leave.
    quit: Arc<AtomicBool>,
    /// `SIGWINCH` arrived since the last check: the size changed.
    resized: Arc<AtomicBool>,
}

impl Signals {
    /// Registers the flags.
    ///
    /// # Errors
    /// When a handler cannot be installed.
    pub fn register() -> io::Result<Signals> {
        let quit = Arc::new(AtomicBool::new(false));
        let resized = Arc::new(AtomicBool::new(false));
        for signal in [SIGTERM, SIGINT, SIGHUP] {
            signal_hook::flag::register(signal, Arc::clone(&quit))?;
        }
        signal_hook::flag::register(SIGWINCH, Arc::clone(&resized))?;
        Ok(Signals { quit, resized })
    }

    /// Whether a quitting signal arrived.
    #[must_use]
    pub fn quit(&self) -> bool {
        self.quit.load(Ordering::Relaxed)
    }

    /// Whether the size changed since the last call.
    #[must_use]
    pub fn take_resized(&self) -> bool {
        self.resized.swap(false, Ordering::Relaxed)
    }
}

/// The terminal in raw mode on the alternate screen. Dropping it restores everything.
#[derive(Debug)]
pub struct RawTerminal {
    original: libc::termios,
}

impl RawTerminal {
    /// Puts the terminal on stdin and stdout into raw mode on the alternate screen.
    ///
    /// # Errors
    /// When stdin or stdout is not a terminal, or the settings cannot be changed.
    pub fn enter() -> Result<RawTerminal, String> {
        if !is_terminal(libc::STDIN_FILENO) || !is_terminal(libc::STDOUT_FILENO) {
            return Err(
                "top needs a terminal on stdin and stdout (--once prints one screen without one)"
                    .to_owned(),
            );
        }
        // SAFETY: termios is plain data; tcgetattr fills it for a valid fd and the result is
        // checked before it is used.
        let mut original: libc::termios = unsafe { std::mem::zeroed() };
        // SAFETY: a valid fd and an exclusively borrowed termios.
        if unsafe { libc::tcgetattr(libc::STDIN_FILENO, &raw mut original) } != 0 {
            return Err(format!(
                "cannot read the terminal settings: {}",
                io::Error::last_os_error()
            ));
        }
        let _ = ORIGINAL.set(original);
        install_panic_restore();
        let mut raw = original;
        raw.c_lflag &= !(libc::ICANON | libc::ECHO | libc::ISIG | libc::IEXTEN);
        raw.c_iflag &= !(libc::IXON | libc::ICRNL);
        raw.c_cc[libc::VMIN] = 1;
        raw.c_cc[libc::VTIME] = 0;
        // SAFETY: a valid fd and a termios derived from the one the terminal gave.
        if unsafe { libc::tcsetattr(libc::STDIN_FILENO, libc::TCSANOW, &raw const raw) } != 0 {
            return Err(format!(
                "cannot put the terminal into raw mode: {}",
                io::Error::last_os_error()
            ));
        }
        let terminal = RawTerminal { original };
        let mut out = io::stdout().lock();
        out.write_all(ENTER.as_bytes())
            .and_then(|()| out.flush())
            .map_err(|error| format!("cannot write to the terminal: {error}"))?;
        Ok(terminal)
    }

    /// The screen's (width, height) in characters.
    #[must_use]
    pub fn size(&self) -> (usize, usize) {
        size_of(libc::STDOUT_FILENO).unwrap_or(FALLBACK_SIZE)
    }

    /// Draws `lines` from the top left, erasing what they do not cover.
    ///
    /// # Errors
    /// When the terminal cannot be written.
    pub fn draw(&mut self, lines: &[String]) -> io::Result<()> {
        let mut screen = String::from("\x1b[H");
        for (index, line) in lines.iter().enumerate() {
            if index > 0 {
                screen.push_str("\r\n");
            }
            screen.push_str(line);
            screen.push_str("\x1b[K");
        }
        screen.push_str("\x1b[J");
        let mut out = io::stdout().lock();
        out.write_all(screen.as_bytes())?;
        out.flush()
    }

    /// Waits up to `timeout` for keys.
    ///
    /// # Errors
    /// When stdin cannot be polled or read.
    pub fn keys(&self, timeout: Duration) -> io::Result<Input> {
        let mut poll = libc::pollfd {
            fd: libc::STDIN_FILENO,
            events: libc::POLLIN,
            revents: 0,
        };
        let timeout_ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
        // SAFETY: one valid, exclusively borrowed pollfd.
        let ready = unsafe { libc::poll(&raw mut poll, 1, timeout_ms) };
        if ready < 0 {
            let error = io::Error::last_os_error();
            return if error.kind() == io::ErrorKind::Interrupted {
                Ok(Input::Nothing)
            } else {
                Err(error)
            };
        }
        if ready == 0 {
            return Ok(Input::Nothing);
        }
        if poll.revents & libc::POLLIN == 0 {
            return Ok(Input::Closed);
        }
        let mut buffer = [0_u8; 64];
        // SAFETY: reads into a valid buffer of its own length.
        let read =
            unsafe { libc::read(libc::STDIN_FILENO, buffer.as_mut_ptr().cast(), buffer.len()) };
        match read {
            0 => Ok(Input::Closed),
            read if read < 0 => {
                let error = io::Error::last_os_error();
                if error.kind() == io::ErrorKind::Interrupted {
                    Ok(Input::Nothing)
                } else {
                    Err(error)
                }
            }
            read => Ok(Input::Keys(
                buffer[..usize::try_from(read).unwrap_or(0)].to_vec(),
            )),
        }
    }
}

impl Drop for RawTerminal {
    fn drop(&mut self) {
        restore(&self.original);
    }
}

/// Leaves the alternate screen and puts the settings back (errors ignored: this runs on the
/// way out, and a terminal that is gone needs nothing restored).
fn restore(original: &libc::termios) {
    let mut out = io::stdout().lock();
    let _ = out.write_all(LEAVE.as_bytes());
    let _ = out.flush();
    // SAFETY: a valid fd and the termios the terminal gave before raw mode.
    unsafe {
        libc::tcsetattr(libc::STDIN_FILENO, libc::TCSANOW, original);
    }
}

/// A panic in `top` restores the terminal before the process's own panic policy runs (it
/// aborts, so `RawTerminal`'s drop never would).
fn install_panic_restore() {
    static INSTALLED: OnceLock<()> = OnceLock::new();
    INSTALLED.get_or_init(|| {
        let report = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if let Some(original) = ORIGINAL.get() {
                restore(original);
            }
            report(info);
        }));
    });
}

/// Whether `fd` is a terminal.
#[must_use]
pub fn is_terminal(fd: RawFd) -> bool {
    // SAFETY: isatty only inspects the fd.
    unsafe { libc::isatty(fd) == 1 }
}

/// The (width, height) of the terminal on `fd`, if it reports a non-zero one.
#[must_use]
pub fn size_of(fd: RawFd) -> Option<(usize, usize)> {
    // SAFETY: winsize is plain data, filled by the ioctl for a terminal fd; checked below.
    let mut size: libc::winsize = unsafe { std::mem::zeroed() };
    // SAFETY: TIOCGWINSZ writes one winsize into the exclusively borrowed struct.
    let status = unsafe { libc::ioctl(fd, libc::TIOCGWINSZ, &raw mut size) };
    (status == 0 && size.ws_col > 0 && size.ws_row > 0)
        .then(|| (usize::from(size.ws_col), usize::from(size.ws_row)))
}
