//! Black-box: `bps-broker top` on a loaded broker, in a real terminal. A detached tmux
//! session of a fixed size runs a shell; the test types `bps-broker top` into it, reads the
//! screen with `capture-pane` until the per-core table shows a busy figure and the loaded
//! cohort its deliveries per second, sends a sort key and sees the order change, quits
//! with `q` (and once with Ctrl-C) and checks that the process exited 0 and left the
//! terminal as it found it (the same `stty -g`, the shell's screen back). `--once` is
//! checked without a terminal, and a broker that is down shows the problem and is retried.
//!
//! tmux comes from scripts/install-deps when it is missing.

mod support;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use bps_client::session::Session;
use bps_proto::Spec;
use support::{Broker, explicit, key, publish, publisher};

/// Time the screen has to show what a step waits for: several refreshes of a debug-built
/// `top` against a debug-built broker on a loaded two-core machine.
const SCREEN_WAIT: Duration = Duration::from_secs(60);

/// How often the screen is read while waiting.
const POLL: Duration = Duration::from_millis(200);

/// The terminal's size.
const COLUMNS: u16 = 120;
const ROWS: u16 = 40;

/// The refresh interval given to `top`: short, so the steps do not wait long for a redraw.
const INTERVAL: &str = "0.5";

/// Spectators of the loaded cohort, and of the idle one (more, so that sorting by
/// subscribers puts the idle cohort first).
const LOADED_SPECTATORS: usize = 3;
const IDLE_SPECTATORS: usize = 6;

/// Pause between two publications of the load: a few hundred deliveries per second.
const PUBLISH_PAUSE: Duration = Duration::from_millis(5);

// ---- the terminal ----

/// A tmux server of its own (`-L`), with one session running `sh`; killed on drop.
struct Tmux {
    socket: String,
}

impl Tmux {
    fn start() -> Tmux {
        ensure_tmux();
        let tmux = Tmux {
            socket: format!("bps-top-test-{}", std::process::id()),
        };
        let columns = COLUMNS.to_string();
        let rows = ROWS.to_string();
        tmux.run(&[
            "-f",
            "/dev/null",
            "new-session",
            "-d",
            "-s",
            "top",
            "-x",
            &columns,
            "-y",
            &rows,
            "sh",
        ]);
        tmux
    }

