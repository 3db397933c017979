//! `bps`: the BPS chunk tool and terminal client.
//!
//! Owns: the command line (clap derive), reading payload files and stdin, printing, and the
//! exit codes, which are a contract (issue 2, item 4): 0 success (a valid chunk), 1 an
//! invalid chunk or a failed run, 2 bad input (one `error: ARGUMENT: ...` line on stderr;
//! clap's own usage errors also exit 2), 3 a Join refused with FULL or REJECTED.
//!
//! Never: protocol or crypto logic; that lives in the `bps_client` library and below.

use std::io::{self, BufRead, Write};
use std::process::ExitCode;
use std::sync::mpsc::{self, Receiver};
use std::thread;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bps_client::bee_node::{BeeTarget, DEFAULT_NETWORK_ID};
use bps_client::client::{
    ClientError, Connection, INPUT_LINES_QUEUED_MAX, Output, PubOptions, SubOptions, run_pub,
    run_sub,
};
use bps_client::hexarg::{ArgError, check_payload, parse_fixed, parse_hex, parse_key};
use bps_client::inspect::{decode_frame, inspect_soc};
use bps_client::publisher::{Publisher, PublisherConfig, PublisherError};
use bps_client::route::parse_targets;
use bps_client::session::SessionConfig;
use bps_client::spec::SpecArgs;
use bps_proto::{Address, Authorship, Binding, Spec, soc_address};
use bps_verify::{SigningKey, cac_address, try_sign_soc};
use clap::{ArgGroup, Args, Parser, Subcommand};
use serde_json::json;

/// The BPS chunk tool and terminal client.
#[derive(Debug, Parser)]
#[command(
    name = "bps",
    version,
    about = "The BPS chunk tool (soc, cac, frame, key) and terminal client (sub, pub, roster, eos)",
    propagate_version = true
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Single-owner chunks: inspect and sign.
    #[command(subcommand)]
    Soc(SocCommand),
    /// Content-addressed chunks.
    #[command(subcommand)]
    Cac(CacCommand),
    /// BPS frames.
    #[command(subcommand)]
    Frame(FrameCommand),
    /// secp256k1 keys.
    #[command(subcommand)]
    Key(KeyCommand),
    /// Join a cohort and print every verified message.
    Sub(SubArgs),
    /// Join a cohort and publish messages.
    Pub(PubArgs),
    /// Publish a ROSTER as the admin (claims first).
    Roster(RosterArgs),
    /// Publish the end of stream as the admin (claims first).
    Eos(EosArgs),
}

