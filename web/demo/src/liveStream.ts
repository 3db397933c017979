/**
 * The live-stream views: an explicit FEED_TOPIC cohort on the room's topic with an admin.
 * With `role=admin` this page is the admin and broadcasts (its stream claims with AUTH,
 * then publishes DATA, R7); otherwise it is a viewer, a spectator stream (R8) whose
 * `Subscriber` verifies every frame end to end and shows it with its index and author.
 *
 * Owns: `runLiveStream`. Never: shows a frame the library did not verify.
 */

import { Status, Subscriber, TopicBinding, describeSessionFault, localStorageStore, makeSpec } from "../../src/index.js";
import { ConfigError, type DemoConfig, linkTo } from "./config.js";
import { element } from "./dom.js";
import { addressText } from "./feed.js";
import { showVerdict } from "./verdicts.js";
import { type View, composeData, showEnd, viewPublisher, viewTransport } from "./view.js";

/** Broadcasts (as admin) or watches the stream of `config.room` until the page closes. */
export function runLiveStream(view: View): void {
  if (view.config.asAdmin) return broadcast(view);
  if (view.config.admin === undefined) throw new ConfigError("a viewer needs ?admin=0x… (or role=admin to broadcast)");
  watch(view, view.config.admin);
}

function specOf(config: DemoConfig, admin: Uint8Array) {
  return makeSpec({ topic: config.topic, binding: TopicBinding.FEED_TOPIC, admin });
}

function broadcast(view: View): void {
  const { shell, config, key } = view;
  const viewer = linkTo(location.href, { view: "live", room: config.room, admin: addressText(key.address) });
  shell.link("viewers watch at", viewer, "viewer-link");
  const publisher = viewPublisher(view, specOf(config, key.address));
  composeData(view, "a frame for your viewers", publisher);
  const end = element("button", { type: "button", "data-testid": "end-stream" }, "end the stream");
  end.addEventListener("click", () => void publisher.endOfStream());
  shell.controls(end);
  showEnd(view, publisher);
}

function watch(view: View, admin: Uint8Array): void {
  const { shell, config } = view;
  const subscriber = new Subscriber({
    transport: viewTransport(view),
    admission: view.verifier.admission,
    spec: specOf(config, admin),
    store: localStorageStore(view.storage),
    onEvent: (event) => {
      switch (event.type) {
        case "joined":
          return shell.status("watching");
        case "refused":
          return shell.status(`refused (${Status[event.status]})`);
        case "reset":
          return shell.status(`reset: ${describeSessionFault(event.fault)}`);
        case "store-fault":
          return shell.feed.note(event.detail);
        default:
          return showVerdict(shell.feed, event);
      }
    },
  });
  shell.role(`viewer of ${addressText(admin)}`);
  showEnd(view, subscriber);
}
