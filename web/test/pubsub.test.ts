/**
 * Publisher and Subscriber driven against each other over the in-memory transport, through
 * the scripted `Relay` (relay.ts), which forwards bytes and judges nothing: no broker is
 * faked, every verdict is the library's own.
 */

import { describe, expect, it, vi } from "vitest";

import {
  Backoff,
  type DataVerdict,
  Kind,
  MemoryStore,
  type Outgoing,
  Publisher,
  type PublisherEvent,
  Status,
  Subscriber,
  type SubscriberEvent,
  TopicBinding,
  feedId,
  localStorageStore,
  socAddress,
  toHex,
  utf8,
} from "../src/index.js";
import { TOPIC, key, spec } from "./fixtures.js";
import { Relay, instantSleep } from "./relay.js";

const admin = key(1);
const member = key(2);
const other = key(3);

interface Recorded<E> {
  readonly events: E[];
  readonly onEvent: (event: E) => void;
}

function recorder<E>(): Recorded<E> {
  const events: E[] = [];
  return { events, onEvent: (event) => events.push(event) };
}

const sent = (events: PublisherEvent[]): Outgoing[] => events.flatMap((event) => (event.type === "sent" ? [event.outgoing] : []));
const deliveries = (events: SubscriberEvent[]): DataVerdict[] => events.flatMap((event) => (event.type === "data" ? [event] : []));
/** A verdict's next update, its address as hex. */
const nextOf = (verdict: DataVerdict) => verdict.next && { index: verdict.next.index, address: toHex(verdict.next.address) };
/** Where a written frame is, in the shape of `nextOf`. */
const whereItIs = (outgoing: Outgoing) => ({ index: outgoing.index, address: toHex(outgoing.address) });
const payloads = (events: SubscriberEvent[]) => deliveries(events).map((verdict) => new TextDecoder().decode(verdict.payload));

function publisher(relay: Relay, options: Partial<ConstructorParameters<typeof Publisher>[0]> & { key: ReturnType<typeof key> }) {
  const record = recorder<PublisherEvent>();
  const instance = new Publisher({
    transport: relay.transport,
    spec: options.spec ?? spec(admin, TopicBinding.FEED_TOPIC),
    firstIndex: () => 100n,
    sleep: instantSleep(),
    onEvent: record.onEvent,
    ...options,
  });
  return { instance, events: record.events, running: instance.run() };
}

function subscriber(relay: Relay, options: Partial<ConstructorParameters<typeof Subscriber>[0]> = {}) {
  const record = recorder<SubscriberEvent>();
  const instance = new Subscriber({
    transport: relay.transport,
    spec: options.spec ?? spec(admin, TopicBinding.FEED_TOPIC),
    sleep: instantSleep(),
    onEvent: record.onEvent,
    ...options,
  });
  return { instance, events: record.events, running: instance.run() };
}

