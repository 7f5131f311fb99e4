import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import {
  AuthenticationError,
  ConflictError,
  InvalidRequestError,
  NotFoundError,
  RateLimitError,
  Relay,
  type Verification,
} from "@relay-otp/client";
import { freshNumber, recordingFetch, type Exchange } from "./support/recording.js";
import { startRelay, testIdentity, type Served } from "./support/server.js";

let served: Served;
let relay: Relay;
const exchanges: Exchange[] = [];

before(async () => {
  served = await startRelay(testIdentity());
  relay = new Relay({ apiKey: served.apiKey, baseUrl: served.baseUrl, fetch: recordingFetch(exchanges) });
});

after(async () => {
  await served?.stop();
});

describe("verifications", () => {
  it("are created pending and approved by the test code", async () => {
    const to = freshNumber();
    const created = await relay.verifications.create({ to, metadata: { user: "42" } });
    assert.equal(created.object, "verification");
    assert.equal(created.status, "pending");
    assert.equal(created.to, to);
    assert.equal(created.channel, "sms");
    assert.equal(created.livemode, false);
    assert.deepEqual(created.metadata, { user: "42" });

    const checked = await relay.verifications.check({ id: created.id, code: "000000" });
    assert.equal(checked.status, "approved");
    assert.equal(checked.verified, true);
  });

  it("go by email, checked by the address", async () => {
    const to = `ada.${process.pid}@example.com`;
    const created = await relay.verifications.create({ to, channel: "email" });
    assert.equal(created.channel, "email");
    assert.equal(created.country, null);
    assert.equal((await relay.verifications.check({ to, code: "000000" })).status, "approved");
  });

  it("count a wrong code against the remaining checks", async () => {
    const created = await relay.verifications.create({ to: freshNumber() });
    const checked = await relay.verifications.check({ to: created.to, code: "999999" });
    assert.equal(checked.status, "pending");
    assert.equal(checked.remaining_checks, created.remaining_checks - 1);
  });

  it("refuse a check of an approved verification with a ConflictError", async () => {
    const created = await relay.verifications.create({ to: freshNumber() });
    await relay.verifications.check({ id: created.id, code: "000000" });
    const refusal = await rejection(relay.verifications.check({ id: created.id, code: "000000" }));
    assert.ok(refusal instanceof ConflictError);
    assert.equal(refusal.code, "verification_approved");
    assert.equal(refusal.httpStatus, 409);
    assert.match(refusal.requestId ?? "", /^req_/);
    assert.ok(refusal.docUrl);
    assert.equal(refusal.doc_url, refusal.docUrl);
  });

  it("are resent on another channel as the same verification", async () => {
    const to = freshNumber();
    const first = await relay.verifications.create({ to });
    const resent = await relay.verifications.create({ to, channels: ["whatsapp", "sms"] });
    assert.equal(resent.id, first.id);
    assert.equal(resent.channel, "whatsapp");
    assert.deepEqual(
      resent.attempts.map((attempt) => attempt.channel),
      ["sms", "whatsapp"],
    );
  });

  it("throw a resend on the same channel too soon at once, with its Retry-After", async () => {
    const to = freshNumber();
    await relay.verifications.create({ to, channel: "sms" });
    const started = Date.now();
    const refusal = await rejection(relay.verifications.create({ to, channel: "sms" }));
    assert.ok(refusal instanceof RateLimitError);
    assert.equal(refusal.code, "resend_too_soon");
    assert.ok((refusal.retryAfter ?? 0) > 10, `retryAfter ${refusal.retryAfter}`);
    assert.ok(Date.now() - started < 5_000, "a long Retry-After is not waited for");
  });

  it("are canceled, and stay readable", async () => {
    const created = await relay.verifications.create({ to: freshNumber() });
    const canceled = await relay.verifications.cancel(created.id);
    assert.equal(canceled.status, "canceled");
    assert.ok(canceled.canceled_at);
    const retrieved = await relay.verifications.retrieve(created.id);
    assert.equal(retrieved.status, "canceled");
  });

  it("are listed newest first across pages", async () => {
    const made: Verification[] = [];
    for (let i = 0; i < 5; i++) {
      made.push(await relay.verifications.create({ to: freshNumber(), metadata: { batch: "list" } }));
    }
    const before = exchanges.length;
    const listed: string[] = [];
    for await (const verification of relay.verifications.list({ limit: 2 })) {
      listed.push(verification.id);
    }
    const newestFive = made.map((verification) => verification.id).reverse();
    assert.deepEqual(listed.slice(0, 5), newestFive);
    assert.ok(exchanges.length - before >= 3, "a page of 2 at a time takes several requests");

    const pending = await relay.verifications.list({ status: "pending", limit: 100 }).toArray();
    assert.ok(pending.every((verification) => verification.status === "pending"));
    const newer = await relay.verifications.list({ endingBefore: made[2]!.id, limit: 1 }).toArray();
    assert.deepEqual(
      newer.map((verification) => verification.id).sort(),
      [made[3]!.id, made[4]!.id].sort(),
    );
  });

  it("are not created twice under one idempotency key: the first answer is replayed", async () => {
    const to = freshNumber();
    const key = `order-${to}`;
    const first = await relay.verifications.create({ to }, { idempotencyKey: key });
    const replayed = await relay.verifications.create({ to }, { idempotencyKey: key });
    assert.deepEqual(replayed, first);
    const last = exchanges.at(-1)!;
    assert.equal(last.requestHeaders["Idempotency-Key"], key);
    assert.equal(last.responseHeaders?.get("idempotent-replayed"), "true");
    assert.equal((await relay.verifications.retrieve(first.id)).attempts.length, 1);

    const reused = await rejection(relay.verifications.create({ to: freshNumber() }, { idempotencyKey: key }));
    assert.ok(reused instanceof InvalidRequestError);
    assert.equal(reused.code, "idempotency_key_reused");
  });

  it("send a fresh idempotency key with every POST", async () => {
    const before = exchanges.length;
    await relay.verifications.create({ to: freshNumber() });
    await relay.verifications.create({ to: freshNumber() });
    const keys = exchanges.slice(before).map((exchange) => exchange.requestHeaders["Idempotency-Key"]);
    assert.equal(keys.length, 2);
    assert.match(keys[0] ?? "", /^rc_[0-9a-f]{32}$/);
    assert.notEqual(keys[0], keys[1]);
  });
});

