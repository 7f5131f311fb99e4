import assert from "node:assert/strict";
import { createHmac } from "node:crypto";
import { after, before, describe, it } from "node:test";
import { Relay, SignatureVerificationError, verifyWebhook } from "@relay-otp/client";
import { startReceiver, type Delivery, type Receiver } from "./support/receiver.js";
import { freshNumber } from "./support/recording.js";
import { startRelay, testIdentity, type Served } from "./support/server.js";

let served: Served;
let receiver: Receiver;
let relay: Relay;

before(async () => {
  const identity = testIdentity();
  receiver = await startReceiver(identity);
  served = await startRelay(identity, {
    RELAY_WEBHOOK_ALLOWED_NETWORKS: "127.0.0.0/8",
    RELAY_WEBHOOK_CA_BUNDLE: identity.cert,
    RELAY_WEBHOOK_RETRY_SCHEDULE: "0.05,0.5,1",
    RELAY_WEBHOOK_POLL_INTERVAL: "0.1",
  });
  relay = new Relay({ apiKey: served.apiKey, baseUrl: served.baseUrl });
});

after(async () => {
  await served?.stop();
  await receiver?.close();
});

const header = (delivery: Delivery): string => String(delivery.headers["relay-signature"]);

/** The header Relay would send, computed here independently of the client. */
function sign(body: string, secrets: string[], timestamp: number): string {
  const signatures = secrets.map(
    (secret) => `v1=${createHmac("sha256", secret).update(`${timestamp}.${body}`).digest("hex")}`,
  );
  return `t=${timestamp}, ${signatures.join(", ")}`;
}

async function refused(promise: Promise<unknown>): Promise<SignatureVerificationError> {
  try {
    await promise;
  } catch (error) {
    assert.ok(error instanceof SignatureVerificationError, String(error));
    return error;
  }
  assert.fail("the delivery was accepted");
}

describe("a webhook delivered by Relay", () => {
  let delivery: Delivery;
  let verificationId: string;

  before(async () => {
    const verification = await relay.verifications.create({ to: freshNumber(), webhook_url: receiver.url });
    verificationId = verification.id;
    await relay.verifications.check({ id: verification.id, code: "000000" });
    delivery = await receiver.next((candidate) => candidate.body.toString().includes('"verification.approved"'));
  });

  it("is verified with the account's secret, on the raw body", async () => {
    const event = await verifyWebhook(delivery.body, header(delivery), served.webhookSecret);
    assert.equal(event.type, "verification.approved");
    assert.equal(event.data.object.id, verificationId);
    assert.equal((await relay.events.retrieve(event.id)).id, event.id);
  });

  it("is verified as text too, and with the secret among others during a roll", async () => {
    const event = await verifyWebhook(delivery.body.toString("utf8"), header(delivery), [
      "whsec_retiredretiredretiredretired",
      served.webhookSecret,
    ]);
    assert.equal(event.type, "verification.approved");
  });

  it("is verified from the request's headers as they come", async () => {
    assert.equal((await verifyWebhook(delivery.body, delivery.headers, served.webhookSecret)).type, "verification.approved");
    const headers = new Headers({ "Relay-Signature": header(delivery) });
    assert.equal((await verifyWebhook(delivery.body, headers, served.webhookSecret)).type, "verification.approved");
    await refused(verifyWebhook(delivery.body, new Headers(), served.webhookSecret));
  });

  it("is refused with another secret", async () => {
    await refused(verifyWebhook(delivery.body, header(delivery), "whsec_notthisonenotthisonenotthis"));
  });

  it("is refused once its body is changed", async () => {
    const forged = delivery.body.toString().replace("verification.approved", "verification.expired");
    await refused(verifyWebhook(forged, header(delivery), served.webhookSecret));
  });

  it("is refused when it is older than the tolerance", async () => {
    const later = Date.now() / 1000 + 301;
    const error = await refused(verifyWebhook(delivery.body, header(delivery), served.webhookSecret, { now: later }));
    assert.match(error.message, /more than 300 s/);
    await verifyWebhook(delivery.body, header(delivery), served.webhookSecret, { now: later, tolerance: 400 });
  });
});

describe("verifyWebhook", () => {
  const secret = "whsec_testtesttesttesttesttesttest";
  const body = JSON.stringify({ id: "evt_1", object: "event", type: "verification.sent", data: {} });
  const now = Math.floor(Date.now() / 1000);

  it("accepts a header with one signature per secret during a roll", async () => {
    const rolled = sign(body, ["whsec_newnewnewnewnewnewnewnewnewnew", secret], now);
    assert.equal((await verifyWebhook(body, rolled, secret)).id, "evt_1");
  });

  it("refuses a timestamp from the future as much as an old one", async () => {
    await refused(verifyWebhook(body, sign(body, [secret], now + 600), secret));
  });

  it("refuses a signature made for another timestamp", async () => {
    const signature = sign(body, [secret], now - 1000).split(", ")[1];
    await refused(verifyWebhook(body, `t=${now}, ${signature}`, secret));
  });

  it("refuses malformed headers", async () => {
    for (const bad of ["", "v1=00", `t=${now}`, `t=${now}, t=${now}, v1=00`, `t=1e9, v1=00`, `t= ${now}, v1=00`]) {
      await refused(verifyWebhook(body, bad, secret));
    }
    await refused(verifyWebhook(body, null, secret));
  });

  it("refuses a signed payload that is not an event", async () => {
    await refused(verifyWebhook("[]", sign("[]", [secret], now), secret));
  });
});
