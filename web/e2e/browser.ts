/**
 * Headless Chromium for the end-to-end tests: Debian's `chromium` driven by
 * `playwright-core` through its `executablePath` (no browser download), and the demo page
 * opened in a fresh browser context per person, so each page has its own localStorage and
 * therefore its own key.
 *
 * Owns: `launchChromium`, `openDemo`, `DemoPage` (the page, its address, the errors it
 * threw) and the waiting deadlines. Never: reaches into the page's state: tests read what
 * the page shows, through its `data-testid` hooks.
 */

import { type Browser, type Locator, type Page, chromium } from "playwright-core";

/** Debian's binary; `$CHROMIUM_BIN` overrides it. */
export const CHROMIUM_BIN = process.env["CHROMIUM_BIN"] ?? "/usr/bin/chromium";
/** The launch flags the issue names: headless, no sandbox (root in CI), no background traffic. */
export const CHROMIUM_ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];
/** Bound on the launch (a cold start on a busy 2-core machine). */
export const LAUNCH_DEADLINE_MS = 30_000;
/** Bound on any one thing a page should show (a join, a delivery, a role change). */
export const PAGE_DEADLINE_MS = 15_000;
/** The viewport, small enough that a screenshot stays a few tens of KiB. */
const VIEWPORT = { width: 760, height: 560 };

/** One person's tab of the demo. */
export interface DemoPage {
  readonly page: Page;
  /** The page's own address, `0x…`, as it shows it. */
  readonly address: string;
  /** Uncaught errors the page threw. */
  readonly errors: string[];
  close(): Promise<void>;
}

/** Launches Debian's Chromium headless. */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({ executablePath: CHROMIUM_BIN, args: CHROMIUM_ARGS, timeout: LAUNCH_DEADLINE_MS });
}

/** How `openDemo` treats the question a link to another broker asks first. */
export interface OpenOptions {
  /** The URL's `ws` names another broker than the page's: agree to connect there. */
  readonly agreeToEndpoint?: boolean;
}

/** Opens `url` in a new context (a new person) and waits until the page shows its address. */
export async function openDemo(browser: Browser, url: string, options: OpenOptions = {}): Promise<DemoPage> {
  const context = await browser.newContext({ viewport: VIEWPORT });
  const page = await context.newPage();
  page.setDefaultTimeout(PAGE_DEADLINE_MS);
  const errors: string[] = [];
  page.on("pageerror", (error) => errors.push(error.message));
  await page.goto(url, { timeout: PAGE_DEADLINE_MS });
  if (options.agreeToEndpoint === true) await testId(page, "endpoint-continue").click();
  const address = await testId(page, "my-address").textContent();
  if (address === null || !/^0x[0-9a-f]{40}$/.test(address)) throw new Error(`the page at ${url} shows no address`);
  return { page, address, errors, close: () => context.close() };
}

/** The element(s) with `data-testid` = `id`. */
export function testId(page: Page, id: string): Locator {
  return page.locator(`[data-testid="${id}"]`);
}

/** Waits until the element with `data-testid` = `id` has exactly `text`. */
export async function waitForText(page: Page, id: string, text: string): Promise<void> {
  await page.waitForFunction(
    ([selector, expected]) => document.querySelector(selector!)?.textContent === expected,
    [`[data-testid="${id}"]`, text],
    { timeout: PAGE_DEADLINE_MS },
  );
}

/** Waits until at least `count` elements with `data-testid` = `id` are on the page. */
export async function waitForCount(page: Page, id: string, count: number): Promise<void> {
  await page.waitForFunction(
    ([selector, expected]) => document.querySelectorAll(selector!).length >= Number(expected),
    [`[data-testid="${id}"]`, String(count)],
    { timeout: PAGE_DEADLINE_MS },
  );
}

/** Types `text` into the page's compose box and sends it. */
export async function send(page: Page, text: string): Promise<void> {
  await testId(page, "compose-text").fill(text);
  await testId(page, "send").click();
}

/** What the page shows of its verified messages: author, index and text of each. */
export async function messages(page: Page): Promise<Array<{ author: string; index: string; text: string }>> {
  return testId(page, "message").evaluateAll((nodes) =>
    nodes.map((node) => ({
      author: node.getAttribute("data-author") ?? "",
      index: node.getAttribute("data-index") ?? "",
      text: node.querySelector(".text")?.textContent ?? "",
    })),
  );
}

/** The demo page's URL on the broker's WebSocket listener (`ws`, host:port) with `params`. */
export function demoUrl(ws: string, params: Record<string, string>): string {
  return `http://${ws}/?${new URLSearchParams(params).toString()}`;
}

/** A room name no other test (or earlier run) uses. */
export function uniqueRoom(prefix: string): string {
  return `${prefix}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
}
