/**
 * What a view shows of its `Publisher`: the stream's state and role, its own publications
 * as sent, and every frame it receives as the library's `Admission` judged it.
 *
 * Owns: `showPublisherEvent`. Never: publishes or verifies.
 */

import { Kind, type PublisherEvent, Status, describeSessionFault, parseSoc } from "../../src/index.js";
import type { Shell } from "./shell.js";
import { showVerdict } from "./verdicts.js";

/** Writes one publisher event into `shell` (module docs). */
export function showPublisherEvent(shell: Shell, event: PublisherEvent): void {
  switch (event.type) {
    case "joined":
      shell.status("joined");
      shell.role(event.role);
      return;
    case "role":
      shell.role(event.role);
      return;
    case "sent":
      return showSent(shell, event.outgoing.kind, event.outgoing.index, event.outgoing.signed.chunk);
    case "received":
      return showVerdict(shell.feed, event.verdict);
    case "refused":
      shell.status(`refused (${Status[event.status]})${retry(event.retryInMs)}`);
      return;
    case "reset":
      shell.status(`reset: ${describeSessionFault(event.fault)}${retry(event.retryInMs)}`);
      shell.role("");
      return;
  }
}

function showSent(shell: Shell, kind: Kind, index: bigint | undefined, chunk: Uint8Array): void {
  const soc = parseSoc(chunk);
  if (!soc.ok) return;
  if (kind === Kind.DATA) shell.feed.sent(index ?? 0n, soc.value.payload);
  if (kind === Kind.AUTH) shell.feed.note("claimed the stream (AUTH)");
  if (kind === Kind.ROSTER) shell.feed.note(`roster #${index ?? 0n} sent`);
  if (kind === Kind.EOS) shell.feed.note("end of stream sent");
}

function retry(retryInMs: number | undefined): string {
  return retryInMs === undefined ? "" : `, retrying in ${(retryInMs / 1000).toFixed(1)} s`;
}