#[derive(Debug, Subcommand)]
enum SocCommand {
    /// Print a SOC's fields as JSON; exit 0 if valid, 1 if not.
    Inspect {
        /// Validate at this 32-byte address (bee's soc.Valid); without it, the owner is
        /// recovered and the address it implies is reported.
        #[arg(long, value_name = "HEX")]
        address: Option<String>,
        /// The chunk: id ‖ signature ‖ span ‖ payload.
        #[arg(value_name = "CHUNK_HEX")]
        chunk: String,
    },
    /// Sign a payload into a SOC and print the chunk as hex.
    #[command(group(ArgGroup::new("payload_source").required(true).args(["payload", "payload_file"])))]
    Sign {
        /// The 32-byte secret key.
        #[arg(long, value_name = "HEX")]
        key: String,
        /// The 32-byte chunk id.
        #[arg(long, value_name = "HEX")]
        id: String,
        /// The payload as hex (at most 4096 bytes).
        #[arg(long, value_name = "HEX")]
        payload: Option<String>,
        /// Read the payload from a file (at most 4096 bytes).
        #[arg(long, value_name = "PATH")]
        payload_file: Option<std::path::PathBuf>,
        /// The span (default: the payload length).
        #[arg(long, value_name = "N")]
        span: Option<u64>,
        /// Print the fields and the chunk as JSON.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
enum CacCommand {
    /// Print the CAC address (BMT hash) of a payload.
    Address {
        /// The span (default: the payload length).
        #[arg(long, value_name = "N")]
        span: Option<u64>,
        /// The payload as hex (at most 4096 bytes; may be empty).
        #[arg(value_name = "PAYLOAD_HEX")]
        payload: String,
    },
}

#[derive(Debug, Subcommand)]
enum FrameCommand {
    /// Decode one varint-delimited Join, Ack or Broadcast frame as JSON.
    Decode {
        /// The input is a bare body, without the varint length.
        #[arg(long)]
        body: bool,
        /// The frame as hex.
        #[arg(value_name = "HEX")]
        frame: String,
    },
}

#[derive(Debug, Subcommand)]
enum KeyCommand {
    /// Print the 20-byte address of a key.
    Address {
        /// The 32-byte secret key.
        #[arg(long, value_name = "HEX")]
        key: String,
    },
    /// Print a fresh random key and its address as JSON.
    New,
}

/// Where to connect.
#[derive(Debug, Args)]
struct ConnectionArgs {
    /// The broker: HOST:PORT (TCP), ws://HOST:PORT/bps/v1 (its native WebSocket
    /// endpoint, one BPS frame per message; port 1639 by default) or a libp2p multiaddr
    /// /ip4/HOST/tcp/PORT/p2p/PEER_ID (also /ip6, /dns4, /dns6, /dns; the broker's p2p.listen
    /// port, 1634 by default, and the peer id its log names): the run is then a Swarm light
    /// node, does bee's handshake and carries BPS on a /swarm/pubsub/1.0.0/pubsub stream. A
    /// comma-separated list of brokers ranks them for the cohort by placement
    /// (docs/SCALING.md): the run joins the cohort's root and, after a failed connect or a
    /// lost stream, the next in rank.
    #[arg(
        long,
        value_name = "HOST:PORT|ws://HOST:PORT/bps/v1|/ip4/HOST/tcp/PORT/p2p/PEER_ID[,...]"
    )]
    target: String,
    /// The Swarm network id of a libp2p target (1: mainnet, 10: testnet); the broker's
    /// p2p.network_id must match, or its handshake fails.
    #[arg(long, default_value_t = DEFAULT_NETWORK_ID, value_name = "N")]
    network_id: u64,
    /// Give up after this many milliseconds.
    #[arg(long, value_name = "N")]
    timeout_ms: Option<u64>,
    /// Fail on a reset instead of reconnecting with backoff.
    #[arg(long)]
    no_reconnect: bool,
}

impl ConnectionArgs {
    /// The connection; a list that cannot be ranked (an empty entry, one given twice) is
    /// bad input.
    fn connection(&self) -> Result<Connection, ArgError> {
        let targets = parse_targets(&self.target);
        bps_proto::placement::names(&targets)
            .map_err(|error| ArgError::new("--target", error.to_string()))?;
        // A bad multiaddr is bad input, found before any run starts.
        for target in targets.iter().filter(|target| BeeTarget::is_p2p(target)) {
            BeeTarget::parse(target)
                .map_err(|error| ArgError::new("--target", error.to_string()))?;
        }
        Ok(Connection {
            targets,
            network_id: self.network_id,
            session: SessionConfig::default(),
            reconnect: !self.no_reconnect,
            timeout: self.timeout_ms.map(Duration::from_millis),
        })
    }
}

#[derive(Debug, Args)]
struct SubArgs {
    #[command(flatten)]
    connection: ConnectionArgs,
    #[command(flatten)]
    spec: SpecArgs,
    /// Join as this 20-byte address (default: a random one, a spectator).
    #[arg(long, value_name = "HEX20", conflicts_with = "key")]
    addr: Option<String>,
    /// Join as this key's address.
    #[arg(long, value_name = "HEX")]
    key: Option<String>,
    /// Print JSON lines, one per event: joined, data, gap, evicted, roster, eos, dropped.
    ///
    /// Every line has a "kind": "joined" (addr, challenge);
    /// "data" (owner, index, payload_hex, payload_utf8, and next_index and next_address: the
    /// SOC address of this publisher's next update, on the same stream for session feeds,
    /// the feed update under implicit feed-topic; absent where no next update is defined);
    /// "gap" before a data line whose index is above its publisher's cursor (owner,
    /// expected, got; a publisher's first frame is never one; under implicit feed-topic per
    /// writer, above the highest index it wrote); "evicted" after a data line
    /// whose new publisher pushed the least recent one out of the bounded cursor table
    /// (owner, cursor: its older frames could be shown again); "roster" (index, publishers,
    /// next_index, next_address, liveness_fault when rosters were missed); "eos";
    /// "dropped" (reason).
    #[arg(long)]
    json: bool,
    /// Exit after this many messages.
    #[arg(long, value_name = "N")]
    count: Option<u64>,
}

