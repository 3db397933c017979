//! The table of config keys: every key of the broker declared once.
//!
//! Owns: `KEYS` (section, name, default, unit, bounds, reloadable or restart-only, and why,
//! one row per key), the limits the bounds name, and the defaults as a TOML table. Parsing
//! (`layers`), validation (`rules`), reload (`reload`), the example config and the key
//! reference (`render`) all read this table, so a key cannot disagree with itself.
//! Never does: hold a value of a running broker (that is `BrokerConfig`) or a rule between
//! keys (that is `rules`).
//!
//! The keys of the protocol core are the fields of `ProtocolConfig`, the plain limits the
//! machine reads: its field names are the rows' names (`is_core`), and its defaults the rows'
//! defaults, so those fields and numbers are written once, in bps-core.

use std::sync::LazyLock;

use bps_core::ProtocolConfig;
use bps_core::ids::IPV6_PEER_PREFIX_BITS;
use bps_proto::BROADCAST_FRAME_BYTES_MAX;
use bps_verify::pool::BATCH_WAIT_US_MAX;
use toml::{Table, Value};

use bps_core::HistoryPolicy;

/// Largest `server.cores`: a `StreamId` keeps the owning core in 8 bits.
pub const CORES_MAX: usize = 256;

/// Largest `server.write_batch_frames_max`: Linux's `IOV_MAX`, the most buffers one vectored
/// write may carry.
pub const WRITE_BATCH_FRAMES_MAX: usize = 1024;

/// Largest `server.write_coalesce_us`: past 10 ms the wait costs more latency than the
/// fuller writes save.
pub const WRITE_COALESCE_US_MAX: u64 = 10_000;

/// Largest `verify.idle_inline_jobs_max`: sixteen same-owner checks are about 0.2 ms of the
/// core (docs/BENCHMARKS.md), past which the core's other streams wait longer than a
/// hand-off to a worker would have cost.
pub const IDLE_INLINE_JOBS_MAX: usize = 16;

/// Largest `ws.service_posts_per_peer_per_s`: an admin posts a roster when its roster
/// changes; more than this per second is a flood, not a use.
pub const SERVICE_POSTS_PER_PEER_PER_S_MAX: u32 = 1_000;

/// Shortest `limits.ipv6_prefix_bits`: a /16 already spans many operators, so a shorter
/// prefix would let one site's bound refuse strangers.
pub const IPV6_PREFIX_BITS_MIN: i64 = 16;

/// One config key: everything an operator, the loader and the docs need to know about it.
#[derive(Debug)]
pub struct Key {
    /// The TOML section (`[limits]`).
    pub section: &'static str,
    /// The key within its section (`cohorts_max`).
    pub name: &'static str,
    /// The value when no source sets it.
    pub default: DefaultValue,
    /// What one unit of the value is.
    pub unit: Unit,
    /// The values a single key may take (rules between keys are in `rules`).
    pub bounds: Bounds,
    /// A boolean key (`section.key`) that must be true for `bounds` to apply: the bounds of
    /// a listener's keys matter only when it runs.
    pub gate: Option<&'static str>,
    /// Whether SIGHUP may change the key in a running broker.
    pub reload: Reload,
    /// What the key does and why it is bounded: the example config's comment and the
    /// reference's description.
    pub why: &'static str,
}

/// A key's default.
#[derive(Debug)]
pub enum DefaultValue {
    /// An integer.
    Int(i64),
    /// A string (addresses and enumerations are strings in TOML).
    Str(&'static str),
    /// A boolean.
    Bool(bool),
    /// The empty list.
    List,
    /// A list of strings.
    Strs(&'static [&'static str]),
    /// The protocol core's default, read from `ProtocolConfig::default()`.
    Core(fn(&ProtocolConfig) -> Value),
}

/// The unit of a key's value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    /// A number of things (the key's name says which).
    Count,
    /// Bytes.
    Bytes,
    /// Milliseconds.
    Milliseconds,
    /// Microseconds.
    Microseconds,
    /// Events per second.
    PerSecond,
    /// Percent.
    Percent,
    /// Bits of an address prefix.
    Bits,
    /// An `IP:PORT` socket address.
    Address,
    /// Text: a name, a list of names, a switch or a path.
    Text,
}

impl Unit {
    /// The unit as the reference writes it (empty for a plain count or text).
    #[must_use]
    pub fn label(self) -> &'static str {
        match self {
            Unit::Count | Unit::Text => "",
            Unit::Bytes => "bytes",
            Unit::Milliseconds => "ms",
            Unit::Microseconds => "µs",
            Unit::PerSecond => "per second",
            Unit::Percent => "%",
            Unit::Bits => "bits",
            Unit::Address => "IP:PORT",
        }
    }
}

/// Whether SIGHUP applies a change of the key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reload {
    /// A reload applies the new value.
    Live,
    /// The value sizes what is built at start: a change is logged and needs a restart.
    Restart,
}

/// The integer values one key may take, with why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bounds {
    /// The least value, when there is one.
    pub min: Option<i64>,
    /// The largest value, when there is one.
    pub max: Option<i64>,
    /// Why the bound is where it is (empty when it says itself).
    pub note: &'static str,
}

impl Bounds {
    /// No bound beyond the key's type.
    pub const NONE: Bounds = Bounds {
        min: None,
        max: None,
        note: "",
    };

    /// At least `min`.
    #[must_use]
    pub const fn at_least(min: i64, note: &'static str) -> Bounds {
        Bounds {
            min: Some(min),
            max: None,
            note,
        }
    }

    /// At most `max`.
    #[must_use]
    pub const fn at_most(max: i64, note: &'static str) -> Bounds {
        Bounds {
            min: None,
            max: Some(max),
            note,
        }
    }

    /// `min..=max`.
    #[must_use]
    pub const fn range(min: i64, max: i64, note: &'static str) -> Bounds {
        Bounds {
            min: Some(min),
            max: Some(max),
            note,
        }
    }

    /// Whether `value` is within the bounds.
    #[must_use]
    pub fn admits(&self, value: i64) -> bool {
        self.min.is_none_or(|min| value >= min) && self.max.is_none_or(|max| value <= max)
    }

