/**
 * The demo page's configuration, read from the URL's query parameters once at load.
 *
 * Owns: `DemoConfig`, `readConfig` and the parameter names: `view` (chat, live, jam),
 * `room` (64 hex digits are the topic itself; any other text is hashed with keccak256, as
 * the bridge's string topics are, docs/PROTOCOL.md W10), `admin` (the cohort admin's 20-byte
 * address), `role=admin` (this page's own key is the admin), `identity` (which of the
 * browser's stored keys this tab uses, so two tabs can be two people) and `ws` (another
 * native endpoint than the page's own origin's `/bps/v1`, its `home` endpoint; a `ws:` or
 * `wss:` URL, written back normalised, since a key is bound to the endpoint's exact text).
 *
 * Never: touches a key (`identity.ts`) or the network.
 */

import { ADDRESS_BYTES, HASH_BYTES, NATIVE_PATH, fromHex, keccak256, utf8 } from "../../src/index.js";

/** The three views of the demo. */
export type ViewName = "chat" | "live" | "jam";

/** What the URL asked for. */
export interface DemoConfig {
  readonly view: ViewName;
  /** The room's name as typed (shown, and kept in links). */
  readonly room: string;
  /** The cohort topic: the room's 32 bytes. */
  readonly topic: Uint8Array;
  /** The admin named in the URL, if any. */
  readonly admin: Uint8Array | undefined;
  /** `role=admin`: this page's key is the admin of the live stream or jam. */
  readonly asAdmin: boolean;
  /** The name of this tab's key slot in localStorage. */
  readonly identity: string;
  /** The native WebSocket endpoint this page connects to. */
  readonly endpoint: string;
  /** The endpoint of the broker that served this page (its origin's `/bps/v1`). */
  readonly home: string;
}

/** A query that does not make a configuration; the page shows the message. */
export class ConfigError extends Error {}

const DEFAULT_ROOMS: Record<ViewName, string> = { chat: "lobby", live: "show", jam: "jam" };
const TOPIC_HEX = /^(0x)?[0-9a-fA-F]{64}$/;
const IDENTITY = /^[A-Za-z0-9_-]{1,32}$/;

/** The configuration in `search` (e.g. `location.search`) for a page at `location`. */
export function readConfig(search: string, location: { protocol: string; host: string }): DemoConfig {
  const query = new URLSearchParams(search);
  const view = viewOf(query.get("view") ?? "chat");
  const room = query.get("room") ?? DEFAULT_ROOMS[view];
  if (room === "") throw new ConfigError("room is empty");
  const identity = query.get("identity") ?? "default";
  if (!IDENTITY.test(identity)) throw new ConfigError("identity: 1 to 32 letters, digits, - or _");
  const home = `${location.protocol === "https:" ? "wss" : "ws"}://${location.host}${NATIVE_PATH}`;
  return {
    view,
    room,
    topic: topicOf(room),
    admin: adminOf(query.get("admin")),
    asAdmin: query.get("role") === "admin",
    identity,
    endpoint: endpointOf(query.get("ws") ?? home),
    home: endpointOf(home),
  };
}

/** A WebSocket endpoint in its normal form (lower-case host, default port dropped). */
export function endpointOf(value: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new ConfigError(`ws: "${value}" is not a URL`);
  }
  if (url.protocol !== "ws:" && url.protocol !== "wss:") throw new ConfigError(`ws: "${value}" is not a ws: or wss: URL`);
  if (url.username !== "" || url.password !== "") throw new ConfigError("ws: a URL with a user name or password");
  url.hash = "";
  return url.href;
}

/** A room's topic: 64 hex digits as they are, any other text keccak256(UTF-8). */
export function topicOf(room: string): Uint8Array {
  return TOPIC_HEX.test(room) ? fromHex(room, HASH_BYTES) : keccak256(utf8(room));
}

function viewOf(name: string): ViewName {
  if (name === "chat" || name === "live" || name === "jam") return name;
  throw new ConfigError(`view "${name}": expected chat, live or jam`);
}

function adminOf(value: string | null): Uint8Array | undefined {
  if (value === null || value === "") return undefined;
  try {
    return fromHex(value, ADDRESS_BYTES);
  } catch (error) {
    throw new ConfigError(`admin: ${error instanceof Error ? error.message : String(error)}`);
  }
}

/** A link to `view` of the same page with `params` (the room, the admin) filled in. */
export function linkTo(base: string, params: Record<string, string>): string {
  const url = new URL(base);
  url.search = new URLSearchParams(params).toString();
  return url.toString();
}