describe("live-stream: the admin publishes, a spectator verifies", () => {
  it("claims, publishes under the challenge, and the next address is the next chunk's", async () => {
    const relay = new Relay();
    const viewer = subscriber(relay);
    await vi.waitFor(() => expect(relay.streams.length).toBe(1));
    const source = publisher(relay, { key: admin });
    for (const text of ["one", "two", "three"]) expect(await source.instance.publish(utf8(text))).toBeGreaterThanOrEqual(100n);
    expect(await source.instance.drained()).toBe(true);
    await vi.waitFor(() => expect(payloads(viewer.events)).toEqual(["one", "two", "three"]));
    const stream = relay.of(admin.address)[0]!;
    expect(Relay.kinds(stream)).toEqual([Kind.AUTH, Kind.DATA, Kind.DATA, Kind.DATA]);
    // The relay forwards the claim too; a broker never would, and the subscriber drops it.
    expect(viewer.events.some((event) => event.type === "dropped" && event.reason.code === "auth-delivered")).toBe(true);
    const outgoing = sent(source.events).filter((frame) => frame.kind === Kind.DATA);
    const received = deliveries(viewer.events);
    expect(received.map((verdict) => verdict.index)).toEqual([100n, 101n, 102n]);
    expect(received.slice(0, 2).map((verdict) => nextOf(verdict))).toEqual(outgoing.slice(1).map(whereItIs));
    expect(outgoing.every((frame) => toHex(frame.signed.broadcast.challenge) === toHex(stream.challenge))).toBe(true);
    source.instance.stop();
    viewer.instance.stop();
    expect(await source.running).toEqual({ code: "stopped" });
    expect(await viewer.running).toEqual({ code: "stopped" });
  });

  it("after a reset, backs off, re-joins, re-signs what was not written and continues the sequence", async () => {
    const relay = new Relay();
    const viewer = subscriber(relay);
    await vi.waitFor(() => expect(relay.streams.length).toBe(1));
    const delays: number[] = [];
    const source = publisher(relay, { key: admin, sleep: instantSleep(delays), backoff: new Backoff(() => 0) });
    await source.instance.publish(utf8("before"));
    await source.instance.drained();
    relay.of(admin.address)[0]!.peer.close(1011, "reset");
    const queued = source.instance.publish(utf8("during"));
    await vi.waitFor(() => expect(relay.of(admin.address).length).toBe(2));
    expect(await queued).toBe(101n);
    await source.instance.publish(utf8("after"));
    await vi.waitFor(() => expect(payloads(viewer.events)).toEqual(["before", "during", "after"]));
    expect(delays).toEqual([1000]);
    expect(source.events.find((event) => event.type === "reset")).toMatchObject({ retryInMs: 1000, fault: { code: "transport" } });
    const second = relay.of(admin.address)[1]!;
    expect(Relay.kinds(second)).toEqual([Kind.AUTH, Kind.DATA, Kind.DATA]);
    expect(deliveries(viewer.events).map((verdict) => verdict.index)).toEqual([100n, 101n, 102n]);
    source.instance.stop();
    viewer.instance.stop();
    await Promise.all([source.running, viewer.running]);
  });

  it("a new publisher on the same store continues the index sequence; the subscriber's store keeps its cursors", async () => {
    const relay = new Relay();
    const publisherStore = new MemoryStore();
    const subscriberStore = new MemoryStore();
    const first = publisher(relay, { key: admin, store: publisherStore });
    await first.instance.publish(utf8("a"));
    await first.instance.drained();
    first.instance.stop();
    await first.running;
    const second = publisher(relay, { key: admin, store: publisherStore, firstIndex: () => 0n });
    expect(await second.instance.publish(utf8("b"))).toBe(101n);
    await second.instance.drained();

    const viewer = subscriber(relay, { store: subscriberStore });
    await vi.waitFor(() => expect(relay.streams.length).toBe(3));
    await second.instance.publish(utf8("c"));
    await vi.waitFor(() => expect(payloads(viewer.events)).toEqual(["c"]));
    viewer.instance.stop();
    await viewer.running;
    expect(JSON.parse(subscriberStore.get(viewer.instance.stateKey)!)).toMatchObject({ cursors: [[toHex(admin.address), "103"]] });

    // A later subscriber on that store drops the replay of "c" as a retransmit.
    const later = subscriber(relay, { store: subscriberStore });
    await vi.waitFor(() => expect(relay.streams.length).toBe(4));
    const replay = relay.of(admin.address)[1]!.frames.at(-1)!;
    relay.streams.at(-1)!.peer.send(replay);
    await vi.waitFor(() => expect(later.events.some((event) => event.type === "dropped" && event.reason.code === "retransmit")).toBe(true));
    second.instance.stop();
    later.instance.stop();
    await Promise.all([second.running, later.running]);
  });
});

