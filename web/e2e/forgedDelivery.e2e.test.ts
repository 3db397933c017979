/**
 * A forged delivery: a live-stream viewer connects through a relay that flips one byte in
 * the payload of the second DATA frame the broker delivers. The page marks that frame as
 * failed verification, shows neither its original nor its forged text as a message, and
 * reports the index gap it leaves; the frames around it are shown verified.
 */

import type { Browser } from "playwright-core";
import { afterAll, beforeAll, expect, inject, it } from "vitest";

import { keccak256, toHex, utf8 } from "../src/index.js";
import { newKey, publish } from "./bpsCli.js";
import { demoUrl, launchChromium, messages, openDemo, testId, uniqueRoom, waitForCount, waitForText } from "./browser.js";
import { startForgingRelay } from "./forgingRelay.js";

let browser: Browser;
beforeAll(async () => {
  browser = await launchChromium();
});
afterAll(async () => {
  await browser?.close();
});

it("a page given a forged delivery marks it as failed verification and does not show it as a message", async () => {
  const { tcp, ws } = inject("broker");
  const room = uniqueRoom("forged");
  const admin = newKey();
  const relay = await startForgingRelay(ws, 2);
  const viewer = await openDemo(browser, demoUrl(ws, { view: "live", room, admin: `0x${admin.address}`, ws: relay.endpoint }), {
    agreeToEndpoint: true,
  });
  try {
    await waitForText(viewer.page, "status", "watching");
    const frames = ["first frame", "second frame", "third frame"];
    const topic = toHex(keccak256(utf8(room)));
    await publish([
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
      ...frames,
    ]);
    await waitForCount(viewer.page, "message", 2);
    await waitForCount(viewer.page, "failure", 1);

    expect(relay.forgeries).toEqual([{ original: "second frame", forged: "recond frame" }]);
    const shown = await messages(viewer.page);
    expect(shown.map((message) => message.text)).toEqual(["first frame", "third frame"]);
    expect(new Set(shown.map((message) => message.author))).toEqual(new Set([`0x${admin.address}`]));
    const failure = testId(viewer.page, "failure");
    expect(await failure.getAttribute("class")).toContain("failed");
    expect(await failure.textContent()).toMatch(/^✗ verification failed: /);
    const page = await viewer.page.locator("body").innerText();
    expect(page).not.toContain("second frame");
    expect(page).not.toContain("recond frame");
    const [first, third] = shown.map((message) => BigInt(message.index));
    expect(await testId(viewer.page, "note").allTextContents()).toContain(
      `gap from 0x${admin.address}: expected #${first! + 1n}, got #${third}`,
    );
    expect(viewer.errors).toEqual([]);
  } finally {
    await viewer.close();
    await relay.close();
  }
});