describe("errors", () => {
  it("name the parameter at fault", async () => {
    const refusal = await rejection(relay.verifications.create({ to: "not a number" }));
    assert.ok(refusal instanceof InvalidRequestError);
    assert.equal(refusal.param, "to");
    assert.equal(refusal.type, "invalid_request_error");
    assert.ok(refusal.code);
  });

  it("say a missing object is not found", async () => {
    const refusal = await rejection(relay.verifications.retrieve("ver_00000000000000000000000000"));
    assert.ok(refusal instanceof NotFoundError);
    assert.equal(refusal.code, "resource_missing");
  });

  it("say an unknown key is refused", async () => {
    const stranger = new Relay({ apiKey: "sk_test_unknownunknownunknownunknown", baseUrl: served.baseUrl });
    const refusal = await rejection(stranger.verifications.retrieve("ver_00000000000000000000000000"));
    assert.ok(refusal instanceof AuthenticationError);
    assert.equal(refusal.httpStatus, 401);
  });
});

describe("messages and events", () => {
  it("send your own code and show its events", async () => {
    const message = await relay.messages.send({ to: freshNumber(), code: "482913", metadata: { order: "7" } });
    assert.equal(message.object, "message");
    assert.equal((await relay.messages.retrieve(message.id)).id, message.id);

    const events = await relay.events.list({ related: message.id }).toArray();
    assert.ok(events.length >= 1);
    assert.ok(events.every((event) => event.type.startsWith("message.")));
    const event = await relay.events.retrieve(events[0]!.id);
    assert.equal(event.id, events[0]!.id);
    assert.equal(event.delivery_status, "none");
  });
});

describe("erasures", () => {
  it("delete what names a number and say how much, masked", async () => {
    const to = freshNumber();
    const message = await relay.messages.send({ to, code: "482913" });
    const erasure = await relay.erasures.create({ to });
    assert.equal(erasure.object, "erasure");
    assert.equal(erasure.livemode, false);
    assert.equal(erasure.to, `${to.slice(0, 5)}…${to.slice(-2)}`);
    assert.equal(erasure.deleted.messages, 1);
    const refusal = await rejection(relay.messages.retrieve(message.id));
    assert.ok(refusal instanceof NotFoundError);
  });

  it("refuse a destination that is neither a number nor an address", async () => {
    const refusal = await rejection(relay.erasures.create({ to: "12" }));
    assert.ok(refusal instanceof InvalidRequestError);
    assert.equal(refusal.param, "to");
  });
});

async function rejection(promise: Promise<unknown>): Promise<Error & Record<string, unknown>> {
  try {
    await promise;
  } catch (error) {
    return error as Error & Record<string, unknown>;
  }
  assert.fail("expected a rejection");
}
