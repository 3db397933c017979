/**
 * Verification in the page's Web Worker under a flood: a viewer connects through a relay
 * that forges the second DATA frame the broker delivers and then sends thousands more
 * forgeries of it (each with another bit flipped) in one burst, as a hostile broker would. The worker checks what
 * its budget lets through and rejects every forgery; what exceeds the budget is dropped,
 * counted and shown; nothing is checked on the page's own thread; the page answers
 * throughout; and a message published after the flood is shown verified.
 */

import type { Browser } from "playwright-core";
import { afterAll, beforeAll, expect, inject, it } from "vitest";

import { keccak256, toHex, utf8 } from "../src/index.js";
import { newKey, publish } from "./bpsCli.js";
import { demoUrl, launchChromium, messages, openDemo, testId, uniqueRoom, waitForCount, waitForText } from "./browser.js";
import { startForgingRelay } from "./forgingRelay.js";

/** Forged copies in the burst: far more than the page's queue holds (256). */
const FLOOD_COPIES = 3000;
/** Bound on the page answering a question while it works through the flood: generous for a loaded 2-core machine. */
const RESPONSIVE_DEADLINE_MS = 10_000;
/** Bound on the worker getting through what the budget let in. */
const DRAIN_DEADLINE_MS = 60_000;

let browser: Browser;
beforeAll(async () => {
  browser = await launchChromium();
});
afterAll(async () => {
  await browser?.close();
});

it("a flood of forged deliveries is checked in the worker within its budget, the excess dropped and shown, the page responsive", async () => {
  const { tcp, ws } = inject("broker");
  const room = uniqueRoom("flood");
  const admin = newKey();
  const relay = await startForgingRelay(ws, 2, { floodCopies: FLOOD_COPIES });
  const viewer = await openDemo(browser, demoUrl(ws, { view: "live", room, admin: `0x${admin.address}`, ws: relay.endpoint }), {
    agreeToEndpoint: true,
  });
  try {
    await waitForText(viewer.page, "status", "watching");
    expect(viewer.page.workers().map((worker) => new URL(worker.url()).pathname)).toEqual(["/verifyWorker.js"]);
    const topic = toHex(keccak256(utf8(room)));
    const pub = (...texts: string[]) =>
      publish([
        "--target",
        tcp,
        "--topic",
        topic,
        "--binding",
        "feed-topic",
        "--admin",
        admin.address,
        "--key",
        admin.key,
        "--message",
        ...texts,
      ]);
    await pub("first frame", "second frame", "third frame");
    await waitForCount(viewer.page, "failure", 1);

    // While the worker works through the flood, the page keeps answering.
    let slowestMs = 0;
    const floodSeen = Date.now();
    for (;;) {
      const started = Date.now();
      const pending = await viewer.page.evaluate(() =>
        document.querySelector('[data-testid="verify-stats"]')?.getAttribute("data-pending"),
      );
      slowestMs = Math.max(slowestMs, Date.now() - started);
      if (pending === "0" || Date.now() - floodSeen > DRAIN_DEADLINE_MS) break;
      await viewer.page.waitForTimeout(100);
    }
    expect(slowestMs).toBeLessThan(RESPONSIVE_DEADLINE_MS);
    await viewer.page.waitForFunction(
      () => document.querySelector('[data-testid="verify-stats"]')?.getAttribute("data-pending") === "0",
      undefined,
      { timeout: DRAIN_DEADLINE_MS },
    );

    const stats = testId(viewer.page, "verify-stats");
    const count = async (name: string) => Number(await stats.getAttribute(`data-${name}`));
    const text = (await stats.textContent()) ?? "";
    console.log(`flood of ${FLOOD_COPIES}: ${text}; slowest answer ${slowestMs} ms`);
    const inWorker = await count("in-worker");
    const dropped = (await count("dropped-full")) + (await count("dropped-late"));
    expect(await count("on-page")).toBe(0);
    expect(dropped).toBeGreaterThan(0);
    expect(inWorker).toBeGreaterThan(1);
    expect(inWorker + dropped).toBeGreaterThanOrEqual(FLOOD_COPIES + 2);
    expect(text).toContain(`dropped unverified: ${dropped}`);
    // Forgeries of one kind in a row are one line with a count, not a line per copy.
    const repeats = await testId(viewer.page, "failure").evaluateAll((nodes) =>
      nodes.map((node) => Number(node.getAttribute("data-repeat"))),
    );
    expect(repeats.length).toBeLessThanOrEqual(3);
    expect(repeats.reduce((sum, repeat) => sum + repeat, 0)).toBeGreaterThan(1);

    await pub("after the flood");
    await viewer.page.waitForFunction(
      () => Array.from(document.querySelectorAll('[data-testid="message"] .text')).some((node) => node.textContent === "after the flood"),
      undefined,
      { timeout: DRAIN_DEADLINE_MS },
    );
    const shown = await messages(viewer.page);
    expect(new Set(shown.map((message) => message.author))).toEqual(new Set([`0x${admin.address}`]));
    const body = await viewer.page.locator("body").innerText();
    expect(body).not.toContain("second frame");
    expect(body).not.toContain("recond frame");
    expect(await count("on-page")).toBe(0);
    expect(viewer.errors).toEqual([]);
  } finally {
    await viewer.close();
    await relay.close();
  }
});
