/**
 * The jam views: a closed, explicit FEED_TOPIC cohort (no audience, R9) on the room's
 * topic. With `role=admin` this page is the admin: it grants seats by publishing a ROSTER
 * that names them and revokes one by publishing a roster without it (R23, R24), and shows
 * what the seats play. Otherwise it is a seat: a silent stream that the library lets claim
 * and publish only once a verified roster names it, and stops at the roster that drops it.
 *
 * Owns: `runJam`, the admin's roster (kept in localStorage under
 * `bps-demo/roster/<topic>`, so a reload re-publishes the same set) and the seat's
 * "insist" switch: a seat that keeps sending after its revocation, written straight to its
 * stream past the library, so a person (and the end-to-end test) can watch the broker drop
 * those frames (R24) and the admin page never show them.
 *
 * Never: lets the library publish for a revoked seat; only "insist" does, and says so.
 */

import {
  ADDRESS_BYTES,
  Kind,
  type Link,
  TopicBinding,
  type Transport,
  fromHex,
  makeSpec,
  signBroadcast,
  toHex,
  utf8,
} from "../../src/index.js";
import { ConfigError, type DemoConfig, linkTo } from "./config.js";
import { element } from "./dom.js";
import { addressText } from "./feed.js";
import { type View, composeData, showEnd, viewPublisher, viewTransport } from "./view.js";

const ROSTER_PREFIX = "bps-demo/roster/";

/** Runs the admin's or a seat's side of the jam in `config.room` until the page closes. */
export function runJam(view: View): void {
  if (view.config.asAdmin) return runAdmin(view);
  if (view.config.admin === undefined) throw new ConfigError("a seat needs ?admin=0x… (or role=admin to host)");
  runSeat(view, view.config.admin);
}

function specOf(config: DemoConfig, admin: Uint8Array) {
  return makeSpec({ topic: config.topic, binding: TopicBinding.FEED_TOPIC, admin, closed: true });
}

function runAdmin(view: View): void {
  const { shell, config, key, storage } = view;
  const seatLink = linkTo(location.href, { view: "jam", room: config.room, admin: addressText(key.address) });
  shell.link("seats join at", seatLink, "seat-link");
  const publisher = viewPublisher(view, specOf(config, key.address));
  const rosterSlot = ROSTER_PREFIX + toHex(config.topic);
  const seats = new RosterList(storage.getItem(rosterSlot), (members) => {
    storage.setItem(rosterSlot, members.join(","));
    publisher
      .publishRoster(members.map((member) => fromHex(member, ADDRESS_BYTES)))
      .catch((error: unknown) => shell.feed.note(`roster not sent: ${String(error)}`));
  });
  shell.controls(seats.root);
  composeData(view, "play something", publisher);
  if (seats.members.length > 0) seats.publish();
  showEnd(view, publisher);
}

/** The admin's seat list: a grant box and a revoke button per seat. */
class RosterList {
  readonly root: HTMLElement;
  members: string[];
  readonly #list: HTMLUListElement;
  readonly #publish: (members: string[]) => void;

  constructor(stored: string | null, publish: (members: string[]) => void) {
    this.members = (stored ?? "").split(",").filter((member) => /^[0-9a-f]{40}$/.test(member));
    this.#publish = publish;
    this.#list = element("ul", { "data-testid": "roster" });
    const input = element("input", { type: "text", placeholder: "0x… address of a seat", "data-testid": "grant-address" });
    const grant = element("button", { type: "submit", "data-testid": "grant" }, "grant a seat");
    const form = element("form", { class: "grant" }, input, grant);
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      let address: string;
      try {
        address = toHex(fromHex(input.value.trim(), ADDRESS_BYTES));
      } catch (error) {
        input.setCustomValidity(String(error));
        input.reportValidity();
        return;
      }
      input.value = "";
      if (!this.members.includes(address)) this.members = [...this.members, address];
      this.publish();
    });
    this.root = element("div", { class: "seats" }, form, this.#list);
    this.#render();
  }

  /** Publishes the current set as the next ROSTER. */
  publish(): void {
    this.#render();
    this.#publish(this.members);
  }

  #render(): void {
    this.#list.replaceChildren(
      ...this.members.map((member) => {
        const revoke = element("button", { type: "button", "data-testid": "revoke", "data-address": `0x${member}` }, "revoke");
        revoke.addEventListener("click", () => {
          this.members = this.members.filter((other) => other !== member);
          this.publish();
        });
        return element("li", { "data-testid": "seat" }, element("code", {}, `0x${member}`), " ", revoke);
      }),
    );
  }
}

function runSeat(view: View, admin: Uint8Array): void {
  const { shell, config, key } = view;
  const spec = specOf(config, admin);
  const stream = new CurrentLink(viewTransport(view));
  let challenge: Uint8Array | undefined;
  const publisher = viewPublisher(view, spec, {
    transport: stream.transport,
    onEvent: (event) => {
      if (event.type === "joined") challenge = event.challenge;
      if (event.type === "reset") challenge = undefined;
    },
  });
  const insist = element("input", { type: "checkbox", "data-testid": "insist" });
  shell.controls(
    element("p", {}, "ask the host to grant your address above"),
    element("label", { class: "insist" }, insist, " insist: keep sending after a revocation (to watch the broker refuse it)"),
  );
  shell.compose("play something", (text) => {
    const payload = utf8(text);
    const role = publisher.role;
    void publisher.publish(payload).then(
      (index) => {
        if (role === "revoked" && insist.checked && challenge !== undefined && stream.link !== undefined) {
          // Past the library: sign under this stream's challenge and write it anyway.
          stream.link.send(signBroadcast(key, Kind.DATA, spec.topic, challenge, index, payload).frame);
          shell.feed.insisted(index, payload);
        } else if (role !== "publisher") {
          shell.feed.note(`#${index} waits: no roster names you (${role ?? "not connected"})`);
        }
      },
      (error: unknown) => shell.feed.note(`not sent: ${String(error)}`),
    );
  });
  showEnd(view, publisher);
}

/** A transport that remembers the link of the current stream (for "insist"). */
class CurrentLink {
  readonly transport: Transport;
  link: Link | undefined;

  constructor(inner: Transport) {
    this.transport = {
      open: async (handlers) => {
        let current: Link | undefined;
        const opened = await inner.open({
          message: (data) => handlers.message(data),
          closed: (fault) => {
            if (this.link === current) this.link = undefined;
            handlers.closed(fault);
          },
        });
        current = opened;
        this.link = opened;
        return {
          send: (message) => opened.send(message),
          close: () => {
            if (this.link === opened) this.link = undefined;
            opened.close();
          },
          get bufferedBytes() {
            return opened.bufferedBytes;
          },
        };
      },
    };
  }
}
