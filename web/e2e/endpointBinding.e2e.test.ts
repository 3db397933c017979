/**
 * A key bound to its endpoint, in a real browser: a page that has a key for its own broker
 * is opened by a link whose `ws` names another endpoint (a relay in front of the same
 * broker). It asks first, naming both endpoints, and opens no WebSocket until the person
 * continues; then it signs there with a fresh key made for that endpoint only, while the
 * home key stays home. The key panel says where the key lives; export downloads the key
 * file; import replaces the key for this endpoint.
 */

import { readFile } from "node:fs/promises";
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, expect, inject, it } from "vitest";

import { newKey } from "./bpsCli.js";
import { PAGE_DEADLINE_MS, demoUrl, launchChromium, testId, uniqueRoom, waitForText } from "./browser.js";
import { startForgingRelay } from "./forgingRelay.js";

let browser: Browser;
beforeAll(async () => {
  browser = await launchChromium();
});
afterAll(async () => {
  await browser?.close();
});

it("a link to another endpoint asks first, names both, and uses a key bound to that endpoint only", async () => {
  const { ws } = inject("broker");
  const room = uniqueRoom("endpoint");
  const admin = `0x${newKey().address}`;
  const relay = await startForgingRelay(ws, 0);
  const context = await browser.newContext();
  try {
    const page = await context.newPage();
    page.setDefaultTimeout(PAGE_DEADLINE_MS);
    const errors: string[] = [];
    page.on("pageerror", (error) => errors.push(error.message));
    const sockets: string[] = [];
    page.on("websocket", (socket) => sockets.push(socket.url()));
    const home = `ws://${ws}/bps/v1`;

    await page.goto(demoUrl(ws, { view: "live", room, admin }));
    await waitForText(page, "status", "watching");
    const homeAddress = await testId(page, "my-address").textContent();
    expect(sockets).toEqual([home]);

    sockets.length = 0;
    const elsewhere = demoUrl(ws, { view: "live", room, admin, ws: relay.endpoint });
    await page.goto(elsewhere);
    await testId(page, "endpoint-confirm").waitFor();
    expect(await testId(page, "confirm-endpoint").textContent()).toBe(relay.endpoint);
    expect(await testId(page, "confirm-home").textContent()).toBe(home);
    const keyLine = await testId(page, "confirm-key").textContent();
    expect(keyLine).toContain("a new key, made in this browser for that endpoint only");
    expect(keyLine).toContain(`${homeAddress}, stays bound to it and is not used there`);
    expect(await testId(page, "endpoint-stay").getAttribute("href")).toBe(demoUrl(ws, { view: "live", room, admin }));
    expect(await testId(page, "my-address").count()).toBe(0);
    expect(sockets).toEqual([]);

    await testId(page, "endpoint-continue").click();
    await waitForText(page, "status", "watching");
    const elsewhereAddress = await testId(page, "my-address").textContent();
    expect(elsewhereAddress).toMatch(/^0x[0-9a-f]{40}$/);
    expect(elsewhereAddress).not.toBe(homeAddress);
    expect(sockets).toEqual([relay.endpoint]);

    await testId(page, "key-panel").locator("summary").click();
    const location = await testId(page, "key-location").textContent();
    expect(location).toContain(`localStorage for http://${ws}`);
    expect(location).toContain(`bound to ${relay.endpoint}`);
    expect(location).toContain("never sent");
    await testId(page, "key-export").click();
    expect(await testId(page, "key-export-warning").textContent()).toContain(`can sign as ${elsewhereAddress}`);
    const [download] = await Promise.all([page.waitForEvent("download"), testId(page, "key-download").click()]);
    const file = JSON.parse(await readFile(await download.path(), "utf8")) as Record<string, unknown>;
    expect(file).toMatchObject({ format: "bps-demo-identity", endpoint: relay.endpoint, address: elsewhereAddress });
    expect(file["secret"]).toMatch(/^[0-9a-f]{64}$/);

    // Asked again on the next visit, now naming the key made for that endpoint.
    await page.goto(elsewhere);
    expect(await testId(page, "confirm-key").textContent()).toContain(`your key ${elsewhereAddress}, made earlier for that endpoint`);

    // Home again: the home key, untouched; an import replaces it for the home endpoint.
    sockets.length = 0;
    await page.goto(demoUrl(ws, { view: "live", room, admin }));
    expect(await testId(page, "my-address").textContent()).toBe(homeAddress);
    const imported = newKey();
    await testId(page, "key-panel").locator("summary").click();
    await testId(page, "key-import-text").fill(imported.key);
    await Promise.all([page.waitForEvent("load"), testId(page, "key-import").click()]);
    await waitForText(page, "my-address", `0x${imported.address}`);
    expect(sockets.every((socket) => socket === home)).toBe(true);
    expect(errors).toEqual([]);
  } finally {
    await context.close();
    await relay.close();
  }
});
