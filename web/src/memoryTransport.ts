/**
 * An in-memory `Transport` for tests and simulations: every `open` makes a pair of linked
 * ends, hands the far end to the `accept` callback, and carries messages between them on
 * the microtask queue (never re-entrantly), copied, in order. A close reaches the other end
 * after every message sent before it, as a WebSocket close does.
 *
 * Owns: `memoryTransport`, `MemoryPeer`.
 *
 * Never: interprets messages or plays a broker: the code on the far end (a test) decides
 * every byte it sends.
 */

import type { Link, LinkHandlers, Transport, TransportFault } from "./transport.js";

/** The far end of an in-memory link, as seen by whoever accepted it. */
export interface MemoryPeer {
  /** Sends one message to the near end. */
  send(message: Uint8Array): void;
  /** Ends the link as a peer would: the near end's `closed` runs with this close code. */
  close(closeCode?: number, reason?: string): void;
  /** Receives what the near end sends; set it in `accept`. */
  onMessage: (data: Uint8Array) => void;
  /** Runs when the near end closes its link. */
  onClose: () => void;
  /** Whether either side has closed. */
  readonly ended: boolean;
}

/** A transport whose every link's far end goes to `accept`. */
export function memoryTransport(accept: (peer: MemoryPeer) => void): Transport {
  return {
    open(handlers: LinkHandlers): Promise<Link> {
      let nearOpen = true;
      let farOpen = true;
      const peer: MemoryPeer = {
        send(message) {
          if (!farOpen) return;
          const copy = message.slice();
          queueMicrotask(() => {
            if (nearOpen) handlers.message(copy);
          });
        },
        close(closeCode = 1000, reason = "") {
          if (!farOpen) return;
          farOpen = false;
          const fault: TransportFault = { code: "closed-by-peer", closeCode, reason };
          queueMicrotask(() => {
            if (!nearOpen) return;
            nearOpen = false;
            handlers.closed(fault);
          });
        },
        onMessage: () => undefined,
        onClose: () => undefined,
        get ended() {
          return !nearOpen || !farOpen;
        },
      };
      const link: Link = {
        send(message) {
          if (!nearOpen) return;
          const copy = message.slice();
          queueMicrotask(() => {
            if (farOpen) peer.onMessage(copy);
          });
        },
        close() {
          if (!nearOpen) return;
          nearOpen = false;
          queueMicrotask(() => {
            if (!farOpen) return;
            farOpen = false;
            peer.onClose();
          });
        },
        bufferedBytes: 0,
      };
      accept(peer);
      return Promise.resolve(link);
    },
  };
}