/// The publishing identity and its index sequence.
#[derive(Debug, Args)]
struct PublishingArgs {
    /// The 32-byte secret key; the stream joins as its address.
    #[arg(long, value_name = "HEX")]
    key: String,
    /// At most this many frames per second.
    #[arg(long, value_name = "PER_S")]
    rate: Option<f64>,
}

#[derive(Debug, Args)]
#[command(group(ArgGroup::new("input").required(true).args(["message", "stdin"])))]
struct PubArgs {
    #[command(flatten)]
    connection: ConnectionArgs,
    #[command(flatten)]
    spec: SpecArgs,
    #[command(flatten)]
    publishing: PublishingArgs,
    /// Messages to publish, one DATA each.
    #[arg(long, value_name = "TEXT", num_args = 1..)]
    message: Vec<String>,
    /// Publish each line of stdin.
    #[arg(long)]
    stdin: bool,
    /// The first DATA index (default: milliseconds since the Unix epoch, so a later run
    /// never reuses an index; nothing is persisted).
    #[arg(long, value_name = "N")]
    index_start: Option<u64>,
    /// Implicit ANCHOR: the GSOC id (keccak256(id ‖ address) must be the topic).
    #[arg(long, value_name = "HEX32")]
    id: Option<String>,
}

#[derive(Debug, Args)]
struct RosterArgs {
    #[command(flatten)]
    connection: ConnectionArgs,
    #[command(flatten)]
    spec: SpecArgs,
    #[command(flatten)]
    publishing: PublishingArgs,
    /// A 20-byte address to roster (repeatable; none publishes an empty roster).
    #[arg(long = "publisher", value_name = "HEX20", num_args = 1..)]
    publishers: Vec<String>,
    /// The ROSTER index (the admin's sequence; subscribers report a gap as a liveness fault).
    #[arg(long, value_name = "N", default_value_t = 0)]
    index: u64,
}

#[derive(Debug, Args)]
struct EosArgs {
    #[command(flatten)]
    connection: ConnectionArgs,
    #[command(flatten)]
    spec: SpecArgs,
    #[command(flatten)]
    publishing: PublishingArgs,
}

/// How a command ended, before it becomes an exit code.
enum Failure {
    /// Bad input: exit 2.
    Arg(ArgError),
    /// A run that did not succeed: exit 1 or 3.
    Client(ClientError),
    /// An invalid chunk, already reported on stdout: exit 1.
    Invalid,
}

impl From<ArgError> for Failure {
    fn from(error: ArgError) -> Self {
        Self::Arg(error)
    }
}

impl From<ClientError> for Failure {
    fn from(error: ClientError) -> Self {
        Self::Client(error)
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli.command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Invalid) => ExitCode::from(1),
        Err(Failure::Arg(error)) => {
            eprintln!("error: {error}");
            ExitCode::from(2)
        }
        Err(Failure::Client(error)) => {
            eprintln!("error: {error}");
            match error {
                ClientError::Refused(_) => ExitCode::from(3),
                ClientError::Failed(_) => ExitCode::from(1),
            }
        }
    }
}

fn run(command: Command) -> Result<(), Failure> {
    match command {
        Command::Soc(SocCommand::Inspect { address, chunk }) => soc_inspect(address, &chunk),
        Command::Soc(SocCommand::Sign {
            key,
            id,
            payload,
            payload_file,
            span,
            json,
        }) => soc_sign(&key, &id, payload, payload_file, span, json),
        Command::Cac(CacCommand::Address { span, payload }) => {
            let payload = parse_hex("PAYLOAD_HEX", &payload)?;
            check_payload("PAYLOAD_HEX", &payload)?;
            let span = span.unwrap_or(payload.len() as u64);
            print_line(&hex::encode(cac_address(span.to_le_bytes(), &payload)))
        }
        Command::Frame(FrameCommand::Decode { body, frame }) => {
            let bytes = parse_hex("HEX", &frame)?;
            let report =
                decode_frame(&bytes, body).map_err(|error| ArgError::new("HEX", error.0))?;
            print_line(&report.to_string())
        }
        Command::Key(KeyCommand::Address { key }) => {
            print_line(&hex::encode(parse_key("--key", &key)?.address()))
        }
        Command::Key(KeyCommand::New) => {
            let key = SigningKey::random();
            print_line(
                &json!({
                    "key": hex::encode(key.to_bytes()),
                    "address": hex::encode(key.address()),
                })
                .to_string(),
            )
        }
        Command::Sub(args) => sub(&args),
        Command::Pub(args) => publish(&args),
        Command::Roster(args) => roster(&args),
        Command::Eos(args) => eos(&args),
    }
}

