/**
 * The live stream over both transports: a page watches a stream that `bps pub` publishes
 * over TCP and verifies every frame; a page broadcasts as the stream's admin and `bps sub`
 * over TCP receives and verifies every message. Both are explicit FEED_TOPIC cohorts.
 */

import type { Browser } from "playwright-core";
import { afterAll, beforeAll, expect, inject, it } from "vitest";

import { keccak256, toHex, utf8 } from "../src/index.js";
import { newKey, publish, subscribe } from "./bpsCli.js";
import { demoUrl, launchChromium, messages, openDemo, send, testId, uniqueRoom, waitForCount, waitForText } from "./browser.js";

let browser: Browser;
beforeAll(async () => {
  browser = await launchChromium();
});
afterAll(async () => {
  await browser?.close();
});

/** The `bps` flags of the live stream in `room` run by `admin` (hex). */
function streamFlags(tcp: string, room: string, admin: string): string[] {
  return ["--target", tcp, "--topic", toHex(keccak256(utf8(room))), "--binding", "feed-topic", "--admin", admin];
}

it("a page watches a live stream published over TCP by bps pub and verifies every frame", async () => {
  const { tcp, ws } = inject("broker");
  const room = uniqueRoom("show");
  const admin = newKey();
  const viewer = await openDemo(browser, demoUrl(ws, { view: "live", room, admin: `0x${admin.address}` }));
  try {
    await waitForText(viewer.page, "status", "watching");
    const frames = ["frame 1: curtain up", "frame 2: the band plays", "frame 3: ünïcödé ✓", "frame 4: applause", "frame 5: encore"];
    await publish([...streamFlags(tcp, room, admin.address), "--key", admin.key, "--message", ...frames]);
    await waitForCount(viewer.page, "message", frames.length);

    const shown = await messages(viewer.page);
    expect(shown.map((message) => message.text)).toEqual(frames);
    expect(new Set(shown.map((message) => message.author))).toEqual(new Set([`0x${admin.address}`]));
    const indices = shown.map((message) => BigInt(message.index));
    expect(indices.slice(1).map((index, position) => index - indices[position]!)).toEqual([1n, 1n, 1n, 1n]);
    expect(await testId(viewer.page, "failure").count()).toBe(0);
    expect(viewer.errors).toEqual([]);
  } finally {
    await viewer.close();
  }
});

it("a page broadcasts as the live stream's admin and bps sub over TCP verifies every message", async () => {
  const { tcp, ws } = inject("broker");
  const room = uniqueRoom("studio");
  const host = await openDemo(browser, demoUrl(ws, { view: "live", room, role: "admin" }));
  try {
    await waitForText(host.page, "role", "role: publisher");
    const texts = ["live from the page", "second frame", "third frame, with a ✓"];
    const sub = subscribe([...streamFlags(tcp, room, host.address.slice(2)), "--count", String(texts.length)]);
    try {
      await sub.waitFor("joined", 1);
      for (const text of texts) await send(host.page, text);
      const received = await sub.waitFor("data", texts.length);
      expect(received.map((line) => line["payload_utf8"])).toEqual(texts);
      expect(new Set(received.map((line) => line["owner"]))).toEqual(new Set([host.address.slice(2)]));
      expect(sub.lines.filter((line) => line.kind === "dropped")).toEqual([]);
      await waitForCount(host.page, "sent", texts.length);
      expect(host.errors).toEqual([]);
    } finally {
      await sub.stop();
    }
  } finally {
    await host.close();
  }
});
