/**
 * A jam (closed FEED_TOPIC cohort): the admin page grants a second page by publishing a
 * ROSTER naming it; the seat claims and plays and the admin page shows it verified; the
 * admin revokes it with a roster without it; the seat's library stops, and a frame the
 * seat then writes anyway ("insist") is dropped by the broker (R24, counted as
 * `drop_revoked_in_grace`) and never reaches the admin page.
 */

import type { Browser } from "playwright-core";
import { afterAll, beforeAll, expect, inject, it } from "vitest";

import { demoUrl, launchChromium, messages, openDemo, send, testId, uniqueRoom, waitForCount, waitForText } from "./browser.js";
import { counter } from "./metrics.js";

/** How long the broker may take to count the dropped frame (well inside the 5 s grace). */
const DROP_DEADLINE_MS = 4_000;
/** Polling interval of that wait. */
const DROP_POLL_MS = 100;

let browser: Browser;
beforeAll(async () => {
  browser = await launchChromium();
});
afterAll(async () => {
  await browser?.close();
});

it("a jam: the admin grants a seat, the seat plays, the admin revokes it and its later frames are refused", async () => {
  const { ws, admin: adminPort } = inject("broker");
  const room = uniqueRoom("jam");
  const host = await openDemo(browser, demoUrl(ws, { view: "jam", room, role: "admin" }));
  const seatUrl = await testId(host.page, "seat-link").getAttribute("href");
  const seat = await openDemo(browser, seatUrl!);
  try {
    await waitForText(host.page, "role", "role: publisher");
    await waitForText(seat.page, "role", "role: awaiting-roster");

    await testId(host.page, "grant-address").fill(seat.address);
    await testId(host.page, "grant").click();
    await waitForText(seat.page, "role", "role: publisher");
    await send(seat.page, "riff 1 from the seat");
    await waitForCount(host.page, "message", 1);
    expect(await messages(host.page)).toEqual([
      { author: seat.address, index: expect.any(String) as string, text: "riff 1 from the seat" },
    ]);

    await host.page.locator(`[data-testid="revoke"][data-address="${seat.address}"]`).click();
    await waitForText(seat.page, "role", "role: revoked");

    const droppedBefore = await counter(adminPort, "bps_drop_revoked_in_grace_total");
    await testId(seat.page, "insist").check();
    await send(seat.page, "riff 2 after the revocation");
    await waitForCount(seat.page, "insisted", 1);
    await expect
      .poll(() => counter(adminPort, "bps_drop_revoked_in_grace_total"), { timeout: DROP_DEADLINE_MS, interval: DROP_POLL_MS })
      .toBe(droppedBefore + 1);

    // The broker has dropped it, so nothing is in flight: the admin page shows only riff 1.
    expect((await messages(host.page)).map((message) => message.text)).toEqual(["riff 1 from the seat"]);
    expect(await testId(host.page, "failure").count()).toBe(0);
    expect([...host.errors, ...seat.errors]).toEqual([]);
  } finally {
    // Before the revoked seat's claim deadline (30 s), which would blocklist 127.0.0.1.
    await seat.close();
    await host.close();
  }
});
