/**
 * Two pages chat in a group-chat cohort (ALL + MNEMONIC with an admin): each publishes
 * through the real broker and shows the other's message with the author its own
 * verification recovered; neither shows its own message as a delivery (R25). The test
 * writes the screenshot demo/screenshots/group-chat.png (not committed; docs/images/demo-group-chat.png is
 * a copy from one run) while both messages are on screen.
 */

import { mkdirSync } from "node:fs";
import { dirname } from "node:path";
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, expect, inject, it } from "vitest";

import { type DemoPage, demoUrl, launchChromium, messages, openDemo, send, testId, waitForCount, waitForText } from "./browser.js";
import { webPath } from "./paths.js";

const SCREENSHOT = webPath("demo/screenshots/group-chat.png");

let browser: Browser;
beforeAll(async () => {
  browser = await launchChromium();
});
afterAll(async () => {
  await browser?.close();
});

it("two pages in a group chat each show the other's verified messages", async () => {
  const { ws } = inject("broker");
  // A fixed name reads well in the screenshot; the broker is new for every run.
  const room = "lobby";
  const alice = await openDemo(browser, demoUrl(ws, { view: "chat", room }));
  const invite = await testId(alice.page, "invite-link").getAttribute("href");
  expect(invite).toContain(`admin=${alice.address}`);
  const bob = await openDemo(browser, invite!);
  expect(bob.address).not.toBe(alice.address);
  const pages: DemoPage[] = [alice, bob];
  try {
    for (const person of pages) await waitForText(person.page, "status", "joined");

    await send(alice.page, "hello from alice");
    await waitForCount(bob.page, "message", 1);
    await send(bob.page, "hi alice, bob here");
    await waitForCount(alice.page, "message", 1);
    await waitForCount(bob.page, "sent", 1);

    expect(await messages(bob.page)).toEqual([{ author: alice.address, index: expect.any(String) as string, text: "hello from alice" }]);
    expect(await messages(alice.page)).toEqual([{ author: bob.address, index: expect.any(String) as string, text: "hi alice, bob here" }]);
    for (const person of pages) {
      expect(await testId(person.page, "sent").count()).toBe(1);
      expect(await testId(person.page, "failure").count()).toBe(0);
      expect(person.errors).toEqual([]);
    }

    mkdirSync(dirname(SCREENSHOT), { recursive: true });
    await bob.page.screenshot({ path: SCREENSHOT });
  } finally {
    for (const person of pages) await person.close();
  }
});
