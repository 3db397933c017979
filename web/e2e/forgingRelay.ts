/**
 * A test-only forger: a WebSocket relay between a page and the broker's native endpoint
 * that passes every message through unchanged except one, the `nth` delivered DATA
 * Broadcast, in which it flips one byte of the chunk's payload. The frame stays
 * well-formed (same length, same fields); only the signature no longer covers it, which is
 * what the page's verification must catch. With `floodCopies` it then sends that many more
 * forgeries of the frame in one burst, each with another payload bit flipped (so each
 * recovers another signer), as a hostile broker flooding the page would: each costs the
 * page a full signature check, which its worker's budget must absorb.
 *
 * Owns: `startForgingRelay`, `Forgery` (what it changed, so the test can look for it).
 * Never: changes the Join, the Ack or any other frame, or talks to anything but
 * 127.0.0.1.
 */

import { once } from "node:events";
import { type AddressInfo } from "node:net";
import { WebSocket, WebSocketServer } from "ws";

import {
  FRAME_BYTES_MAX_DEFAULT,
  Kind,
  NATIVE_PATH,
  SOC_MIN_CHUNK_SIZE,
  decodeBroadcast,
  decodeFrameMessage,
  parseSoc,
} from "../src/index.js";

/** The one change the relay made. */
export interface Forgery {
  /** The payload as signed, and as delivered. */
  readonly original: string;
  readonly forged: string;
}

/** A running relay. */
export interface ForgingRelay {
  /** The endpoint a page connects to instead of the broker's. */
  readonly endpoint: string;
  readonly forgeries: Forgery[];
  close(): Promise<void>;
}

/** The payload byte flipped (the first), and how (lowest bit): a one-letter change. */
const FLIP_OFFSET = 0;
const FLIP_MASK = 0x01;

/** What else the relay does besides the one forgery. */
export interface RelayOptions {
  /** Copies of the forged frame sent right after it (default none). */
  readonly floodCopies?: number;
}

/** Relays to `brokerWs` (host:port) and forges the `nth` (1-based) delivered DATA frame. */
export async function startForgingRelay(brokerWs: string, nth: number, options: RelayOptions = {}): Promise<ForgingRelay> {
  const server = new WebSocketServer({ host: "127.0.0.1", port: 0, path: NATIVE_PATH });
  await once(server, "listening");
  const forgeries: Forgery[] = [];
  let delivered = 0;
  server.on("connection", (page) => {
    const broker = new WebSocket(`ws://${brokerWs}${NATIVE_PATH}`);
    const early: Buffer[] = [];
    let acked = false;
    page.on("message", (data: Buffer) => (broker.readyState === WebSocket.OPEN ? broker.send(data) : early.push(data)));
    broker.on("open", () => early.splice(0).forEach((data) => broker.send(data)));
    broker.on("message", (data: Buffer) => {
      const message = new Uint8Array(data);
      // The first message is the Ack; every later one a Broadcast.
      const forge = acked && isData(message) && ++delivered === nth;
      const genuine = message.slice();
      if (forge) forgeries.push(flipPayloadByte(message));
      acked = true;
      page.send(message);
      if (forge) for (let copy = 1; copy <= (options.floodCopies ?? 0); copy++) page.send(floodCopy(genuine, copy));
    });
    page.on("close", () => broker.close());
    broker.on("close", () => page.close());
    broker.on("error", () => page.close());
  });
  const { port } = server.address() as AddressInfo;
  return {
    endpoint: `ws://127.0.0.1:${port}${NATIVE_PATH}`,
    forgeries,
    close: async () => {
      for (const client of server.clients) client.terminate();
      server.close();
      await once(server, "close");
    },
  };
}

function isData(message: Uint8Array): boolean {
  const body = decodeFrameMessage(message, FRAME_BYTES_MAX_DEFAULT);
  const broadcast = body.ok ? decodeBroadcast(body.value) : undefined;
  return broadcast?.ok === true && broadcast.value.kind === Kind.DATA;
}

/** Forgery number `copy` (from 1) of the DATA frame in `genuine`: another payload bit flipped each time. */
function floodCopy(genuine: Uint8Array, copy: number): Uint8Array {
  const message = genuine.slice();
  const { at, length } = payloadAt(message);
  const bit = copy % (length * 8);
  message[at + Math.floor(bit / 8)] = message[at + Math.floor(bit / 8)]! ^ (1 << (bit % 8));
  return message;
}

/** Where the payload of the DATA frame in `message` starts, and its length. */
function payloadAt(message: Uint8Array): { at: number; length: number } {
  const body = decodeFrameMessage(message, FRAME_BYTES_MAX_DEFAULT);
  const broadcast = body.ok ? decodeBroadcast(body.value) : undefined;
  if (broadcast?.ok !== true) throw new Error("not a Broadcast");
  const soc = parseSoc(broadcast.value.soc);
  if (!soc.ok || soc.value.payload.length === 0) throw new Error("the DATA frame has no payload to forge");
  return {
    at: indexOf(message, broadcast.value.soc.subarray(0, SOC_MIN_CHUNK_SIZE)) + SOC_MIN_CHUNK_SIZE,
    length: soc.value.payload.length,
  };
}

/** Flips one payload byte of the DATA frame in `message`, in place. */
function flipPayloadByte(message: Uint8Array): Forgery {
  const body = decodeFrameMessage(message, FRAME_BYTES_MAX_DEFAULT);
  const broadcast = body.ok ? decodeBroadcast(body.value) : undefined;
  if (broadcast?.ok !== true) throw new Error("not a Broadcast");
  const chunk = broadcast.value.soc.slice();
  const soc = parseSoc(chunk);
  if (!soc.ok || soc.value.payload.length <= FLIP_OFFSET) throw new Error("the DATA frame has no payload to forge");
  const original = soc.value.payload.slice();
  const forged = original.slice();
  forged[FLIP_OFFSET] = forged[FLIP_OFFSET]! ^ FLIP_MASK;
  // The chunk's bytes appear once in the frame: find them and flip inside the payload.
  const at = indexOf(message, chunk.subarray(0, SOC_MIN_CHUNK_SIZE)) + SOC_MIN_CHUNK_SIZE + FLIP_OFFSET;
  message[at] = message[at]! ^ FLIP_MASK;
  const text = new TextDecoder();
  return { original: text.decode(original), forged: text.decode(forged) };
}

function indexOf(haystack: Uint8Array, needle: Uint8Array): number {
  outer: for (let start = 0; start + needle.length <= haystack.length; start++) {
    for (let offset = 0; offset < needle.length; offset++) if (haystack[start + offset] !== needle[offset]) continue outer;
    return start;
  }
  throw new Error("the chunk is not in its frame");
}