fn print_line(line: &str) -> Result<(), Failure> {
    let mut stdout = io::stdout().lock();
    match writeln!(stdout, "{line}").and_then(|()| stdout.flush()) {
        Ok(()) => Ok(()),
        Err(error) if error.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        Err(error) => Err(ClientError::Failed(format!("stdout: {error}")).into()),
    }
}

fn soc_inspect(address: Option<String>, chunk: &str) -> Result<(), Failure> {
    let expected = address
        .as_deref()
        .map(|address| parse_fixed::<32>("--address", address))
        .transpose()?;
    let chunk = parse_hex("CHUNK_HEX", chunk)?;
    let report = inspect_soc(&chunk, expected.as_ref())
        .map_err(|error| ArgError::new("CHUNK_HEX", error.to_string()))?;
    print_line(&json!(report).to_string())?;
    if report.valid {
        Ok(())
    } else {
        Err(Failure::Invalid)
    }
}

fn soc_sign(
    key: &str,
    id: &str,
    payload: Option<String>,
    payload_file: Option<std::path::PathBuf>,
    span: Option<u64>,
    json_output: bool,
) -> Result<(), Failure> {
    let key = parse_key("--key", key)?;
    let id = parse_fixed::<32>("--id", id)?;
    let (argument, payload) = match (payload, payload_file) {
        (Some(payload), _) => ("--payload", parse_hex("--payload", &payload)?),
        (None, Some(path)) => (
            "--payload-file",
            std::fs::read(&path).map_err(|error| {
                ArgError::new("--payload-file", format!("{}: {error}", path.display()))
            })?,
        ),
        (None, None) => {
            return Err(ArgError::new("--payload", "give --payload or --payload-file").into());
        }
    };
    check_payload(argument, &payload)?;
    let span = span.unwrap_or(payload.len() as u64);
    let chunk = try_sign_soc(&key, &id, span, &payload)
        .map_err(|error| ArgError::new(argument, error.to_string()))?;
    if !json_output {
        return print_line(&hex::encode(&chunk));
    }
    print_line(
        &json!({
            "id": hex::encode(id),
            "owner": hex::encode(key.address()),
            "address": hex::encode(soc_address(id, key.address())),
            "wrapped_address": hex::encode(cac_address(span.to_le_bytes(), &payload)),
            "span": span,
            "payload_len": payload.len(),
            "chunk": hex::encode(&chunk),
        })
        .to_string(),
    )
}

fn terminal() -> Output<io::Stdout, io::Stderr> {
    Output {
        out: io::stdout(),
        err: io::stderr(),
    }
}

fn sub(args: &SubArgs) -> Result<(), Failure> {
    let spec = args.spec.to_spec()?;
    let addr: Address = match (&args.addr, &args.key) {
        (Some(addr), _) => parse_fixed::<20>("--addr", addr)?,
        (None, Some(key)) => parse_key("--key", key)?.address(),
        (None, None) => rand::random(),
    };
    let options = SubOptions {
        spec,
        addr,
        json: args.json,
        count: args.count,
    };
    run_sub(&args.connection.connection()?, &options, &mut terminal())?;
    Ok(())
}

fn pub_options(publishing: &PublishingArgs) -> Result<PubOptions, ArgError> {
    if let Some(rate) = publishing.rate
        && !(rate.is_finite() && rate > 0.0)
    {
        return Err(ArgError::new(
            "--rate",
            format!("expected a positive number of frames per second, got {rate}"),
        ));
    }
    Ok(PubOptions {
        rate: publishing.rate,
    })
}

/// The argument a shape mismatch is about.
fn publisher_error(error: PublisherError) -> ArgError {
    let argument = match error {
        PublisherError::AnchorWithoutId | PublisherError::AnchorMismatch { .. } => "--id",
        PublisherError::OwnerNotTopic { .. } | PublisherError::SocIdProximity { .. } => "--key",
    };
    ArgError::new(argument, error.to_string())
}

fn unix_millis() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| {
            u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX - 1)
        })
}

