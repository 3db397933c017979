/**
 * The WebSocket adapter against a loopback `ws` server that echoes bytes: one binary
 * message in, the same message out. It tests the adapter (binary messages, text refusal,
 * closes, the constructor injection), not a broker.
 */

import { type AddressInfo } from "node:net";
import { WebSocket, WebSocketServer } from "ws";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";

import {
  NATIVE_PATH,
  TransportError,
  type TransportFault,
  nativeEndpoint,
  toHex,
  webSocketTransport,
  type WebSocketConstructor,
} from "../src/index.js";

let server: WebSocketServer;
let url: string;

beforeAll(async () => {
  server = new WebSocketServer({ host: "127.0.0.1", port: 0, path: NATIVE_PATH });
  server.on("connection", (socket) => {
    socket.on("message", (data, isBinary) => {
      const text = new TextDecoder().decode(data as Buffer);
      if (!isBinary) return;
      if (text === "text please") socket.send("a text frame");
      else if (text === "close please") socket.close(4000, "asked to");
      else socket.send(data, { binary: true });
    });
  });
  await new Promise((resolve) => server.once("listening", resolve));
  url = nativeEndpoint("127.0.0.1", (server.address() as AddressInfo).port);
});

afterAll(() => new Promise((resolve) => server.close(resolve)));

const Ws = WebSocket as unknown as WebSocketConstructor;

describe("webSocketTransport", () => {
  it("needs a constructor where there is no global WebSocket (Node 20)", () => {
    const global = (globalThis as { WebSocket?: unknown }).WebSocket;
    if (global === undefined) expect(() => webSocketTransport(url)).toThrow(TransportError);
    expect(nativeEndpoint("broker.example", 1639)).toBe("ws://broker.example:1639/bps/v1");
  });

  it("carries each binary message whole, in order, both ways", async () => {
    const received: string[] = [];
    const link = await webSocketTransport(url, { WebSocket: Ws }).open({
      message: (data) => received.push(toHex(data)),
      closed: () => undefined,
    });
    const messages = [Uint8Array.of(3, 1, 2, 3), new Uint8Array(4300).fill(7), Uint8Array.of(0)];
    for (const message of messages) link.send(message);
    await vi.waitFor(() => expect(received).toEqual(messages.map(toHex)));
    expect(link.bufferedBytes).toBe(0);
    link.close();
  });

  it("ends the link on a text message and reports the peer's close", async () => {
    const faults: TransportFault[] = [];
    const transport = webSocketTransport(url, { WebSocket: Ws });
    const texting = await transport.open({ message: () => undefined, closed: (fault) => faults.push(fault) });
    texting.send(new TextEncoder().encode("text please"));
    await vi.waitFor(() => expect(faults).toEqual([{ code: "text-message" }]));
    const closing = await transport.open({ message: () => undefined, closed: (fault) => faults.push(fault) });
    closing.send(new TextEncoder().encode("close please"));
    await vi.waitFor(() => expect(faults[1]).toEqual({ code: "closed-by-peer", closeCode: 4000, reason: "asked to" }));
  });

  it("rejects with a typed fault when nothing listens", async () => {
    const closedPort = await new Promise<number>((resolve) => {
      const probe = new WebSocketServer({ host: "127.0.0.1", port: 0 }, () => {
        const port = (probe.address() as AddressInfo).port;
        probe.close(() => resolve(port));
      });
    });
    const opening = webSocketTransport(nativeEndpoint("127.0.0.1", closedPort), { WebSocket: Ws }).open({
      message: () => undefined,
      closed: () => undefined,
    });
    await expect(opening).rejects.toMatchObject({ fault: { code: "connect-failed" } });
  });
});
