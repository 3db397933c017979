//! `bps-broker`: the daemon's entry point.
//!
//! Owns: the global allocator (mimalloc: per-thread heaps suit thread-per-core fan-out; kept
//! off transparent huge pages), the panic policy (any panic aborts the process), the exit
//! codes (0 ok, 1 refused config or start, 2 bad usage, a signal's status after a crash) and
//! the adapter that lets `lifecycle` drive `io::Broker`.
//! Never does: anything `cli`, `config` or `lifecycle` already do; this file only wires them.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use bps_broker::admin::AdminBackend;
use bps_broker::budget::MemoryBudget;
use bps_broker::cli::{Cli, Command};
use bps_broker::config::BrokerConfig;
use bps_broker::io::Broker;
use bps_broker::lifecycle::{self, DrainSummary, Service};
use bps_broker::protocol::CoreId;
use bps_broker::top;
use clap::Parser;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    keep_heap_off_huge_pages();
    crash_on_panic();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => {
            // Help and version go to stdout with 0; bad usage to stderr with 2.
            let _ = error.print();
            return ExitCode::from(u8::try_from(error.exit_code()).unwrap_or(2));
        }
    };
    let code = match cli.into_command() {
        Command::Run(args) => lifecycle::run(&args.sources(), start),
        Command::CheckConfig(args) => lifecycle::check_config(&args.sources()),
        Command::Top(args) => top::run(&args.options()),
        Command::P2pIdentity(args) => lifecycle::p2p_identity(&args.sources()),
    };
    ExitCode::from(code)
}

/// The heap stays on 4 KiB pages. mimalloc asks for transparent huge pages on its arena
/// (`MADV_HUGEPAGE`), so the first touch of any 2 MiB range there makes all of it resident
/// (measured: `thp_fault_alloc` rose, khugepaged collapsed nothing), and the RSS crept up
/// in 2 MiB steps while nothing grew (docs/BENCHMARKS.md, "Soak"); the memory budget counts
/// bytes, not pages. An operator who sets mimalloc's own `MIMALLOC_ALLOW_THP` decides instead.
fn keep_heap_off_huge_pages() {
    if std::env::var_os("MIMALLOC_ALLOW_THP").is_some() {
        return;
    }
    // SAFETY: PR_SET_THP_DISABLE takes plain integers and touches no memory of ours; on a
    // kernel without it the call fails and the heap keeps the system's policy.
    let _ = unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) };
}

/// Crash means crash: a panic anywhere (a broken invariant on one core) ends the whole
/// process with a non-zero status, after the panic message, so systemd restarts it; a broker
/// with one core gone would keep routing into it. Release builds abort on panic anyway.
fn crash_on_panic() {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        report(info);
        std::process::abort();
    }));
}

/// Starts the I/O layer.
fn start(config: &BrokerConfig, budget: MemoryBudget) -> Result<IoService, String> {
    Broker::start(config, budget)
        .map(IoService)
        .map_err(|error| error.to_string())
}

/// `io::Broker` seen through `lifecycle::Service`.
#[derive(Debug)]
struct IoService(Broker);

impl Service for IoService {
    fn listen_addr(&self) -> SocketAddr {
        self.0.listen_addr()
    }

    fn ws_addr(&self) -> Option<SocketAddr> {
        self.0.ws_addr()
    }

    fn admin_backend(&self) -> Arc<dyn AdminBackend> {
        self.0.admin_backend()
    }

    fn reload(&self, config: &BrokerConfig, budget: MemoryBudget) -> Vec<CoreId> {
        self.0.reload(config, budget)
    }

    fn drain(self, deadline: Duration) -> DrainSummary {
        let report = self.0.drain(deadline);
        DrainSummary {
            streams_closed: report.streams_closed,
            timed_out: report.timed_out,
        }
    }

    fn driver(&self) -> &'static str {
        self.0.driver()
    }

    fn cores(&self) -> usize {
        self.0.cores()
    }

    fn p2p_addrs(&self) -> Option<Vec<String>> {
        self.0.p2p_addrs()
    }
}
