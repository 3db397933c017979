/**
 * This tab's signing key, bound to the endpoint it was made for: generated in the browser
 * on first use and kept in this browser's localStorage for the page's origin under
 * `bps-demo/key/<identity>@<endpoint>`, as a record that names its endpoint again, so a
 * reload keeps the same address and a key made for one broker is never used at another (a
 * link's `?ws=` to another broker gets that broker's own key, after the page asked,
 * `endpointGate.ts`).
 *
 * Owns: `IdentityRecord`, `Identity`, `identitySlot`, `findIdentity`, `loadIdentity`, the
 * export file (`exportIdentity`) and `parseImport`. A key stored before keys were bound
 * (a bare secret under `bps-demo/key/<identity>`) was made for the page's own broker and
 * is bound to it the first time it is loaded there.
 *
 * Never: puts the secret anywhere but its one localStorage entry and the export the person
 * asks for (no URL, no message, no log); the key object itself shows only its address.
 */

import { HASH_BYTES, SigningKey, fromHex, toHex } from "../../src/index.js";

const KEY_PREFIX = "bps-demo/key/";
/** The version of the stored record and of the export file. */
const RECORD_VERSION = 1;
/** What marks an export file, so an import can tell it from other JSON. */
const EXPORT_FORMAT = "bps-demo-identity";
const SECRET_HEX = /^(0x)?[0-9a-fA-F]{64}$/;

/** What one localStorage entry holds. */
export interface IdentityRecord {
  readonly version: typeof RECORD_VERSION;
  /** The endpoint the key was made for; it is used nowhere else. */
  readonly endpoint: string;
  /** The secret, hex. */
  readonly secret: string;
}

/** A loaded key and where it lives. */
export interface Identity {
  readonly name: string;
  readonly endpoint: string;
  readonly key: SigningKey;
  /** Its localStorage entry. */
  readonly slot: string;
  /** Made by this load (nothing was stored for this endpoint). */
  readonly fresh: boolean;
}

/** The localStorage entry of identity `name` at `endpoint`. */
export function identitySlot(name: string, endpoint: string): string {
  return `${KEY_PREFIX}${name}@${endpoint}`;
}

/** The stored key of `name` bound to `endpoint`, if there is a sound one. */
export function findIdentity(storage: Storage, name: string, endpoint: string): Identity | undefined {
  const slot = identitySlot(name, endpoint);
  const key = readRecord(storage.getItem(slot), endpoint);
  return key === undefined ? undefined : { name, endpoint, key, slot, fresh: false };
}

/**
 * The key of `name` bound to `endpoint`: the stored one, else (at the page's own broker,
 * `home`) an older unbound one, bound now, else a fresh one, stored first. A damaged entry,
 * or one that names another endpoint, is replaced: it never held a key for this endpoint.
 */
export function loadIdentity(storage: Storage, name: string, endpoint: string, home: string): Identity {
  const found = findIdentity(storage, name, endpoint);
  if (found !== undefined) return found;
  const slot = identitySlot(name, endpoint);
  const legacy = endpoint === home ? unboundKey(storage.getItem(KEY_PREFIX + name)) : undefined;
  if (legacy !== undefined) {
    storeKey(storage, slot, endpoint, legacy);
    storage.removeItem(KEY_PREFIX + name);
    return { name, endpoint, key: legacy, slot, fresh: false };
  }
  const key = SigningKey.generate();
  storeKey(storage, slot, endpoint, key);
  return { name, endpoint, key, slot, fresh: true };
}

/** Replaces the key of `name` at `endpoint` with `key` (an import). */
export function replaceIdentity(storage: Storage, name: string, endpoint: string, key: SigningKey): void {
  storeKey(storage, identitySlot(name, endpoint), endpoint, key);
}

/** The export file of `identity`: JSON with its endpoint, its address and its secret. */
export function exportIdentity(identity: Identity): string {
  const file = {
    format: EXPORT_FORMAT,
    version: RECORD_VERSION,
    endpoint: identity.endpoint,
    address: `0x${toHex(identity.key.address)}`,
    secret: toHex(identity.key.exportSecret()),
  };
  return `${JSON.stringify(file, null, 2)}\n`;
}

/** What an import gave: the key, and the endpoint its file named (if it was a file). */
export interface Imported {
  readonly key: SigningKey;
  readonly endpoint: string | undefined;
}

/** An export file, or a bare 32-byte secret in hex; an error message for anything else. */
export function parseImport(text: string): Imported | string {
  const trimmed = text.trim();
  if (SECRET_HEX.test(trimmed)) return keyOf(trimmed, undefined);
  let file: unknown;
  try {
    file = JSON.parse(trimmed);
  } catch {
    return "neither an exported key file nor 64 hex digits";
  }
  if (typeof file !== "object" || file === null) return "not an exported key file";
  const { format, secret, endpoint } = file as Record<string, unknown>;
  if (format !== EXPORT_FORMAT) return "not an exported key file";
  if (typeof secret !== "string" || !SECRET_HEX.test(secret)) return "the file's secret is not 64 hex digits";
  return keyOf(secret, typeof endpoint === "string" ? endpoint : undefined);
}

function keyOf(secret: string, endpoint: string | undefined): Imported | string {
  try {
    return { key: SigningKey.fromSecret(fromHex(secret, HASH_BYTES)), endpoint };
  } catch (error) {
    return `not a usable key: ${error instanceof Error ? error.message : String(error)}`;
  }
}

function storeKey(storage: Storage, slot: string, endpoint: string, key: SigningKey): void {
  const record: IdentityRecord = { version: RECORD_VERSION, endpoint, secret: toHex(key.exportSecret()) };
  storage.setItem(slot, JSON.stringify(record));
}

function readRecord(stored: string | null, endpoint: string): SigningKey | undefined {
  if (stored === null) return undefined;
  let record: unknown;
  try {
    record = JSON.parse(stored);
  } catch {
    return undefined;
  }
  if (typeof record !== "object" || record === null) return undefined;
  const { version, endpoint: boundTo, secret } = record as Record<string, unknown>;
  if (version !== RECORD_VERSION || boundTo !== endpoint || typeof secret !== "string") return undefined;
  return unboundKey(secret);
}

function unboundKey(secret: string | null): SigningKey | undefined {
  if (secret === null || !SECRET_HEX.test(secret)) return undefined;
  const imported = keyOf(secret, undefined);
  return typeof imported === "string" ? undefined : imported.key;
}
