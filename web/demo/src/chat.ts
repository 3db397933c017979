/**
 * The group chat view: a cohort `ALL` + MNEMONIC on the room's topic, named by an admin
 * address (this page's own when the URL names none; the invite link carries it, so
 * everyone who follows it joins the same cohort, R1). Under ALL every member's stream is a
 * publisher from the Join (R10) and receives everyone else's messages (R25); each is shown
 * with the author the library recovered from its signature.
 *
 * Owns: `runChat`. Never: shows a message the library did not verify.
 */

import { TopicBinding, makeSpec } from "../../src/index.js";
import { linkTo } from "./config.js";
import { addressText } from "./feed.js";
import { type View, composeData, showEnd, viewPublisher } from "./view.js";

/** Joins the chat of `config.room` as the page's key and runs until the page closes. */
export function runChat(view: View): void {
  const { shell, config } = view;
  const admin = config.admin ?? view.key.address;
  const spec = makeSpec({ topic: config.topic, binding: TopicBinding.MNEMONIC, admin, all: true });
  shell.link("invite", linkTo(location.href, { view: "chat", room: config.room, admin: addressText(admin) }), "invite-link");
  const publisher = viewPublisher(view, spec);
  composeData(view, "say something", publisher);
  showEnd(view, publisher);
}