    fn run(&self, args: &[&str]) -> Output {
        let output = Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .args(args)
            .env_remove("TMUX")
            .stdin(Stdio::null())
            .output()
            .expect("run tmux");
        assert!(
            output.status.success(),
            "tmux {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        output
    }

    /// Types `line` into the shell and presses Enter.
    fn type_line(&self, line: &str) {
        self.run(&["send-keys", "-t", "top", "-l", line]);
        self.run(&["send-keys", "-t", "top", "Enter"]);
    }

    /// Presses one key (tmux's key names: `s`, `q`, `C-c`).
    fn press(&self, key: &str) {
        self.run(&["send-keys", "-t", "top", key]);
    }

    /// What the pane shows now.
    fn screen(&self) -> String {
        String::from_utf8_lossy(&self.run(&["capture-pane", "-p", "-t", "top"]).stdout).into_owned()
    }

    /// Reads the screen until `ready` holds; returns that screen.
    fn wait_for(&self, what: &str, ready: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + SCREEN_WAIT;
        loop {
            let screen = self.screen();
            if ready(&screen) {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "{what}: not on the screen within {SCREEN_WAIT:?}; the screen:\n{screen}"
            );
            thread::sleep(POLL);
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .arg("kill-server")
            .env_remove("TMUX")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// Installs tmux with the repo's scripts/install-deps when it is missing.
fn ensure_tmux() {
    let present = Command::new("tmux")
        .arg("-V")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    if present {
        return;
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/install-deps");
    let status = Command::new(&script)
        .status()
        .unwrap_or_else(|error| panic!("run {}: {error}", script.display()));
    assert!(status.success(), "scripts/install-deps failed: {status}");
}

// ---- the load ----

/// Two cohorts on a running broker: a loaded one (an admin publishing in a background
/// thread, spectators reading everything) and an idle one with more spectators. Stopped
/// and joined on drop.
struct Load {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    /// The cohorts' ids on the screen (their metric series' ids).
    loaded_id: String,
    idle_id: String,
}

impl Load {
    fn start(broker: &Broker) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let mut threads = Vec::new();
        let admin = key(1);
        let loaded = explicit(1, &admin.address(), false);
        let idle = explicit(2, &key(2).address(), false);
        for n in 0..LOADED_SPECTATORS {
            let session = broker.join(&loaded, &key(10 + byte(n)).address());
            threads.push(drain(session, Arc::clone(&stop)));
        }
        for n in 0..IDLE_SPECTATORS {
            let session = broker.join(&idle, &key(40 + byte(n)).address());
            threads.push(drain(session, Arc::clone(&stop)));
        }
        let mut session = broker.join(&loaded, &admin.address());
        let mut admin_publisher = publisher(&loaded, &admin, &session);
        let publishing = Arc::clone(&stop);
        threads.push(thread::spawn(move || {
            let mut sequence = 0_u64;
            while !publishing.load(Ordering::Relaxed) {
                let payload = format!("tick {sequence}");
                publish(&mut admin_publisher, &mut session, &[payload.as_bytes()]);
                sequence += 1;
                // A publisher's stream receives too: read it so its queue never fills.
                while let Ok(Some(_)) = session.recv(Duration::from_millis(1)) {}
                thread::sleep(PUBLISH_PAUSE);
            }
        }));
        Load {
            loaded_id: cohort_id(broker, &loaded),
            idle_id: cohort_id(broker, &idle),
            stop,
            threads,
        }
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

fn byte(n: usize) -> u8 {
    u8::try_from(n).expect("a small count")
}

/// Reads a stream until the test stops or the stream ends.
fn drain(mut session: Session, stop: Arc<AtomicBool>) -> JoinHandle<()> {
    thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            if session.recv(Duration::from_millis(100)).is_err() {
                return;
            }
        }
    })
}

/// The id `/cohortz` gives the cohort of `spec`.
fn cohort_id(broker: &Broker, spec: &Spec) -> String {
    let (status, body) = broker.get("/cohortz");
    assert_eq!(status, 200, "{body}");
    let page: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    let topic = hex::encode(spec.topic);
    page["cohorts"]
        .as_array()
        .expect("a cohorts list")
        .iter()
        .find(|cohort| cohort["topic"] == topic)
        .and_then(|cohort| cohort["id"].as_str())
        .unwrap_or_else(|| panic!("no cohort of topic {topic} in {body}"))
        .to_owned()
}

// ---- reading the screen ----

/// The busy figures of the per-core table (`None` for a `-`).
fn busy_figures(screen: &str) -> Vec<Option<f64>> {
    screen
        .lines()
        .skip_while(|line| !line.trim_start().starts_with("CORE"))
        .skip(1)
        .take_while(|line| !line.trim().is_empty())
        .map(|line| {
            line.split_whitespace()
                .nth(1)
                .and_then(|busy| busy.parse().ok())
        })
        .collect()
}

/// The row of cohort `id` as its columns, and its position among the rows.
fn cohort_row(screen: &str, id: &str) -> Option<(usize, Vec<String>)> {
    screen
        .lines()
        .filter(|line| {
            line.get(..16)
                .is_some_and(|id| id.bytes().all(|b| b.is_ascii_hexdigit()))
        })
        .enumerate()
        .find(|(_, line)| line.starts_with(id))
        .map(|(position, line)| {
            (
                position,
                line.split_whitespace().map(str::to_owned).collect(),
            )
        })
}

/// A rate as the screen shows it (`12.5`, `1.2k`, `3.0M`); `None` for `-`.
fn rate(text: &str) -> Option<f64> {
    let (number, scale) = match text.chars().last()? {
        'k' => (&text[..text.len() - 1], 1e3),
        'M' => (&text[..text.len() - 1], 1e6),
        'G' => (&text[..text.len() - 1], 1e9),
        _ => (text, 1.0),
    };
    number.parse::<f64>().ok().map(|value| value * scale)
}

/// The deliveries per second of cohort `id` (column 5 of its row).
fn deliveries_per_s(screen: &str, id: &str) -> Option<f64> {
    cohort_row(screen, id).and_then(|(_, columns)| rate(columns.get(4)?))
}

/// Whether the screen shows `top`: its per-core table with a busy figure for every core,
/// and the loaded cohort delivering.
fn shows_the_load(screen: &str, load: &Load) -> bool {
    let busy = busy_figures(screen);
    !busy.is_empty()
        && busy.iter().all(Option::is_some)
        && deliveries_per_s(screen, &load.loaded_id).is_some_and(|rate| rate > 0.0)
        && cohort_row(screen, &load.idle_id).is_some()
}

fn position(screen: &str, id: &str) -> usize {
    cohort_row(screen, id)
        .unwrap_or_else(|| panic!("cohort {id} not on the screen:\n{screen}"))
        .0
}

/// A scratch directory for the shell's `stty -g` before and after `top`.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("bps-top-{name}-{}", std::process::id()));
    fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// The shell line that saves the terminal settings, runs `top` with `args`, reports its
/// exit status and saves the settings again.
fn top_line(dir: &Path, args: &str) -> String {
    let binary = env!("CARGO_BIN_EXE_bps-broker");
    format!(
        "stty -g > {before}; '{binary}' top {args}; echo \"top exited $?\"; stty -g > {after}",
        before = dir.join("before").display(),
        after = dir.join("after").display(),
    )
}

/// The exit status the shell echoed (`top exited N` ending a line, after a prompt when the
/// restored screen puts one before it), once tmux shows it; never the command line, whose
/// `top exited $?` is followed by more than digits.
fn exit_line(screen: &str) -> Option<String> {
    screen.lines().find_map(|line| {
        let (_, code) = line.trim().rsplit_once("top exited ")?;
        let digits = !code.is_empty() && code.bytes().all(|byte| byte.is_ascii_digit());
        digits.then(|| format!("top exited {code}"))
    })
}

/// After `top` quit: it exited 0, the shell's screen is back (the alternate screen left),
/// and the terminal settings are what they were.
fn assert_exited_and_restored(tmux: &Tmux, dir: &Path) {
    let screen = tmux.wait_for("top's exit status", |screen| {
        // The echoed line itself, not the command line that contains its text: tmux may show
        // the shell's output after the `after` file exists.
        exit_line(screen).is_some() && dir.join("after").exists()
    });
    assert_eq!(
        exit_line(&screen).as_deref(),
        Some("top exited 0"),
        "{screen}"
    );
    assert!(
        !screen.contains("CORE  BUSY%"),
        "top's screen is still shown after it exited:\n{screen}"
    );
    // The file may be seen before its line is written: wait for it to fill.
    let after = wait_for_file(&dir.join("after"));
    let before = fs::read_to_string(dir.join("before")).expect("before");
    assert_eq!(before, after, "the terminal settings changed");
}

fn wait_for_file(path: &Path) -> String {
    let deadline = Instant::now() + SCREEN_WAIT;
    loop {
        let text = fs::read_to_string(path).unwrap_or_default();
        if !text.trim().is_empty() {
            return text;
        }
        assert!(Instant::now() < deadline, "{} stays empty", path.display());
        thread::sleep(POLL);
    }
}

// ---- the tests ----

#[test]
fn top_shows_a_loaded_broker_sorts_on_a_key_and_restores_the_terminal() {
    let broker = Broker::start(&["limits.streams_per_peer_per_cohort_max=64"]);
    let load = Load::start(&broker);
    let tmux = Tmux::start();
    let dir = scratch("keys");
    tmux.type_line(&top_line(
        &dir,
        &format!("--admin {} --interval {INTERVAL}", broker.admin()),
    ));

    let screen = tmux.wait_for(
        "the per-core busy figures and the loaded cohort's deliveries/s",
        |screen| shows_the_load(screen, &load),
    );
    assert!(screen.contains("*DELIV/S"), "{screen}");
    assert!(screen.contains("sort: deliveries/s"), "{screen}");
    assert!(
        position(&screen, &load.loaded_id) < position(&screen, &load.idle_id),
        "sorted by deliveries, the loaded cohort comes first:\n{screen}"
    );
    print!("top, sorted by deliveries:\n{screen}");

    tmux.press("s");
    let screen = tmux.wait_for("the cohorts sorted by subscribers", |screen| {
        screen.contains("*SUBS") && screen.contains("sort: subscribers")
    });
    assert!(!screen.contains("*DELIV/S"), "{screen}");
    assert!(
        position(&screen, &load.idle_id) < position(&screen, &load.loaded_id),
        "sorted by subscribers, the idle cohort ({IDLE_SPECTATORS} spectators) comes first:\n{screen}"
    );

    tmux.press("q");
    assert_exited_and_restored(&tmux, &dir);
    print!("top, sorted by subscribers:\n{screen}");

    // Ctrl-C leaves the same way.
    let dir = scratch("ctrl-c");
    tmux.type_line("clear");
    tmux.type_line(&top_line(
        &dir,
        &format!("--admin {} --interval {INTERVAL}", broker.admin()),
    ));
    tmux.wait_for("top's screen again", |screen| {
        screen.contains("CORE  BUSY%")
    });
    tmux.press("C-c");
    assert_exited_and_restored(&tmux, &dir);
    drop(load);
}

#[test]
fn top_shows_a_broker_that_is_down_and_keeps_retrying() {
    // A port nothing listens on.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let admin = closed.local_addr().expect("addr");
    drop(closed);
    let tmux = Tmux::start();
    let dir = scratch("down");
    tmux.type_line(&top_line(
        &dir,
        &format!("--admin {admin} --interval {INTERVAL}"),
    ));
    tmux.wait_for("the problem", |screen| {
        screen.contains(&format!("!! cannot connect to {admin}")) && screen.contains("retrying")
    });
    tmux.press("q");
    assert_exited_and_restored(&tmux, &dir);
}

#[test]
fn once_prints_one_screen_with_rates_and_exits() {
    let broker = Broker::start(&["limits.streams_per_peer_per_cohort_max=64"]);
    let load = Load::start(&broker);
    let deadline = Instant::now() + SCREEN_WAIT;
    // The load may take a moment to show in the broker's counters: ask until it does.
    let screen = loop {
        let output = Command::new(env!("CARGO_BIN_EXE_bps-broker"))
            .args(["top", "--once", "--interval", INTERVAL, "--admin"])
            .arg(broker.admin().to_string())
            .stdin(Stdio::null())
            .output()
            .expect("run top --once");
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        assert!(
            output.status.success(),
            "top --once: {:?}\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        if shows_the_load(&stdout, &load) || Instant::now() >= deadline {
            break stdout;
        }
        thread::sleep(POLL);
    };
    assert!(shows_the_load(&screen, &load), "{screen}");
    assert!(
        screen.starts_with(&format!("bps-broker top  admin {}", broker.admin())),
        "{screen}"
    );
    assert!(
        !screen.contains('\x1b'),
        "no terminal escapes in --once output: {screen:?}"
    );
    assert!(
        !screen.contains("sort:"),
        "no keys without a terminal: {screen}"
    );
    drop(load);

    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let admin = closed.local_addr().expect("addr");
    drop(closed);
    let output = Command::new(env!("CARGO_BIN_EXE_bps-broker"))
        .args(["top", "--once", "--admin", &admin.to_string()])
        .stdin(Stdio::null())
        .output()
        .expect("run top --once");
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("cannot connect"), "{stderr}");
}
