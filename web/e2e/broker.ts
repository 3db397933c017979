/**
 * The real broker for the end-to-end tests: `bps-broker` on 127.0.0.1 with free ports for
 * TCP, admin and WebSocket, serving the built demo page from `ws.static_dir`.
 *
 * Owns: `startBroker` (spawn, read the start line `bps-broker listening listen=… admin=…
 * ws=… driver=… cores=…` within a deadline) and `BrokerAddresses`. Never: configures the
 * broker beyond the listeners, the static directory and one core: every protocol rule the
 * tests watch is the broker's default.
 */

import { type ChildProcess, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { once } from "node:events";

import { repoPath } from "./paths.js";

/** How long the broker may take to print its start line (a cold debug binary on a busy machine). */
export const BROKER_START_DEADLINE_MS = 30_000;
/** How long it may take to drain and exit on SIGTERM before it is killed. */
export const BROKER_STOP_DEADLINE_MS = 15_000;
/** Characters of the broker's stderr kept to explain a failure. */
const STDERR_TAIL_CHARS_MAX = 8_000;

/** Where the running broker listens (host:port each). */
export interface BrokerAddresses {
  readonly tcp: string;
  readonly admin: string;
  readonly ws: string;
}

/** A running broker. */
export interface RunningBroker extends BrokerAddresses {
  /** SIGTERM, then SIGKILL after the deadline. */
  stop(): Promise<void>;
}

/** The broker binary: `$BPS_BROKER_BIN`, else the workspace's debug build. */
export function brokerBinary(): string {
  return process.env["BPS_BROKER_BIN"] ?? repoPath("target/debug/bps-broker");
}

/** Starts the broker serving `staticDir` (an absolute path). */
export async function startBroker(staticDir: string): Promise<RunningBroker> {
  const binary = brokerBinary();
  if (!existsSync(binary)) throw new Error(`no broker at ${binary}: run \`cargo build --bin bps-broker\` or set BPS_BROKER_BIN`);
  const child = spawn(
    binary,
    [
      "--listen",
      "127.0.0.1:0",
      "--admin-listen",
      "127.0.0.1:0",
      "--ws-listen",
      "127.0.0.1:0",
      "--set",
      `ws.static_dir=${staticDir}`,
      // One core: the machine is shared, and one is plenty for a few pages.
      "--cores",
      "1",
    ],
    { stdio: ["ignore", "ignore", "pipe"] },
  );
  const addresses = await readStartLine(child);
  return { ...addresses, stop: () => stopChild(child) };
}

function readStartLine(child: ChildProcess): Promise<BrokerAddresses> {
  return new Promise((resolve, reject) => {
    let tail = "";
    const fail = (why: string) => {
      clearTimeout(timer);
      child.kill("SIGKILL");
      reject(new Error(`${why}; broker stderr:\n${tail}`));
    };
    const timer = setTimeout(() => fail(`no start line within ${BROKER_START_DEADLINE_MS} ms`), BROKER_START_DEADLINE_MS);
    child.on("exit", (code, signal) => fail(`the broker exited (${signal ?? code}) before it listened`));
    child.on("error", (error) => fail(`cannot run the broker: ${error.message}`));
    child.stderr?.setEncoding("utf8");
    child.stderr?.on("data", (text: string) => {
      tail = (tail + text).slice(-STDERR_TAIL_CHARS_MAX);
      const line = /^bps-broker listening (.*)$/m.exec(tail)?.[1];
      if (line === undefined) return;
      const field = (name: string) => new RegExp(`(?:^| )${name}=(\\S+)`).exec(line)?.[1];
      const [tcp, admin, ws] = [field("listen"), field("admin"), field("ws")];
      if (tcp === undefined || admin === undefined || ws === undefined) return fail(`start line without listen, admin or ws: ${line}`);
      clearTimeout(timer);
      child.removeAllListeners("exit");
      resolve({ tcp, admin, ws });
    });
  });
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, "exit");
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), BROKER_STOP_DEADLINE_MS);
  await exited;
  clearTimeout(timer);
}