    /// What a value must be, as error messages and the reference say it (`>= 1`,
    /// `at most 1024 (IOV_MAX)`, `1..=100`); empty when there is no bound.
    #[must_use]
    pub fn describe(&self) -> String {
        let range = match (self.min, self.max) {
            (Some(min), Some(max)) => format!("{min}..={max}"),
            (Some(min), None) => format!(">= {min}"),
            (None, Some(max)) => format!("at most {max}"),
            (None, None) => return String::new(),
        };
        if self.note.is_empty() {
            range
        } else {
            format!("{range} ({})", self.note)
        }
    }
}

impl Key {
    /// `section.key`.
    #[must_use]
    pub fn dotted(&self) -> String {
        format!("{}.{}", self.section, self.name)
    }

    /// The default as a TOML value.
    #[must_use]
    pub fn default_value(&self) -> Value {
        match &self.default {
            DefaultValue::Int(value) => Value::Integer(*value),
            DefaultValue::Str(text) => Value::String((*text).to_owned()),
            DefaultValue::Bool(value) => Value::Boolean(*value),
            DefaultValue::List => Value::Array(Vec::new()),
            DefaultValue::Strs(items) => Value::Array(
                items
                    .iter()
                    .map(|item| Value::String((*item).to_owned()))
                    .collect(),
            ),
            DefaultValue::Core(read) => read(&ProtocolConfig::default()),
        }
    }
}

/// The key named `section.key`, if there is one.
#[must_use]
pub fn find(section: &str, name: &str) -> Option<&'static Key> {
    KEYS.iter()
        .find(|key| key.section == section && key.name == name)
}

/// Whether `key` is one of the protocol core's: a field of `ProtocolConfig` has its name (a
/// test checks that every field names exactly one row).
#[must_use]
pub fn is_core(key: &Key) -> bool {
    CORE_FIELDS.iter().any(|field| field == key.name)
}

/// The row of the protocol core's key `name` (a field of `ProtocolConfig`).
#[must_use]
pub fn core_key(name: &str) -> Option<&'static Key> {
    KEYS.iter().find(|key| key.name == name && is_core(key))
}

/// The field names of `ProtocolConfig`, read from its serialized default.
static CORE_FIELDS: LazyLock<Vec<String>> = LazyLock::new(|| {
    // Every field is a TOML scalar or a list of strings; an empty list here fails every config test.
    Table::try_from(ProtocolConfig::default())
        .map(|fields| fields.keys().cloned().collect())
        .unwrap_or_default()
});

/// The sections in table order (the order of the example config and the reference).
#[must_use]
pub fn sections() -> Vec<&'static str> {
    let mut sections: Vec<&'static str> = Vec::new();
    for key in KEYS {
        if !sections.contains(&key.section) {
            sections.push(key.section);
        }
    }
    sections
}

/// The defaults as a two-level TOML table (section -> key -> value).
#[must_use]
pub fn default_table() -> Table {
    let mut table = Table::new();
    for key in KEYS {
        let section = table
            .entry(key.section)
            .or_insert_with(|| Value::Table(Table::new()));
        if let Value::Table(keys) = section {
            keys.insert(key.name.to_owned(), key.default_value());
        }
    }
    table
}

/// A core default as a TOML integer (saturating: no default comes near `i64::MAX`).
fn int(value: impl TryInto<i64>) -> Value {
    Value::Integer(value.try_into().unwrap_or(i64::MAX))
}

/// The core's history policy as its TOML name.
fn history_name(policy: HistoryPolicy) -> String {
    match policy {
        HistoryPolicy::Serve => "serve",
        HistoryPolicy::Refuse => "refuse",
    }
    .to_owned()
}

