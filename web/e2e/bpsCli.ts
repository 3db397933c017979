/**
 * The Rust `bps` CLI as the end-to-end tests' TCP peer: `bps key new`, `bps pub` and
 * `bps sub --json` against the broker's TCP listener, each bounded in time.
 *
 * Owns: `bpsBinary`, `newKey`, `publish`, `subscribe` and `CliSubscriber`. Never: checks a
 * signature itself: `bps sub` verifies every delivery (its `data` lines are the verified
 * ones, `dropped` the rest), and the page verifies what `bps pub` signs.
 */

import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { once } from "node:events";

import { repoPath } from "./paths.js";

/** Bound on one `bps pub` run (join, claim, a handful of frames). */
export const PUBLISH_DEADLINE_MS = 15_000;
/** Bound on a `bps sub` run; it is stopped earlier once the test has what it waits for. */
export const SUBSCRIBE_DEADLINE_MS = 30_000;
/** Bound on waiting for one line from `bps sub`. */
export const LINE_DEADLINE_MS = 15_000;

/** The CLI binary: `$BPS_BIN`, else the workspace's debug build. */
export function bpsBinary(): string {
  return process.env["BPS_BIN"] ?? repoPath("target/debug/bps");
}

/** A fresh key: `address` and `key` (the secret), hex without `0x`. */
export function newKey(): { address: string; key: string } {
  const run = spawnSync(bpsBinary(), ["key", "new"], { encoding: "utf8", timeout: PUBLISH_DEADLINE_MS });
  if (run.status !== 0) throw new Error(`bps key new failed: ${run.error?.message ?? run.stderr}`);
  return JSON.parse(run.stdout) as { address: string; key: string };
}

/** Runs `bps pub` with `args` to completion; rejects on a non-zero exit, with its stderr. */
export async function publish(args: readonly string[]): Promise<string> {
  const child = spawn(bpsBinary(), ["pub", ...args, "--no-reconnect", "--timeout-ms", String(PUBLISH_DEADLINE_MS)], {
    stdio: ["ignore", "ignore", "pipe"],
  });
  let stderr = "";
  child.stderr.setEncoding("utf8");
  child.stderr.on("data", (text: string) => (stderr += text));
  const [code, signal] = (await once(child, "exit")) as [number | null, NodeJS.Signals | null];
  if (code !== 0) throw new Error(`bps pub exited ${signal ?? code}:\n${stderr}`);
  return stderr;
}

/** One JSON line of `bps sub --json`. */
export type SubLine = Record<string, unknown> & { readonly kind: string };

/** A running `bps sub --json`. */
export class CliSubscriber {
  readonly lines: SubLine[] = [];
  stderr = "";
  readonly #child: ChildProcess;
  readonly #waiters = new Set<() => void>();
  readonly #exited: Promise<unknown>;

  constructor(args: readonly string[]) {
    this.#child = spawn(bpsBinary(), ["sub", "--json", ...args, "--timeout-ms", String(SUBSCRIBE_DEADLINE_MS)], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    this.#exited = once(this.#child, "exit");
    let partial = "";
    this.#child.stdout?.setEncoding("utf8");
    this.#child.stdout?.on("data", (text: string) => {
      const parts = (partial + text).split("\n");
      partial = parts.pop() ?? "";
      for (const part of parts) if (part.trim() !== "") this.lines.push(JSON.parse(part) as SubLine);
      for (const wake of this.#waiters) wake();
    });
    this.#child.stderr?.setEncoding("utf8");
    this.#child.stderr?.on("data", (text: string) => (this.stderr += text));
  }

  /** Resolves once `count` lines of `kind` arrived; rejects at the deadline or if `bps sub` exits first. */
  waitFor(kind: string, count: number, deadlineMs = LINE_DEADLINE_MS): Promise<SubLine[]> {
    const matching = () => this.lines.filter((line) => line.kind === kind);
    return new Promise((resolve, reject) => {
      const check = () => {
        if (matching().length < count) return;
        settle();
        resolve(matching());
      };
      const settle = () => {
        clearTimeout(timer);
        this.#waiters.delete(check);
      };
      const timer = setTimeout(() => {
        settle();
        reject(new Error(`bps sub: ${matching().length} of ${count} "${kind}" lines in ${deadlineMs} ms; stderr:\n${this.stderr}`));
      }, deadlineMs);
      this.#waiters.add(check);
      void this.#exited.then(() => {
        if (!this.#waiters.has(check)) return;
        check();
        if (!this.#waiters.has(check)) return;
        settle();
        reject(new Error(`bps sub exited with ${matching().length} of ${count} "${kind}" lines; stderr:\n${this.stderr}`));
      });
      check();
    });
  }

  /** Ends the process (SIGTERM) and waits for it. */
  async stop(): Promise<void> {
    if (this.#child.exitCode === null && this.#child.signalCode === null) this.#child.kill("SIGTERM");
    await this.#exited;
  }
}

/** Starts `bps sub --json` with `args`. */
export function subscribe(args: readonly string[]): CliSubscriber {
  return new CliSubscriber(args);
}