fn publish(args: &PubArgs) -> Result<(), Failure> {
    let spec = args.spec.to_spec()?;
    let key = parse_key("--key", &args.publishing.key)?;
    let options = pub_options(&args.publishing)?;
    let anchor_id = args
        .id
        .as_deref()
        .map(|id| parse_fixed::<32>("--id", id))
        .transpose()?;
    if anchor_id.is_some()
        && !(spec.authorship() == Authorship::Implicit && spec.binding == Binding::Anchor)
    {
        return Err(ArgError::new("--id", "only used with --binding anchor and no --admin").into());
    }
    let config = PublisherConfig {
        data_index_start: args.index_start.unwrap_or_else(unix_millis),
        roster_index_start: 0,
        anchor_id,
    };
    let mut publisher = Publisher::new(spec, key, config).map_err(publisher_error)?;
    for message in &args.message {
        check_payload("--message", message.as_bytes())?;
        publisher
            .enqueue_data(message.clone().into_bytes())
            .map_err(|error| ArgError::new("--index-start", error.to_string()))?;
    }
    let lines = args.stdin.then(stdin_lines);
    run_pub(
        &args.connection.connection()?,
        options,
        publisher,
        lines,
        &mut terminal(),
    )?;
    Ok(())
}

/// A publisher for the admin's service kinds: the key must be the spec's admin.
fn admin_publisher(
    spec: Spec,
    publishing: &PublishingArgs,
    roster_index_start: u64,
) -> Result<Publisher, ArgError> {
    let key = parse_key("--key", &publishing.key)?;
    let Some(admin) = spec.admin else {
        return Err(ArgError::new(
            "--admin",
            "ROSTER and EOS are the admin's; the spec has no admin",
        ));
    };
    if key.address() != admin {
        return Err(ArgError::new(
            "--key",
            format!(
                "its address 0x{} is not the admin 0x{}",
                hex::encode(key.address()),
                hex::encode(admin)
            ),
        ));
    }
    let config = PublisherConfig {
        data_index_start: 0,
        roster_index_start,
        anchor_id: None,
    };
    Publisher::new(spec, key, config).map_err(publisher_error)
}

fn roster(args: &RosterArgs) -> Result<(), Failure> {
    let spec = args.spec.to_spec()?;
    let options = pub_options(&args.publishing)?;
    let publishers = args
        .publishers
        .iter()
        .map(|publisher| parse_fixed::<20>("--publisher", publisher))
        .collect::<Result<Vec<Address>, _>>()?;
    let mut publisher = admin_publisher(spec, &args.publishing, args.index)?;
    publisher
        .enqueue_roster(&publishers)
        .map_err(|error| ArgError::new("--publisher", error.to_string()))?;
    send_queued(&args.connection, options, publisher)
}

fn eos(args: &EosArgs) -> Result<(), Failure> {
    let spec = args.spec.to_spec()?;
    let options = pub_options(&args.publishing)?;
    let mut publisher = admin_publisher(spec, &args.publishing, 0)?;
    publisher
        .enqueue_eos()
        .map_err(|error| ArgError::new("--key", error.to_string()))?;
    send_queued(&args.connection, options, publisher)
}

/// Joins, claims and sends what `publisher` has queued (a ROSTER or an EOS), then exits.
fn send_queued(
    connection: &ConnectionArgs,
    options: PubOptions,
    publisher: Publisher,
) -> Result<(), Failure> {
    run_pub(
        &connection.connection()?,
        options,
        publisher,
        None,
        &mut terminal(),
    )?;
    Ok(())
}

/// Lines of stdin (without their `\n` or `\r\n`), read on a thread so the stream keeps
/// being served while the terminal is idle; the channel closes at end of input. It holds
/// [`INPUT_LINES_QUEUED_MAX`] lines: when the publisher is that far behind, the thread
/// stops reading and the pipe pushes back.
fn stdin_lines() -> Receiver<Vec<u8>> {
    let (sender, receiver) = mpsc::sync_channel(INPUT_LINES_QUEUED_MAX);
    thread::spawn(move || {
        let mut stdin = io::stdin().lock();
        loop {
            let mut line = Vec::new();
            match stdin.read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => {
                    if line.ends_with(b"\n") {
                        line.pop();
                        if line.ends_with(b"\r") {
                            line.pop();
                        }
                    }
                    if sender.send(line).is_err() {
                        return;
                    }
                }
            }
        }
    });
    receiver
}