/// Every key, in the order of the example config: `[server]`, `[limits]`, `[timeouts]`,
/// `[protocol]`, `[verify]`, `[log]`, `[ws]`.
pub static KEYS: &[Key] = &[
    Key {
        section: "server",
        name: "listen",
        default: DefaultValue::Str("0.0.0.0:1637"),
        unit: Unit::Address,
        bounds: Bounds::NONE,
        gate: None,
        reload: Reload::Restart,
        why: "BPS listener, native TCP transport (one stream per connection). 1637 is the broker's port.",
    },
    Key {
        section: "server",
        name: "admin_listen",
        default: DefaultValue::Str("127.0.0.1:1638"),
        unit: Unit::Address,
        bounds: Bounds::NONE,
        gate: None,
        reload: Reload::Restart,
        why: "Admin HTTP: /metrics, /healthz, /readyz, /cohortz. Loopback so it is never exposed by accident.",
    },
    Key {
        section: "server",
        name: "cores",
        default: DefaultValue::Int(0),
        unit: Unit::Count,
        bounds: Bounds::at_most(
            CORES_MAX as i64,
            "0 = all; a stream id keeps the core in 8 bits",
        ),
        gate: None,
        reload: Reload::Restart,
        why: "Runtimes, one pinned thread per core; 0 = every core this process may run on.",
    },
    Key {
        section: "server",
        name: "io_uring",
        default: DefaultValue::Str("prefer"),
        unit: Unit::Text,
        bounds: Bounds::NONE,
        gate: None,
        reload: Reload::Restart,
        why: "I/O driver: \"required\" (refuse to start without io_uring), \"prefer\" (fall back to epoll, which containers often force), \"off\" (epoll). The driver in use is logged and exported.",
    },
    Key {
        section: "server",
        name: "drain_deadline_ms",
        default: DefaultValue::Int(10000),
        unit: Unit::Milliseconds,
        bounds: Bounds::at_least(1, ""),
        gate: None,
        reload: Reload::Restart,
        why: "Milliseconds a drain (SIGTERM/SIGINT) may take to close every stream cleanly; keep it below systemd's TimeoutStopSec.",
    },
    Key {
        section: "server",
        name: "join_deadline_ms",
        default: DefaultValue::Int(10000),
        unit: Unit::Milliseconds,
        bounds: Bounds::at_least(1, ""),
        gate: None,
        reload: Reload::Restart,
        why: "Milliseconds a new connection has to send its Join before it is closed, so idle sockets cannot hold file descriptors.",
    },
    Key {
        section: "server",
        name: "inbox_messages_max",
        default: DefaultValue::Int(16384),
        unit: Unit::Count,
        bounds: Bounds::at_least(1, ""),
        gate: None,
        reload: Reload::Restart,
        why: "Bound of each core's two cross-core lanes (messages towards a cohort's home core, and towards a stream's own core); beyond it a sender keeps messages in its overflow and pauses its readers, so memory stays bounded.",
    },
    Key {
        section: "server",
        name: "overflow_messages_max",
        default: DefaultValue::Int(16384),
        unit: Unit::Count,
        bounds: Bounds::at_least(1, ""),
        gate: None,
        reload: Reload::Restart,
        why: "Messages towards other cores (deliveries, sends, closes) a core keeps in its overflows before it stops taking the work that makes them: backpressure passes on.",
    },
    Key {
        section: "server",
        name: "write_batch_frames_max",
        default: DefaultValue::Int(64),
        unit: Unit::Count,
        bounds: Bounds::range(
            1,
            WRITE_BATCH_FRAMES_MAX as i64,
            "IOV_MAX, buffers per vectored write",
        ),
        gate: None,
        reload: Reload::Restart,
        why: "Frames gathered into one vectored write (at most 1024, IOV_MAX); batching is what makes fan-out cheap.",
    },
    Key {
        section: "server",
        name: "write_coalesce_us",
        default: DefaultValue::Int(1000),
        unit: Unit::Microseconds,
        bounds: Bounds::at_most(WRITE_COALESCE_US_MAX as i64, "microseconds of latency"),
        gate: None,
        reload: Reload::Restart,
        why: "Microseconds a core's writes may wait for more verification results while enough are in flight to fill the fan-out budget (half limits.outbound_queue_frames_max), so one write per subscriber carries several batches; a moderate load never has that many in flight and never waits (at most 10000; 0 writes at the end of every turn, for the lowest latency).",
    },
    Key {
        section: "server",
        name: "nofile_per_stream",
        default: DefaultValue::Int(1),
        unit: Unit::Count,
        bounds: Bounds::at_least(1, ""),
        gate: None,
        reload: Reload::Restart,
        why: "File descriptors one stream costs; the startup check multiplies it by limits.connections_max and compares with RLIMIT_NOFILE (LimitNOFILE= in the unit).",
    },
    Key {
        section: "server",
        name: "tcp_keepalive_ms",
        default: DefaultValue::Int(30000),
        unit: Unit::Milliseconds,
        bounds: Bounds::at_least(1, ""),
        gate: None,
        reload: Reload::Restart,
        why: "Milliseconds a connection may be silent before TCP keepalive probes the peer (three probes, one every third of it), so a vanished peer's slot is freed.",
    },
    Key {
        section: "server",
        name: "tcp_user_timeout_ms",
        default: DefaultValue::Int(60000),
        unit: Unit::Milliseconds,
        bounds: Bounds::at_least(1, ""),
        gate: None,
        reload: Reload::Restart,
        why: "TCP_USER_TIMEOUT in milliseconds: sent data or probes unacknowledged this long end the connection (a subscriber that vanished).",
    },
    Key {
        section: "limits",
        name: "streams_per_cohort_max",
        default: DefaultValue::Core(|core| int(core.streams_per_cohort_max)),
        unit: Unit::Count,
        bounds: Bounds::at_least(1, ""),
        gate: None,
        reload: Reload::Live,
        why: "R30: fan-out streams per cohort, FULL beyond it (bee: 1024).",
    },
    Key {
        section: "limits",
        name: "pending_streams_per_cohort_max",
        default: DefaultValue::Core(|core| int(core.pending_streams_per_cohort_max)),
        unit: Unit::Count,
        bounds: Bounds::at_least(1, ""),
        gate: None,
        reload: Reload::Live,
        why: "Pending (admin or rostered, unclaimed) streams per cohort: R30 exempts them, so they get their own cap.",
    },
    Key {
        section: "limits",
        name: "cohorts_max",
        default: DefaultValue::Core(|core| int(core.cohorts_max)),
        unit: Unit::Count,
        bounds: Bounds::at_least(1, ""),
        gate: None,
        reload: Reload::Live,
        why: "R31: live cohorts per broker, FULL to a creating Join beyond it (bee: 512).",
    },
    Key {
        section: "limits",
        name: "cohorts_per_peer_max",
        default: DefaultValue::Core(|core| int(core.cohorts_per_peer_max)),
        unit: Unit::Count,
        bounds: Bounds::at_least(1, ""),
        gate: None,
        reload: Reload::Live,
        why: "R32: cohorts one peer address may be attached to.",
    },
    Key {
        section: "limits",
        name: "cohorts_per_ipv6_prefix_max",
        default: DefaultValue::Core(|core| int(core.cohorts_per_ipv6_prefix_max)),
        unit: Unit::Count,
        bounds: Bounds::at_least(1, ""),
        gate: None,
        reload: Reload::Live,
        why: "R32: cohorts all the /64s within one IPv6 prefix may be attached to together (each /64's attachments counted), so one site's 65,536 /64s cannot fill the cohort table. IPv4 peers are not grouped.",
    },
    Key {
        section: "limits",
        name: "ipv6_prefix_bits",
        default: DefaultValue::Core(|core| int(core.ipv6_prefix_bits)),
        unit: Unit::Bits,
        bounds: Bounds::range(
            IPV6_PREFIX_BITS_MIN,
            IPV6_PEER_PREFIX_BITS as i64,
            "no shorter than a regional block, no longer than one peer",
        ),
        gate: None,
        reload: Reload::Live,
        why: "R32: the IPv6 prefix length cohorts_per_ipv6_prefix_max counts by (16..=64; 48 is a site).",
    },
    Key {
        section: "limits",
        name: "streams_per_peer_per_cohort_max",
        default: DefaultValue::Core(|core| int(core.streams_per_peer_per_cohort_max)),
        unit: Unit::Count,
        bounds: Bounds::at_least(1, ""),
        gate: None,
        reload: Reload::Live,
        why: "R33: streams one peer address may hold in one cohort (D10).",
    },
    Key {
        section: "limits",
        name: "publisher_streams_per_address_max",
        default: DefaultValue::Core(|core| int(core.publisher_streams_per_address_max)),
        unit: Unit::Count,
        bounds: Bounds::at_least(1, ""),
        gate: None,
        reload: Reload::Live,
        why: "R29: publisher streams per publisher address per cohort (D10); a claim beyond it resets the oldest.",
    },
    Key {
        section: "limits",
        name: "outbound_queue_frames_max",
        default: DefaultValue::Core(|core| int(core.outbound_queue_frames_max)),
        unit: Unit::Count,
        bounds: Bounds::at_least(
            2,
            "an Ack and the roster-first delivery are queued together",
        ),
        gate: None,
        reload: Reload::Restart,
        why: "R26: frames queued towards one stream before it is reset (queue_reset); a slow subscriber never slows the others.",
    },
    Key {
        section: "limits",
        name: "outbound_queue_bytes_max",
        default: DefaultValue::Int(1048576),
        unit: Unit::Bytes,
        bounds: Bounds::NONE,
        gate: None,
        reload: Reload::Restart,
        why: "Bytes one stream may hold queued towards its peer, its history backlog included (each message at its length on the wire); beyond it the stream is reset as a slow consumer (queue_reset). At least a full history backlog (history_bytes_max in effect) plus two frames of frame_bytes_max.",
    },
    Key {
        section: "limits",
        name: "dedup_window_entries",
        default: DefaultValue::Core(|core| int(core.dedup_window_entries)),
        unit: Unit::Count,
        bounds: Bounds::at_least(1, ""),
        gate: None,
        reload: Reload::Live,
        why: "R28: chunk addresses remembered per implicit cohort for dedup.",
    },
    Key {
        section: "limits",
        name: "cursors_per_cohort_max",
        default: DefaultValue::Core(|core| int(core.cursors_per_cohort_max)),
        unit: Unit::Count,
        bounds: Bounds::at_least(1, ""),
        gate: None,
        reload: Reload::Live,
        why: "R27: publisher cursors per cohort; the least recently used is evicted and restarts at 0.",
    },
    Key {
        section: "limits",
        name: "frame_bytes_max",
        default: DefaultValue::Core(|core| int(core.frame_bytes_max)),
        unit: Unit::Bytes,
        bounds: Bounds::at_least(
            BROADCAST_FRAME_BYTES_MAX as i64,
            "the largest valid Broadcast body",
        ),
        gate: None,
        reload: Reload::Restart,
        why: "Largest frame body read, in bytes; a larger length prefix costs the stream before anything is allocated.",
    },
    Key {
        section: "limits",
        name: "frames_in_flight_per_stream_max",
        default: DefaultValue::Core(|core| int(core.frames_in_flight_per_stream_max)),
        unit: Unit::Count,
        bounds: Bounds::at_least(1, ""),
        gate: None,
        reload: Reload::Restart,
        why: "Frames of one stream read but not yet processed; reading stops there (backpressure towards the verification pool). A deeper window keeps a publisher of a large cohort busy; memory is bounded per core by frames_in_flight_per_core_max.",
    },
    Key {
        section: "limits",
        name: "blocklist_entries_max",
        default: DefaultValue::Core(|core| int(core.blocklist_entries_max)),
        unit: Unit::Count,
        bounds: Bounds::at_least(1, ""),
        gate: None,
        reload: Reload::Live,
        why: "R39: blocklisted addresses remembered; at the bound the entry expiring soonest goes.",
    },
    Key {
        section: "limits",
        name: "history_frames_max",
        default: DefaultValue::Core(|core| int(core.history_frames_max)),
        unit: Unit::Count,
        bounds: Bounds::at_least(1, ""),
        gate: None,
        reload: Reload::Live,
        why: "D11: DATA frames a cohort whose spec has history keeps for late joiners (a minute of a live stream at four messages a second); the oldest go first. A reload applies to existing rings.",
    },
    Key {
        section: "limits",
        name: "history_bytes_max",
        default: DefaultValue::Int(0),
        unit: Unit::Bytes,
        bounds: Bounds::NONE,
        gate: None,
        reload: Reload::Live,
        why: "D11: frame bytes such a cohort keeps; at least frame_bytes_max plus its length prefix, and cohorts_max full rings may take at most half of frame_memory_bytes_max, so retained frames never starve live traffic. 0 = the largest that does, at most 262144 (60 full 4 KiB chunks).",
    },
    Key {
        section: "limits",
        name: "connections_max",
        default: DefaultValue::Int(65536),
        unit: Unit::Count,
        bounds: Bounds::at_least(1, ""),
        gate: None,
        reload: Reload::Restart,
        why: "Open connections for the whole broker. The startup check compares it with RLIMIT_NOFILE: an explicit value that does not fit is refused; the default is lowered to what fits, with a warning.",
    },
    Key {
        section: "limits",
        name: "dropped_frames_per_stream_per_s_max",
        default: DefaultValue::Core(|core| int(core.dropped_frames_per_stream_per_s_max)),
        unit: Unit::PerSecond,
        bounds: Bounds::NONE,
        gate: None,
        reload: Reload::Live,
        why: "R15/R16: frames one stream may have dropped without penalty (unknown kind, wrong challenge, retransmit) per second before it is reset (0 = no limit). Two streams of one publisher (R29) drop each other's duplicates: keep it above such a publisher's rate.",
    },
    Key {
        section: "limits",
        name: "prejoin_connections_per_peer_max",
        default: DefaultValue::Core(|core| int(core.prejoin_connections_per_peer_max)),
        unit: Unit::Count,
        bounds: Bounds::at_least(1, ""),
        gate: None,
        reload: Reload::Live,
        why: "Connections one peer may hold that have not sent their Join yet; beyond it new ones are closed at accept, so idle sockets from one address cannot take every connection slot.",
    },
    Key {
        section: "limits",
        name: "join_timeouts_per_peer_max",
        default: DefaultValue::Core(|core| int(core.join_timeouts_per_peer_max)),
        unit: Unit::Count,
        bounds: Bounds::at_least(1, ""),
        gate: None,
        reload: Reload::Live,
        why: "Join deadlines (server.join_deadline_ms) one peer may miss before it is blocklisted for timeouts.blocklist_join_timeout_ms.",
    },
    Key {
        section: "limits",
        name: "spectator_sessions_per_peer_max",
        default: DefaultValue::Core(|core| int(core.spectator_sessions_per_peer_max)),
        unit: Unit::Count,
        bounds: Bounds::at_least(1, ""),
        gate: None,
        reload: Reload::Live,
        why: "W11: WebSocket bridge sessions without addr (anonymous spectators) one peer may hold on all cohorts together; they are outside R33 so that viewers behind one NAT are not refused at the third tab.",
    },
    Key {
        section: "limits",
        name: "spectator_sessions_per_peer_per_cohort_max",
        default: DefaultValue::Core(|core| int(core.spectator_sessions_per_peer_per_cohort_max)),
        unit: Unit::Count,
        bounds: Bounds::at_least(1, ""),
        gate: None,
        reload: Reload::Live,
        why: "W11: anonymous sessions one peer may hold in one cohort, so a few addresses cannot fill a cohort's streams_per_cohort_max slots (Join answered FULL beyond it).",
    },
    Key {
        section: "limits",
        name: "spectator_slots_percent",
        default: DefaultValue::Core(|core| int(core.spectator_slots_percent)),
        unit: Unit::Percent,
        bounds: Bounds::range(1, 100, "percent of streams_per_cohort_max"),
        gate: None,
        reload: Reload::Live,
        why: "W11: the percent of streams_per_cohort_max anonymous sessions may hold together (1..=100); the rest stays for streams with an addr: publishers and named viewers still get in.",
    },
    // Trusted relays (docs/LIMITS.md, "Trusted relays"): the edges whose per-peer bounds a
    // root raises.
    Key {
        section: "limits",
        name: "trusted_relays",
        default: DefaultValue::List,
        unit: Unit::Text,
        bounds: Bounds::NONE,
        gate: None,
        reload: Reload::Live,
        why: "Edge brokers relaying to this one: IP addresses or CIDR prefixes, e.g. [\"192.0.2.7\", \"10.1.0.0/16\", \"2001:db8:5::/48\"], at most 256 (TRUSTED_RELAYS_MAX: scanned at every Join). Their bounds are the trusted_relay_* keys, they are outside the IPv6 prefix bound and never blocklisted (a relay's address is all its clients; offending streams are still reset). An IPv6 entry narrower than a /64 trusts its /64 (a peer).",
    },
    Key {
        section: "limits",
        name: "trusted_relay_cohorts_max",
        default: DefaultValue::Core(|core| int(core.trusted_relay_cohorts_max)),
        unit: Unit::Count,
        bounds: Bounds::at_least(1, ""),
        gate: None,
        reload: Reload::Live,
        why: "R32 for a trusted relay: cohorts it may be attached to (one per cohort it relays); 512 = the default cohorts_max. Raises cohorts_per_peer_max, never lowers it.",
    },
    Key {
        section: "limits",
        name: "trusted_relay_streams_per_cohort_max",
        default: DefaultValue::Core(|core| int(core.trusted_relay_streams_per_cohort_max)),
        unit: Unit::Count,
        bounds: Bounds::at_least(1, ""),
        gate: None,
        reload: Reload::Live,
        why: "R33 for a trusted relay: streams it may hold in one cohort, its upstream stream and every publisher it splices through; 1024 = the default streams_per_cohort_max, which still bounds the cohort. Raises streams_per_peer_per_cohort_max, never lowers it.",
    },
    Key {
        section: "limits",
        name: "trusted_relay_prejoin_connections_max",
        default: DefaultValue::Core(|core| int(core.trusted_relay_prejoin_connections_max)),
        unit: Unit::Count,
        bounds: Bounds::at_least(1, ""),
        gate: None,
        reload: Reload::Live,
        why: "Connections a trusted relay may hold before their Join: an edge that lost this root reopens all its streams at once. Raises prejoin_connections_per_peer_max, never lowers it.",
    },
    Key {
        section: "limits",
        name: "cohort_series_max",
        default: DefaultValue::Int(100),
        unit: Unit::Count,
        bounds: Bounds::NONE,
        gate: None,
        reload: Reload::Live,
        why: "Cohorts exported with /metrics series of their own (those with the most subscribers at the scrape); the others are summed into the bps_cohort_other_* gauges, so a scrape stays bounded.",
    },
    Key {
        section: "limits",
        name: "memory_bytes_max",
        default: DefaultValue::Int(0),
        unit: Unit::Bytes,
        bounds: Bounds::NONE,
        gate: None,
        reload: Reload::Live,
        why: "The memory budget in bytes: the worst case of every bound here (connections, frame memory, frames in flight, lanes, cohorts, key caches, ...) must fit it, checked at start and on reload; a config that does not fit is refused naming its largest terms. 0 = half of the host's memory (or of its cgroup limit); /metrics shows bps_memory_worst_case_term_bytes.",
    },
    Key {
        section: "limits",
        name: "frame_memory_bytes_max",
        default: DefaultValue::Int(536870912),
        unit: Unit::Bytes,
        bounds: Bounds::at_least(1, ""),
        gate: None,
        reload: Reload::Restart,
        why: "Frame bytes held at most (frames read and not released yet, in queues, rosters; grown read buffers); at the bound readers wait and TCP pushes back on publishers.",
    },
    Key {
        section: "limits",
        name: "frames_in_flight_per_core_max",
        default: DefaultValue::Int(4096),
        unit: Unit::Count,
        bounds: Bounds::at_least(1, ""),
        gate: None,
        reload: Reload::Restart,
        why: "Frames one core has read and not yet had processed (each may be a verification job); at the bound that core's readers wait.",
    },
    Key {
        section: "timeouts",
        name: "claim_deadline_ms",
        default: DefaultValue::Core(|core| int(core.claim_deadline_ms)),
        unit: Unit::Milliseconds,
        bounds: Bounds::at_least(1, ""),
        gate: None,
        reload: Reload::Live,
        why: "R35: milliseconds a pending or silent stream has to claim (D10: 30 s).",
    },
    Key {
        section: "timeouts",
        name: "inactivity_deadline_ms",
        default: DefaultValue::Core(|core| int(core.inactivity_deadline_ms)),
        unit: Unit::Milliseconds,
        bounds: Bounds::at_least(1, ""),
        gate: None,
        reload: Reload::Live,
        why: "R34: milliseconds without an accepted publisher frame before a cohort is reclaimed (10 min).",
    },
    Key {
        section: "timeouts",
        name: "idle_cohort_reclaim_ms",
        default: DefaultValue::Core(|core| int(core.idle_cohort_reclaim_ms)),
        unit: Unit::Milliseconds,
        bounds: Bounds::at_least(1, ""),
        gate: None,
        reload: Reload::Live,
        why: "R31: milliseconds a cohort with nobody receiving (only pending or silent streams) must have been so before it is reclaimed, oldest first, to make room in a full cohort table.",
    },
    Key {
        section: "timeouts",
        name: "revocation_grace_ms",
        default: DefaultValue::Core(|core| int(core.revocation_grace_ms)),
        unit: Unit::Milliseconds,
        bounds: Bounds::NONE,
        gate: None,
        reload: Reload::Live,
        why: "R24: milliseconds after the reduced roster is written during which a revoked stream's frames are dropped without penalty (D10: 5 s).",
    },
    Key {
        section: "timeouts",
        name: "blocklist_violation_ms",
        default: DefaultValue::Core(|core| int(core.blocklist_violation_ms)),
        unit: Unit::Milliseconds,
        bounds: Bounds::NONE,
        gate: None,
        reload: Reload::Live,
        why: "R39: blocklist milliseconds after a violation (bee: 10 min); 0 disables.",
    },
    Key {
        section: "timeouts",
        name: "blocklist_claim_timeout_ms",
        default: DefaultValue::Core(|core| int(core.blocklist_claim_timeout_ms)),
        unit: Unit::Milliseconds,
        bounds: Bounds::NONE,
        gate: None,
        reload: Reload::Live,
        why: "R39: blocklist milliseconds after a claim timeout (bee: 1 min); 0 disables.",
    },
    Key {
        section: "timeouts",
        name: "blocklist_join_timeout_ms",
        default: DefaultValue::Core(|core| int(core.blocklist_join_timeout_ms)),
        unit: Unit::Milliseconds,
        bounds: Bounds::NONE,
        gate: None,
        reload: Reload::Live,
        why: "Blocklist milliseconds after limits.join_timeouts_per_peer_max missed Join deadlines; 0 disables.",
    },
    Key {
        section: "timeouts",
        name: "healthz_deadline_ms",
        default: DefaultValue::Int(1000),
        unit: Unit::Milliseconds,
        bounds: Bounds::at_least(1, ""),
        gate: None,
        reload: Reload::Live,
        why: "Milliseconds every core has to answer a /healthz ping (and to build its part of /cohortz).",
    },
    Key {
        section: "timeouts",
        name: "flush_deadline_ms",
        default: DefaultValue::Int(5000),
        unit: Unit::Milliseconds,
        bounds: Bounds::at_least(1, ""),
        gate: None,
        reload: Reload::Live,
        why: "Milliseconds a closing stream (a refused Join, EOS, a drain) has to take what is queued for it before it is reset, so a peer that never reads cannot hold its slot.",
    },
    Key {
        section: "timeouts",
        name: "write_progress_deadline_ms",
        default: DefaultValue::Int(20000),
        unit: Unit::Milliseconds,
        bounds: Bounds::at_least(1, ""),
        gate: None,
        reload: Reload::Live,
        why: "Milliseconds an open stream holding queued bytes may go without its socket taking any before it is reset as a slow consumer, however few frames it holds (a peer that stopped reading but keeps its connection).",
    },
    Key {
        section: "protocol",
        name: "history",
        default: DefaultValue::Core(|core| Value::String(history_name(core.history))),
        unit: Unit::Text,
        bounds: Bounds::NONE,
        gate: None,
        reload: Reload::Live,
        why: "D11: \"serve\" (a late joiner of a cohort whose spec has history gets its retained frames after the roster, then live traffic) or \"refuse\" (every Join with history is REJECTED; streams already attached carry on after a reload).",
    },
    Key {
        section: "verify",
        name: "mode",
        default: DefaultValue::Str("pool"),
        unit: Unit::Text,
        bounds: Bounds::NONE,
        gate: None,
        reload: Reload::Restart,
        why: "\"pool\": worker threads verify beside the I/O; \"inline\": each core verifies its own jobs between I/O turns, with no thread hand-off (best when the broker has one core).",
    },
    Key {
        section: "verify",
        name: "workers",
        default: DefaultValue::Int(0),
        unit: Unit::Count,
        bounds: Bounds::NONE,
        gate: None,
        reload: Reload::Restart,
        why: "Verification worker threads; 0 = one per core (a SOC check, ~120 us, bounds publications/s).",
    },
    Key {
        section: "verify",
        name: "queue_jobs_max",
        default: DefaultValue::Int(0),
        unit: Unit::Count,
        bounds: Bounds::NONE,
        gate: None,
        reload: Reload::Restart,
        why: "Jobs the pool's queue holds. 0 = every core's limits.frames_in_flight_per_core_max, the most that can exist (each job belongs to a frame in flight), so the queue never fills; a smaller explicit value is refused at start.",
    },
    Key {
        section: "verify",
        name: "batch_jobs_max",
        default: DefaultValue::Int(64),
        unit: Unit::Count,
        bounds: Bounds::at_least(1, ""),
        gate: None,
        reload: Reload::Restart,
        why: "Jobs a worker takes at once (a batch is the unit of work; same-owner signatures in it are checked together).",
    },
    Key {
        section: "verify",
        name: "batch_wait_us",
        default: DefaultValue::Int(200),
        unit: Unit::Microseconds,
        bounds: Bounds::at_most(
            BATCH_WAIT_US_MAX as i64,
            "a longer wait adds latency without filling batches",
        ),
        gate: None,
        reload: Reload::Restart,
        why: "Microseconds a batch may wait for more jobs before closing, counted from its oldest job's submit, and only under signs of load (another worker verifying, jobs queued, or the worker's previous batch had company): an idle pool verifies a lone job at once. 0 = never wait. At most 1000.",
    },
    Key {
        section: "verify",
        name: "idle_inline_jobs_max",
        default: DefaultValue::Int(4),
        unit: Unit::Count,
        bounds: Bounds::at_most(
            IDLE_INLINE_JOBS_MAX as i64,
            "more would hold a core's I/O for a batch's time",
        ),
        gate: None,
        reload: Reload::Restart,
        why: "Pool mode: jobs a core verifies itself when nothing is under way (the pool idle, none of the core's other jobs in flight, and the pool's recent batches for the core no larger than this: between the batches of a peak the pool is idle too), so a lone publication skips the hand-off to a worker and back and is written in the turn that read it. Under load every job goes to the pool, whose batches check same-owner signatures together. 0 = always hand off, as before issue 23. At most 16.",
    },
    Key {
        section: "verify",
        name: "key_cache_keys_max",
        default: DefaultValue::Int(4096),
        unit: Unit::Count,
        bounds: Bounds::at_least(1, ""),
        gate: None,
        reload: Reload::Restart,
        why: "Owners whose public key each worker keeps (LRU); a warm owner skips key recovery.",
    },
    Key {
        section: "log",
        name: "level",
        default: DefaultValue::Str("info"),
        unit: Unit::Text,
        bounds: Bounds::NONE,
        gate: None,
        reload: Reload::Live,
        why: "A tracing filter: \"info\", \"debug\", \"bps_broker=debug,warn\". RUST_LOG, when set, wins.",
    },
    Key {
        section: "log",
        name: "format",
        default: DefaultValue::Str("text"),
        unit: Unit::Text,
        bounds: Bounds::NONE,
        gate: None,
        reload: Reload::Restart,
        why: "\"text\" for people, \"json\" for log pipelines. Logs go to stderr (the journal under systemd).",
    },
    Key {
        section: "log",
        name: "peer_lines_per_s_max",
        default: DefaultValue::Int(20),
        unit: Unit::PerSecond,
        bounds: Bounds::NONE,
        gate: None,
        reload: Reload::Restart,
        why: "Log lines per second (per core) that peers can trigger (a bad frame, a missed Join deadline, a blocklisting); beyond it they are counted (bps_log_lines_suppressed_total), not written. Logging never blocks a core: lines go through a bounded buffer to their own thread.",
    },
    Key {
        section: "ws",
        name: "enabled",
        default: DefaultValue::Bool(true),
        unit: Unit::Text,
        bounds: Bounds::NONE,
        gate: None,
        reload: Reload::Restart,
        why: "The WebSocket listener (docs/WEBSOCKET.md): the native endpoint /bps/v1 and the SWIP-60 bridge /pubsub/{topic}. TLS is a reverse proxy's job (docs/WEBSOCKET.md has nginx's).",
    },
    Key {
        section: "ws",
        name: "listen",
        default: DefaultValue::Str("0.0.0.0:1639"),
        unit: Unit::Address,
        bounds: Bounds::NONE,
        gate: None,
        reload: Reload::Restart,
        why: "Its address, one SO_REUSEPORT listener per core; 1639 follows the BPS (1637) and admin (1638) ports.",
    },
    Key {
        section: "ws",
        name: "allowed_origins",
        default: DefaultValue::List,
        unit: Unit::Text,
        bounds: Bounds::NONE,
        gate: None,
        reload: Reload::Restart,
        why: "Origins browser sessions may come from, e.g. [\"https://app.example\"]; [] or [\"*\"] = any (the API carries no ambient credentials). Requests without Origin are always allowed.",
    },
    Key {
        section: "ws",
        name: "trusted_proxies",
        default: DefaultValue::List,
        unit: Unit::Text,
        bounds: Bounds::NONE,
        gate: None,
        reload: Reload::Restart,
        why: "Reverse proxies whose Forwarded or X-Forwarded-For names the client: IP addresses or CIDR ranges, e.g. [\"127.0.0.1\", \"10.0.0.0/8\", \"fd00::/8\"]; the per-peer bounds then apply to that client instead of the proxy. A proxy that only appends X-Forwarded-For must drop the client's Forwarded header (it is preferred; docs/WEBSOCKET.md).",
    },
    Key {
        section: "ws",
        name: "ping_interval_ms",
        default: DefaultValue::Int(30000),
        unit: Unit::Milliseconds,
        bounds: Bounds::at_least(1, ""),
        gate: Some("ws.enabled"),
        reload: Reload::Restart,
        why: "The broker's ping period on native sessions (bridge sessions use swarm-keep-alive).",
    },
    Key {
        section: "ws",
        name: "idle_deadline_ms",
        default: DefaultValue::Int(90000),
        unit: Unit::Milliseconds,
        bounds: Bounds::NONE,
        gate: None,
        reload: Reload::Restart,
        why: "A session that sends nothing, not even a pong, for this long is closed (code 4010).",
    },
    Key {
        section: "ws",
        name: "static_dir",
        default: DefaultValue::Str(""),
        unit: Unit::Text,
        bounds: Bounds::NONE,
        gate: None,
        reload: Reload::Restart,
        why: "A directory served at GET / (the demo page, web/demo/dist); \"\" serves no files.",
    },
    Key {
        section: "ws",
        name: "service_posts_per_peer_per_s",
        default: DefaultValue::Int(4),
        unit: Unit::PerSecond,
        bounds: Bounds::range(1, SERVICE_POSTS_PER_PEER_PER_S_MAX as i64, ""),
        gate: Some("ws.enabled"),
        reload: Reload::Restart,
        why: "W5 service POSTs one peer may make per second, all cores together (a burst of as many, then this rate); beyond it 429 with Retry-After, before the body is read. 1..=1000.",
    },
    Key {
        section: "p2p",
        name: "enabled",
        default: DefaultValue::Bool(false),
        unit: Unit::Text,
        bounds: Bounds::NONE,
        gate: None,
        reload: Reload::Restart,
        why: "Speak BPS over libp2p, so Swarm's bee nodes use the broker as theirs (issue 20): a libp2p host on its own thread, bee's handshake, BPS on /swarm/pubsub/1.0.0/pubsub streams.",
    },
    Key {
        section: "p2p",
        name: "listen",
        default: DefaultValue::Strs(&["/ip4/0.0.0.0/tcp/1634"]),
        unit: Unit::Text,
        bounds: Bounds::NONE,
        gate: None,
        reload: Reload::Restart,
        why: "libp2p multiaddrs to listen on; 1634 is bee's p2p port. [] listens nowhere (light mode dials only). Advertised to peers in the handshake.",
    },
    Key {
        section: "p2p",
        name: "mode",
        default: DefaultValue::Str("light"),
        unit: Unit::Text,
        bounds: Bounds::NONE,
        gate: None,
        reload: Reload::Restart,
        why: "\"light\": the broker dials p2p.dial and tells peers it is a light node; \"full\": it says it is a full node, for bee nodes that dial it. Both accept handshakes from peers that dial.",
    },
    Key {
        section: "p2p",
        name: "network_id",
        default: DefaultValue::Int(1),
        unit: Unit::Count,
        bounds: Bounds::at_least(0, ""),
        gate: None,
        reload: Reload::Restart,
        why: "The Swarm network (1 = mainnet, 10 = testnet): a peer on another network is refused in the handshake, and the overlay is derived for it.",
    },
    Key {
        section: "p2p",
        name: "swarm_key_file",
        default: DefaultValue::Str("/var/lib/bps-broker/swarm.key"),
        unit: Unit::Text,
        bounds: Bounds::NONE,
        gate: None,
        reload: Reload::Restart,
        why: "The Swarm (overlay) secp256k1 key, 32 raw bytes; created with mode 0600 when absent. A file others may read is refused.",
    },
    Key {
        section: "p2p",
        name: "libp2p_key_file",
        default: DefaultValue::Str("/var/lib/bps-broker/libp2p.key"),
        unit: Unit::Text,
        bounds: Bounds::NONE,
        gate: None,
        reload: Reload::Restart,
        why: "The libp2p identity (libp2p's protobuf private key, as bee and go-libp2p store it); a new ECDSA P-256 key is created with mode 0600 when absent.",
    },
    Key {
        section: "p2p",
        name: "dial",
        default: DefaultValue::List,
        unit: Unit::Text,
        bounds: Bounds::NONE,
        gate: None,
        reload: Reload::Restart,
        why: "bee nodes to keep a connection to, each a multiaddr ending in /p2p/<peer id>, redialed with backoff (1 s doubling to 60 s).",
    },
    Key {
        section: "p2p",
        name: "welcome_message",
        default: DefaultValue::Str(""),
        unit: Unit::Text,
        bounds: Bounds::NONE,
        gate: None,
        reload: Reload::Restart,
        why: "The greeting sent in the handshake; at most 140 bytes (bee refuses longer ones).",
    },
    Key {
        section: "p2p",
        name: "connections_max",
        default: DefaultValue::Int(64),
        unit: Unit::Count,
        bounds: Bounds::at_least(1, ""),
        gate: Some("p2p.enabled"),
        reload: Reload::Restart,
        why: "libp2p connections at once, both directions: each holds a yamux session, its security state and up to p2p.streams_per_connection_max stream windows (the budget's libp2p term, 1.3 GiB at the defaults); a broker serves a handful of bee nodes.",
    },
    Key {
        section: "p2p",
        name: "streams_per_connection_max",
        default: DefaultValue::Int(64),
        unit: Unit::Count,
        bounds: Bounds::at_least(1, ""),
        gate: Some("p2p.enabled"),
        reload: Reload::Restart,
        why: "Streams open at once on one connection, every protocol: bee opens a few (handshake, pricing, hive, one BPS stream per topic); one more is reset.",
    },
    Key {
        section: "p2p",
        name: "pending_handshakes_per_ip_max",
        default: DefaultValue::Int(8),
        unit: Unit::Count,
        bounds: Bounds::at_least(1, ""),
        gate: Some("p2p.enabled"),
        reload: Reload::Restart,
        why: "Connections from one IP in the libp2p upgrade, and bee handshakes running from one IP: one address must not hold every slot; one more is refused (a handshake's connection is closed).",
    },
    Key {
        section: "p2p",
        name: "handshake_deadline_ms",
        default: DefaultValue::Int(15000),
        unit: Unit::Milliseconds,
        bounds: Bounds::range(1, 600_000, ""),
        gate: Some("p2p.enabled"),
        reload: Reload::Restart,
        why: "How long bee's handshake, and the headers exchange of every other stream, may take (bee's own is 15 s); a stream that does not finish is reset, a connection with no handshake by then is closed.",
    },
    Key {
        section: "relay",
        name: "upstreams",
        default: DefaultValue::List,
        unit: Unit::Text,
        bounds: Bounds::NONE,
        gate: None,
        reload: Reload::Restart,
        why: "Edge mode (docs/SCALING.md): brokers as HOST:PORT, e.g. [\"10.0.0.1:1637\", \"10.0.0.2:1637\"]. Non-empty makes this broker an edge: a cohort with local subscribers gets one upstream subscriber stream to its root, the first of this list ranked by placement over the cohort key (the next on failure), and streams that may publish are refused here. [] is a root. None may name this broker's listener.",
    },
    Key {
        section: "relay",
        name: "upstream_linger_ms",
        default: DefaultValue::Int(30000),
        unit: Unit::Milliseconds,
        bounds: Bounds::range(0, 3_600_000, ""),
        gate: None,
        reload: Reload::Restart,
        why: "How long an edge keeps a cohort and its upstream stream after its last local stream left, so a viewer who reloads rejoins at once and the root is not asked again; the cohort is reclaimed when it ends.",
    },
    Key {
        section: "relay",
        name: "connect_timeout_ms",
        default: DefaultValue::Int(5000),
        unit: Unit::Milliseconds,
        bounds: Bounds::range(100, 600_000, ""),
        gate: None,
        reload: Reload::Restart,
        why: "How long an edge waits for an upstream's TCP connection and its Ack; then it backs off and tries the next broker in rank.",
    },
    Key {
        section: "relay",
        name: "reconnect_backoff_min_ms",
        default: DefaultValue::Int(1000),
        unit: Unit::Milliseconds,
        bounds: Bounds::range(1, 600_000, ""),
        gate: None,
        reload: Reload::Restart,
        why: "R38's backoff of an upstream that failed, was refused or ended: randomised exponential from this, full jitter; R38 asks 1 s.",
    },
    Key {
        section: "relay",
        name: "reconnect_backoff_max_ms",
        default: DefaultValue::Int(30000),
        unit: Unit::Milliseconds,
        bounds: Bounds::range(1, 600_000, ""),
        gate: None,
        reload: Reload::Restart,
        why: "R38's cap on an upstream's backoff (30 s).",
    },
];