describe("spectator-jam: a rostered member", () => {
  it("waits for the roster, claims, publishes; is regranted by the re-sent roster on a new stream; stops when revoked", async () => {
    const relay = new Relay();
    relay.replayRoster = true;
    const viewer = subscriber(relay);
    const seat = publisher(relay, { key: member });
    await vi.waitFor(() => expect(relay.streams.length).toBe(2));
    await seat.instance.publish(utf8("hello"));
    expect(seat.instance.role).toBe("awaiting-roster");
    expect(relay.of(member.address)[0]!.frames, "R23: nothing before a roster names it").toEqual([]);

    const chair = publisher(relay, { key: admin });
    await chair.instance.publishRoster([member.address]);
    await vi.waitFor(() => expect(payloads(viewer.events)).toEqual(["hello"]));
    const roles = () => seat.events.flatMap((event) => (event.type === "role" || event.type === "joined" ? [event.role] : []));
    expect(roles()).toEqual(["awaiting-roster", "pending", "publisher"]);
    expect(Relay.kinds(relay.of(member.address)[0]!)).toEqual([Kind.AUTH, Kind.DATA]);

    // The member's stream is reset; on the new one the roster in force comes again (R22).
    relay.of(member.address)[0]!.peer.close(1011, "reset");
    await vi.waitFor(() => expect(relay.of(member.address).length).toBe(2));
    await seat.instance.publish(utf8("again"));
    await vi.waitFor(() => expect(payloads(viewer.events)).toEqual(["hello", "again"]));
    expect(roles()).toEqual(["awaiting-roster", "pending", "publisher", "awaiting-roster", "pending", "publisher"]);

    // Revocation: the member's role ends, it sends nothing more, and the viewer no longer admits it.
    await chair.instance.publishRoster([]);
    await vi.waitFor(() => expect(seat.instance.role).toBe("revoked"));
    expect(roles().at(-1)).toBe("revoked");
    await seat.instance.publish(utf8("late"));
    expect(Relay.kinds(relay.of(member.address)[1]!)).toEqual([Kind.AUTH, Kind.DATA]);
    await vi.waitFor(() => expect(viewer.instance.admission.admits(member.address)).toBe(false));
    for (const instance of [seat.instance, chair.instance, viewer.instance]) instance.stop();
    await Promise.all([seat.running, chair.running, viewer.running]);
  });
});

describe("jam and EOS", () => {
  it("a closed cohort's seats hear each other; the admin's EOS ends every run", async () => {
    const jam = spec(admin, TopicBinding.FEED_TOPIC, { closed: true });
    const relay = new Relay();
    const chair = publisher(relay, { key: admin, spec: jam });
    await chair.instance.publishRoster([member.address]);
    await chair.instance.drained();
    const seat = publisher(relay, { key: member, spec: jam });
    await vi.waitFor(() => expect(seat.instance.role).toBe("awaiting-roster"));
    await chair.instance.publishRoster([member.address]);
    await seat.instance.publish(utf8("riff"));
    await vi.waitFor(() => expect(chair.events.some((event) => event.type === "received" && event.verdict.type === "data")).toBe(true));
    await chair.instance.endOfStream();
    expect(await chair.running).toEqual({ code: "eos-sent" });
    expect(await seat.running).toEqual({ code: "eos-received" });
  });
});

describe("group-chat (ALL)", () => {
  it("every participant publishes from the Join and verifies the others on its own stream", async () => {
    const chat = spec(admin, TopicBinding.MNEMONIC, { all: true });
    const relay = new Relay();
    const alice = publisher(relay, { key: member, spec: chat });
    const bob = publisher(relay, { key: other, spec: chat });
    await vi.waitFor(() => expect(relay.streams.length).toBe(2));
    await alice.instance.publish(utf8("hi bob"));
    await bob.instance.publish(utf8("hi alice"));
    const heard = (events: PublisherEvent[]) =>
      events.flatMap((event) => (event.type === "received" && event.verdict.type === "data" ? [toHex(event.verdict.owner)] : []));
    await vi.waitFor(() => {
      expect(heard(alice.events)).toEqual([toHex(other.address)]);
      expect(heard(bob.events)).toEqual([toHex(member.address)]);
    });
    expect(Relay.kinds(relay.of(member.address)[0]!), "no claim under ALL").toEqual([Kind.DATA]);
    alice.instance.stop();
    bob.instance.stop();
    await Promise.all([alice.running, bob.running]);
  });
});

