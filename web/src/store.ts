/**
 * Where the client keeps what must outlive a session or a page load: the publisher's next
 * indices (R41: never reuse a DATA or ROSTER index) and the subscriber's cursors and roster.
 *
 * Owns: the `Store` interface (string keys to string values, sync or async, so
 * `localStorage`, IndexedDB or a file all fit), `MemoryStore` (the default, lost with the
 * process), `localStorageStore` (a browser's `Storage`), and the key layout `storeKey`.
 *
 * Never: interprets values (their owners do), or retries a failed write: a publisher
 * treats one as fatal to the publication, a subscriber reports it.
 */

import { toHex } from "./bytes.js";

/** A value or a promise of one. */
export type MaybePromise<T> = T | Promise<T>;

/** A caller-supplied key-value store (module docs). */
export interface Store {
  get(key: string): MaybePromise<string | undefined>;
  set(key: string, value: string): MaybePromise<void>;
}

/** The in-memory default: everything is lost when the object is. */
export class MemoryStore implements Store {
  readonly #values = new Map<string, string>();

  get(key: string): string | undefined {
    return this.#values.get(key);
  }

  set(key: string, value: string): void {
    this.#values.set(key, value);
  }
}

/** The subset of the Web Storage API a store needs (`window.localStorage` has it). */
export interface WebStorageLike {
  getItem(key: string): string | null;
  setItem(key: string, value: string): void;
}

/** A `Store` over a browser `Storage` such as `localStorage`. */
export function localStorageStore(storage: WebStorageLike): Store {
  return {
    get: (key) => storage.getItem(key) ?? undefined,
    set: (key, value) => storage.setItem(key, value),
  };
}

/** Namespace of every key this library writes; the version changes with the value format. */
export const STORE_PREFIX = "bps/v1";

/** `bps/v1/<what>/<topic hex>/<admin hex or "implicit">[/<more>...]`. */
export function storeKey(what: string, topic: Uint8Array, admin: Uint8Array | undefined, ...more: string[]): string {
  return [STORE_PREFIX, what, toHex(topic), admin === undefined ? "implicit" : toHex(admin), ...more].join("/");
}
