/**
 * The transport abstraction: a link carries whole binary messages both ways, and on the
 * broker's native endpoint each message is exactly one frame (prefix included). A browser
 * or Node WebSocket (`webSocketTransport`) and the in-memory pair of the tests
 * (`memoryTransport`) both implement it, so `Publisher` and `Subscriber` never know which.
 *
 * Owns: `Transport`, `Link`, `LinkHandlers`, `TransportFault` and `TransportError`.
 *
 * Never: frames, decodes or interprets messages (`session.ts` does), retries (callers back
 * off, R38), or calls `closed` after the owner's own `close()`.
 */

import { BpsError } from "./errors.js";

/** Why a link could not open, or ended without our `close()`. */
export type TransportFault =
  | { readonly code: "connect-failed"; readonly detail: string }
  | { readonly code: "connect-timeout"; readonly ms: number }
  | { readonly code: "closed-by-peer"; readonly closeCode: number; readonly reason: string }
  | { readonly code: "link-error"; readonly detail: string }
  | { readonly code: "text-message" };

/** Text for a transport fault. */
export function describeTransportFault(fault: TransportFault): string {
  switch (fault.code) {
    case "connect-failed":
      return `cannot connect: ${fault.detail}`;
    case "connect-timeout":
      return `no connection within ${fault.ms} ms`;
    case "closed-by-peer":
      return `closed by the peer (code ${fault.closeCode}${fault.reason === "" ? "" : `: ${fault.reason}`})`;
    case "link-error":
      return `link error: ${fault.detail}`;
    case "text-message":
      return "a text message on the native endpoint, which carries binary frames only";
  }
}

/** A link could not be opened or used. */
export class TransportError extends BpsError<TransportFault> {}

/** What a link reports to its owner. */
export interface LinkHandlers {
  /** One whole binary message, in arrival order. */
  message(data: Uint8Array): void;
  /** The link ended without the owner's `close()`; called at most once, last. */
  closed(fault: TransportFault): void;
}

/** One open connection. */
export interface Link {
  /** Sends one binary message (a whole frame). Ignored once the link has ended. */
  send(message: Uint8Array): void;
  /** Ends the link; no handler is called after this. */
  close(): void;
  /** Bytes accepted by `send` and not yet handed to the network. */
  readonly bufferedBytes: number;
}

/** Opens links to one endpoint. */
export interface Transport {
  /** Resolves once the link is open; rejects with `TransportError`. */
  open(handlers: LinkHandlers): Promise<Link>;
}
