/**
 * The broker's native WebSocket endpoint as a `Transport`: `ws://HOST:1639/bps/v1`, where
 * every binary message is exactly one frame of docs/PROTOCOL.md §1, varint prefix included
 * (the client's Join first, the broker's Ack, then Broadcasts both ways).
 *
 * Owns: `webSocketTransport`, `webSocketBrokers` (several native endpoints, ranked per
 * cohort by placement, as a `BrokerList`) and `NATIVE_PATH`/`NATIVE_PORT`. The WebSocket constructor is
 * injected: browsers have a global one; Node 20 has none, so pass the `ws` package's
 * (`import { WebSocket } from "ws"`). Binary messages arrive as `ArrayBuffer`s
 * (`binaryType = "arraybuffer"`, which both implement); a text message is a fault that
 * ends the link.
 *
 * Never: frames or decodes (`session.ts`), reconnects (`Publisher`, `Subscriber`), or
 * sends text.
 */

import { type BrokerList, brokerList } from "./reconnect.js";
import { type Link, type LinkHandlers, type Transport, TransportError, type TransportFault, describeTransportFault } from "./transport.js";

/** The native endpoint's path (our decision for the appliance). */
export const NATIVE_PATH = "/bps/v1";
/** The native endpoint's default port. */
export const NATIVE_PORT = 1639;
/** Bound on the WebSocket opening handshake: a broker that does not answer costs a retry, not a hang. */
export const CONNECT_TIMEOUT_MS_DEFAULT = 10_000;

/** What the adapter uses of a WebSocket; the browser's and the `ws` package's have it. */
export interface WebSocketLike {
  binaryType: string;
  readonly bufferedAmount: number;
  onopen: ((event: unknown) => void) | null;
  onmessage: ((event: { data: unknown }) => void) | null;
  onclose: ((event: { code: number; reason: string }) => void) | null;
  onerror: ((event: unknown) => void) | null;
  send(data: Uint8Array): void;
  close(code?: number, reason?: string): void;
}

/** A WebSocket constructor (the global `WebSocket`, or `ws`'s). */
export type WebSocketConstructor = new (url: string) => WebSocketLike;

/** Options of `webSocketTransport`. */
export interface WebSocketTransportOptions {
  /** The constructor; default `globalThis.WebSocket` (absent in Node 20). */
  readonly WebSocket?: WebSocketConstructor;
  /** Bound on the opening handshake (default `CONNECT_TIMEOUT_MS_DEFAULT`). */
  readonly connectTimeoutMs?: number;
}

/** The native endpoint URL of a broker host: `ws://host:1639/bps/v1`. */
export function nativeEndpoint(host: string, port: number = NATIVE_PORT, secure = false): string {
  return `${secure ? "wss" : "ws"}://${host}:${port}${NATIVE_PATH}`;
}

function bytesOf(data: unknown): Uint8Array | undefined {
  if (data instanceof ArrayBuffer) return new Uint8Array(data);
  if (ArrayBuffer.isView(data)) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  return undefined;
}

/** Links to the native endpoint at `url` (module docs). */
export function webSocketTransport(url: string, options: WebSocketTransportOptions = {}): Transport {
  const Constructor = options.WebSocket ?? (globalThis as { WebSocket?: WebSocketConstructor }).WebSocket;
  if (Constructor === undefined) {
    const fault: TransportFault = {
      code: "connect-failed",
      detail: "no WebSocket constructor here: pass one (in Node 20, the ws package's)",
    };
    throw new TransportError(fault, describeTransportFault(fault));
  }
  const connectTimeoutMs = options.connectTimeoutMs ?? CONNECT_TIMEOUT_MS_DEFAULT;
  return { open: (handlers) => openSocket(Constructor, url, connectTimeoutMs, handlers) };
}

/**
 * Several brokers' native endpoints (`ws://HOST:1639/bps/v1` each) as a `BrokerList`: a
 * `Publisher` or `Subscriber` given it joins its cohort's root by placement and fails over
 * in rank order (docs/SCALING.md). Throws `PlacementError` for a list that cannot be ranked.
 */
export function webSocketBrokers(urls: readonly string[], options: WebSocketTransportOptions = {}): BrokerList {
  return brokerList(urls, (url) => webSocketTransport(url, options));
}

function openSocket(Constructor: WebSocketConstructor, url: string, connectTimeoutMs: number, handlers: LinkHandlers): Promise<Link> {
  return new Promise((resolve, reject) => {
    let socket: WebSocketLike;
    try {
      socket = new Constructor(url);
    } catch (error) {
      const fault: TransportFault = { code: "connect-failed", detail: error instanceof Error ? error.message : String(error) };
      reject(new TransportError(fault, describeTransportFault(fault)));
      return;
    }
    socket.binaryType = "arraybuffer";
    let state: "connecting" | "open" | "ended" = "connecting";
    const end = (fault: TransportFault) => {
      const wasOpen = state === "open";
      if (state === "ended") return;
      state = "ended";
      clearTimeout(timer);
      socket.onopen = socket.onmessage = socket.onclose = socket.onerror = null;
      socket.close();
      if (wasOpen) handlers.closed(fault);
      else reject(new TransportError(fault, describeTransportFault(fault)));
    };
    const timer = setTimeout(() => end({ code: "connect-timeout", ms: connectTimeoutMs }), connectTimeoutMs);
    socket.onopen = () => {
      if (state !== "connecting") return;
      state = "open";
      clearTimeout(timer);
      resolve({
        send: (message) => {
          if (state === "open") socket.send(message);
        },
        close: () => {
          if (state === "ended") return;
          state = "ended";
          socket.onopen = socket.onmessage = socket.onclose = socket.onerror = null;
          socket.close(1000);
        },
        get bufferedBytes() {
          return socket.bufferedAmount;
        },
      });
    };
    socket.onmessage = (event) => {
      if (state !== "open") return;
      const bytes = bytesOf(event.data);
      if (bytes === undefined) end({ code: "text-message" });
      else handlers.message(bytes);
    };
    socket.onclose = (event) => end({ code: "closed-by-peer", closeCode: event.code, reason: event.reason });
    socket.onerror = () => end({ code: state === "open" ? "link-error" : "connect-failed", detail: `WebSocket error on ${url}` });
  });
}
