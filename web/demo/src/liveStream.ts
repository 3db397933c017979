/**
 * The live-stream views: an explicit FEED_TOPIC cohort on the room's topic with an admin.
 * With `role=admin` this page is the admin and broadcasts (its stream claims with AUTH,
 * then publishes DATA, R7); otherwise it is a viewer, a spectator stream (R8) whose
 * `Subscriber` verifies every frame end to end and shows it with its index and author.
 *
 * Owns: `runLiveStream`. Never: shows a frame the library did not verify.
 */

import {
  Publisher,
  type SigningKey,
  Status,
  Subscriber,
  TopicBinding,
  describeSessionFault,
  localStorageStore,
  makeSpec,
  utf8,
  webSocketTransport,
} from "../../src/index.js";
import { ConfigError, type DemoConfig, linkTo } from "./config.js";
import { element } from "./dom.js";
import { addressText } from "./feed.js";
import { showPublisherEvent } from "./publisherLog.js";
import type { Shell } from "./shell.js";
import type { WorkerVerifier } from "./verifier.js";
import { showVerdict } from "./verdicts.js";

/** Broadcasts (as admin) or watches the stream of `config.room` until the page closes. */
export function runLiveStream(shell: Shell, config: DemoConfig, key: SigningKey, storage: Storage, verifier: WorkerVerifier): void {
  if (config.asAdmin) return broadcast(shell, config, key, storage, verifier);
  if (config.admin === undefined) throw new ConfigError("a viewer needs ?admin=0x… (or role=admin to broadcast)");
  watch(shell, config, config.admin, storage, verifier);
}

function specOf(config: DemoConfig, admin: Uint8Array) {
  return makeSpec({ topic: config.topic, binding: TopicBinding.FEED_TOPIC, admin });
}

function broadcast(shell: Shell, config: DemoConfig, key: SigningKey, storage: Storage, verifier: WorkerVerifier): void {
  const viewer = linkTo(location.href, { view: "live", room: config.room, admin: addressText(key.address) });
  shell.link("viewers watch at", viewer, "viewer-link");
  const publisher = new Publisher({
    transport: verifier.transport(webSocketTransport(config.endpoint)),
    admission: verifier.admission,
    spec: specOf(config, key.address),
    key,
    store: localStorageStore(storage),
    onEvent: (event) => showPublisherEvent(shell, event),
  });
  shell.compose("a frame for your viewers", (text) => {
    publisher.publish(utf8(text)).catch((error: unknown) => shell.feed.note(`not sent: ${String(error)}`));
  });
  const end = element("button", { type: "button", "data-testid": "end-stream" }, "end the stream");
  end.addEventListener("click", () => void publisher.endOfStream());
  shell.controls(end);
  void publisher.run().then((ended) => shell.fatal(`ended: ${ended.code}`));
}

function watch(shell: Shell, config: DemoConfig, admin: Uint8Array, storage: Storage, verifier: WorkerVerifier): void {
  const subscriber = new Subscriber({
    transport: verifier.transport(webSocketTransport(config.endpoint)),
    admission: verifier.admission,
    spec: specOf(config, admin),
    store: localStorageStore(storage),
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
  void subscriber.run().then((end) => shell.fatal(`ended: ${end.code}`));
}
