/**
 * The group chat view: a cohort `ALL` + MNEMONIC on the room's topic, named by an admin
 * address (this page's own when the URL names none; the invite link carries it, so
 * everyone who follows it joins the same cohort, R1). Under ALL every member's stream is a
 * publisher from the Join (R10) and receives everyone else's messages (R25); each is shown
 * with the author the library recovered from its signature.
 *
 * Owns: `runChat`. Never: shows a message the library did not verify.
 */

import { Publisher, type SigningKey, TopicBinding, localStorageStore, makeSpec, utf8, webSocketTransport } from "../../src/index.js";
import { type DemoConfig, linkTo } from "./config.js";
import { addressText } from "./feed.js";
import { showPublisherEvent } from "./publisherLog.js";
import type { Shell } from "./shell.js";
import type { WorkerVerifier } from "./verifier.js";

/** Joins the chat of `config.room` as `key` and runs until the page closes. */
export function runChat(shell: Shell, config: DemoConfig, key: SigningKey, storage: Storage, verifier: WorkerVerifier): void {
  const admin = config.admin ?? key.address;
  const spec = makeSpec({ topic: config.topic, binding: TopicBinding.MNEMONIC, admin, all: true });
  shell.link("invite", linkTo(location.href, { view: "chat", room: config.room, admin: addressText(admin) }), "invite-link");
  const publisher = new Publisher({
    transport: verifier.transport(webSocketTransport(config.endpoint)),
    admission: verifier.admission,
    spec,
    key,
    store: localStorageStore(storage),
    onEvent: (event) => showPublisherEvent(shell, event),
  });
  shell.compose("say something", (text) => {
    publisher.publish(utf8(text)).catch((error: unknown) => shell.feed.note(`not sent: ${String(error)}`));
  });
  void publisher.run().then((end) => shell.fatal(`ended: ${end.code}`));
}
