// The demo page's keys without a browser: a key is bound to the endpoint it was made for,
// a link to another broker asks first and never gets the home key, an unbound key of an
// older page is bound to the home broker, and export and import round-trip.

import { describe, expect, it } from "vitest";

import { SigningKey, toHex } from "../src/index.js";
import { ConfigError, readConfig } from "../demo/src/config.js";
import { endpointQuestion } from "../demo/src/endpointGate.js";
import { exportIdentity, findIdentity, identitySlot, loadIdentity, parseImport } from "../demo/src/identity.js";

/** localStorage as the page sees it, in memory. */
class MemoryStorage implements Storage {
  readonly #items = new Map<string, string>();
  get length(): number {
    return this.#items.size;
  }
  clear(): void {
    this.#items.clear();
  }
  getItem(key: string): string | null {
    return this.#items.get(key) ?? null;
  }
  key(index: number): string | null {
    return [...this.#items.keys()][index] ?? null;
  }
  removeItem(key: string): void {
    this.#items.delete(key);
  }
  setItem(key: string, value: string): void {
    this.#items.set(key, value);
  }
}

const page = { protocol: "http:", host: "broker.example:1639" };
const HOME = "ws://broker.example:1639/bps/v1";
const OTHER = "ws://elsewhere.example:1639/bps/v1";

describe("readConfig: endpoints", () => {
  it("connects to the page's own broker unless ws names another, normalised", () => {
    expect(readConfig("?view=chat", page)).toMatchObject({ endpoint: HOME, home: HOME });
    expect(readConfig("?ws=WS://ElseWhere.example:1639/bps/v1", page)).toMatchObject({ endpoint: OTHER, home: HOME });
    expect(readConfig("?ws=ws://broker.example:80/bps/v1", page).endpoint).toBe("ws://broker.example/bps/v1");
    expect(readConfig("", { protocol: "https:", host: "broker.example" }).home).toBe("wss://broker.example/bps/v1");
  });

  it("refuses a ws that is no WebSocket URL", () => {
    for (const bad of ["not a url", "http://broker.example/bps/v1", "ws://user:pass@broker.example/bps/v1"]) {
      expect(() => readConfig(`?ws=${encodeURIComponent(bad)}`, page)).toThrow(ConfigError);
    }
  });
});

describe("identities bound to endpoints", () => {
  it("keeps one key per endpoint, and a reload finds the same one", () => {
    const storage = new MemoryStorage();
    const home = loadIdentity(storage, "default", HOME, HOME);
    const other = loadIdentity(storage, "default", OTHER, HOME);
    expect(home.fresh && other.fresh).toBe(true);
    expect(toHex(home.key.address)).not.toBe(toHex(other.key.address));
    expect(home.slot).toBe(identitySlot("default", HOME));
    const again = loadIdentity(storage, "default", HOME, HOME);
    expect(again.fresh).toBe(false);
    expect(toHex(again.key.address)).toBe(toHex(home.key.address));
    expect(JSON.parse(storage.getItem(home.slot)!)).toMatchObject({ version: 1, endpoint: HOME });
  });

  it("never uses a record that names another endpoint, even copied into this endpoint's entry", () => {
    const storage = new MemoryStorage();
    const home = loadIdentity(storage, "default", HOME, HOME);
    storage.setItem(identitySlot("default", OTHER), storage.getItem(home.slot)!);
    expect(findIdentity(storage, "default", OTHER)).toBeUndefined();
    const other = loadIdentity(storage, "default", OTHER, HOME);
    expect(other.fresh).toBe(true);
    expect(toHex(other.key.address)).not.toBe(toHex(home.key.address));
  });

  it("binds an older page's unbound key to the home broker only", () => {
    const legacy = SigningKey.generate();
    const storage = new MemoryStorage();
    storage.setItem("bps-demo/key/default", toHex(legacy.exportSecret()));
    const other = loadIdentity(storage, "default", OTHER, HOME);
    expect(toHex(other.key.address)).not.toBe(toHex(legacy.address));
    const home = loadIdentity(storage, "default", HOME, HOME);
    expect(toHex(home.key.address)).toBe(toHex(legacy.address));
    expect(home.fresh).toBe(false);
    expect(storage.getItem("bps-demo/key/default")).toBeNull();
  });

  it("replaces a damaged entry with a fresh key", () => {
    const storage = new MemoryStorage();
    storage.setItem(identitySlot("default", HOME), "{not json");
    expect(loadIdentity(storage, "default", HOME, HOME).fresh).toBe(true);
  });
});

describe("endpointQuestion: a link to another broker asks first", () => {
  it("asks nothing on the page's own broker", () => {
    expect(endpointQuestion(readConfig("?view=chat", page), new MemoryStorage())).toBeUndefined();
  });

  it("names both endpoints, the home key that stays home, and that a fresh key would be made", () => {
    const storage = new MemoryStorage();
    const home = loadIdentity(storage, "default", HOME, HOME);
    const question = endpointQuestion(readConfig(`?ws=${encodeURIComponent(OTHER)}`, page), storage);
    expect(question).toEqual({ endpoint: OTHER, home: HOME, endpointKey: undefined, homeKey: `0x${toHex(home.key.address)}` });
    expect(storage.length).toBe(1);
  });

  it("names the key already made for that endpoint", () => {
    const storage = new MemoryStorage();
    const other = loadIdentity(storage, "default", OTHER, HOME);
    const question = endpointQuestion(readConfig(`?ws=${encodeURIComponent(OTHER)}`, page), storage);
    expect(question).toEqual({ endpoint: OTHER, home: HOME, endpointKey: `0x${toHex(other.key.address)}`, homeKey: undefined });
  });
});

describe("export and import", () => {
  it("round-trips a key through its export file, with its endpoint", () => {
    const identity = loadIdentity(new MemoryStorage(), "default", HOME, HOME);
    const file = exportIdentity(identity);
    expect(JSON.parse(file)).toMatchObject({ format: "bps-demo-identity", endpoint: HOME, address: `0x${toHex(identity.key.address)}` });
    const imported = parseImport(file);
    if (typeof imported === "string") throw new Error(imported);
    expect(toHex(imported.key.address)).toBe(toHex(identity.key.address));
    expect(imported.endpoint).toBe(HOME);
  });

  it("takes a bare secret, and says why anything else is refused", () => {
    const key = SigningKey.generate();
    const imported = parseImport(`  0x${toHex(key.exportSecret())}\n`);
    expect(typeof imported !== "string" && toHex(imported.key.address)).toBe(toHex(key.address));
    expect(parseImport("hello")).toBe("neither an exported key file nor 64 hex digits");
    expect(parseImport('{"format":"other"}')).toBe("not an exported key file");
    expect(parseImport('{"format":"bps-demo-identity","secret":"12"}')).toBe("the file's secret is not 64 hex digits");
    expect(parseImport("0".repeat(64))).toMatch(/^not a usable key: /);
  });
});