describe("implicit FEED_TOPIC", () => {
  it("publishes feed updates with the index in the frame; the next address is the next update's", async () => {
    const feed = spec(undefined, TopicBinding.FEED_TOPIC);
    const relay = new Relay();
    const viewer = subscriber(relay, { spec: feed });
    await vi.waitFor(() => expect(relay.streams.length).toBe(1));
    const writer = publisher(relay, { key: member, spec: feed });
    await writer.instance.publish(utf8("u0"));
    await writer.instance.publish(utf8("u1"));
    await vi.waitFor(() => expect(payloads(viewer.events)).toEqual(["u0", "u1"]));
    const [first, second] = deliveries(viewer.events);
    expect([first!.index, second!.index]).toEqual([100n, 101n]);
    expect(nextOf(first!)).toEqual({ index: 101n, address: toHex(socAddress(feedId(TOPIC, 101n), member.address)) });
    expect(nextOf(first!)).toEqual(whereItIs(sent(writer.events)[1]!));
    writer.instance.stop();
    viewer.instance.stop();
    await Promise.all([writer.running, viewer.running]);
  });
});

describe("stores", () => {
  it("a corrupt subscriber snapshot is reported and the state starts empty; localStorage-like storage works", async () => {
    const items = new Map<string, string>();
    const store = localStorageStore({ getItem: (key) => items.get(key) ?? null, setItem: (key, value) => void items.set(key, value) });
    const relay = new Relay();
    const probe = new Subscriber({ transport: relay.transport, spec: spec(admin, TopicBinding.FEED_TOPIC), store });
    items.set(probe.stateKey, "{not json");
    const viewer = subscriber(relay, { store });
    await vi.waitFor(() => expect(relay.streams.length).toBe(1));
    expect(viewer.events[0]).toMatchObject({ type: "store-fault" });
    const source = publisher(relay, { key: admin });
    await source.instance.publish(utf8("x"));
    await vi.waitFor(() => expect(payloads(viewer.events)).toEqual(["x"]));
    viewer.instance.stop();
    source.instance.stop();
    await Promise.all([viewer.running, source.running]);
    expect(JSON.parse(items.get(probe.stateKey)!)).toMatchObject({ version: 1, cursors: [[toHex(admin.address), "101"]] });
  });
});

describe("refusals (R5, R38)", () => {
  it("FULL is retried after a backoff; REJECTED ends the run with a typed end", async () => {
    const relay = new Relay();
    relay.statuses.push(Status.FULL, Status.FULL);
    const delays: number[] = [];
    const viewer = subscriber(relay, { sleep: instantSleep(delays) });
    await vi.waitFor(() => expect(relay.streams.length).toBe(1));
    expect(viewer.events.filter((event) => event.type === "refused").length).toBe(2);
    expect(delays.length).toBe(2);
    expect(delays[0]).toBeLessThanOrEqual(2000);
    expect(delays[1]).toBeLessThanOrEqual(4000);
    const addrs = new Set(relay.streams.map((stream) => stream.addr));
    viewer.instance.stop();
    await viewer.running;
    expect(addrs.size).toBe(1);

    relay.statuses.push(Status.REJECTED);
    const history = subscriber(relay, { spec: spec(admin, TopicBinding.FEED_TOPIC, { history: true }) });
    expect(await history.running).toEqual({ code: "rejected", historyRequested: true });
    relay.statuses.push(Status.REJECTED);
    const rejected = publisher(relay, { key: admin });
    expect(await rejected.running).toEqual({ code: "rejected" });
  });

  it("a spectator joins with fresh random addr per stream; the Join carries the spec with history", async () => {
    const relay = new Relay();
    const cohort = spec(admin, TopicBinding.FEED_TOPIC, { history: true });
    const viewer = subscriber(relay, { spec: cohort });
    await vi.waitFor(() => expect(relay.streams.length).toBe(1));
    relay.streams[0]!.peer.close(1011, "reset");
    await vi.waitFor(() => expect(relay.streams.length).toBe(2));
    expect(relay.streams[0]!.addr).not.toBe(relay.streams[1]!.addr);
    expect(relay.streams[1]!.join.cohort?.history).toBe(true);
    viewer.instance.stop();
    await viewer.running;
  });
});
