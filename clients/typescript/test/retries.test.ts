import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, it } from "node:test";
import { APIConnectionError, APIError, InvalidRequestError, RateLimitError, Relay } from "@relay-otp/client";
import { freshNumber, recordingFetch, type Exchange } from "./support/recording.js";
import { startRelay, testIdentity, type Served } from "./support/server.js";

describe("a request Relay refuses with 429 rate_limited", () => {
  let served: Served;

  before(async () => {
    served = await startRelay(testIdentity(), { RELAY_RATE_LIMIT: "1", RELAY_RATE_LIMIT_BURST: "1" });
  });

  after(async () => {
    await served?.stop();
  });

  it("is tried again after its Retry-After, with the same idempotency key", async () => {
    const exchanges: Exchange[] = [];
    const relay = new Relay({ apiKey: served.apiKey, baseUrl: served.baseUrl, fetch: recordingFetch(exchanges) });
    const to = freshNumber();
    await relay.verifications.create({ to });
    const checked = await relay.verifications.check({ to, code: "000000" });
    assert.equal(checked.status, "approved");

    const statuses = exchanges.map((exchange) => exchange.status);
    assert.ok(statuses.includes(429), `statuses ${statuses}`);
    const refused = exchanges.find((exchange) => exchange.status === 429)!;
    assert.ok(Number(refused.responseHeaders?.get("retry-after")) >= 1);
    const checks = exchanges.filter((exchange) => exchange.url.endsWith("/check"));
    assert.ok(checks.length >= 2, "the check was tried again");
    assert.equal(new Set(checks.map((exchange) => exchange.requestHeaders["Idempotency-Key"])).size, 1);
  });

  it("is thrown at once when retries are off", async () => {
    const exchanges: Exchange[] = [];
    const relay = new Relay({
      apiKey: served.apiKey,
      baseUrl: served.baseUrl,
      maxRetries: 0,
      fetch: recordingFetch(exchanges),
    });
    const outcomes = await Promise.allSettled([1, 2, 3].map(() => relay.verifications.list({ limit: 1 }).toArray(1)));
    const refusals = outcomes.flatMap((outcome) => (outcome.status === "rejected" ? [outcome.reason] : []));
    assert.ok(refusals.length >= 1);
    for (const refusal of refusals) {
      assert.ok(refusal instanceof RateLimitError);
      assert.equal(refusal.code, "rate_limited");
      assert.ok((refusal.retryAfter ?? 0) >= 1);
    }
    assert.equal(exchanges.length, 3);
  });
});

/** A loopback HTTP stand-in for Relay whose answers the test scripts. */
async function stub(answer: (request: IncomingMessage, response: ServerResponse, count: number) => void) {
  const requests: IncomingMessage[] = [];
  const server = createServer((request, response) => {
    requests.push(request);
    request.resume();
    request.on("end", () => answer(request, response, requests.length));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    requests,
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

const error = (status: number, type: string, code: string, headers: Record<string, string> = {}) =>
  (response: ServerResponse) =>
    response
      .writeHead(status, { "content-type": "application/json", "request-id": "req_stub", ...headers })
      .end(JSON.stringify({ error: { type, code, message: code, param: null, doc_url: `https://docs/${code}` } }));

const verification = (response: ServerResponse) =>
  response.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ id: "ver_1", object: "verification" }));

describe("the client's retries", () => {
  it("try a 503 again with the same idempotency key, honouring Retry-After", async () => {
    const server = await stub((_, response, count) =>
      count < 3 ? error(503, "api_error", "database_unavailable", { "retry-after": "0" })(response) : verification(response),
    );
    try {
      const relay = new Relay({ apiKey: "sk_test_x", baseUrl: server.baseUrl });
      assert.equal((await relay.verifications.create({ to: "+14155552671" })).id, "ver_1");
      const keys = server.requests.map((request) => request.headers["idempotency-key"]);
      assert.equal(keys.length, 3);
      assert.equal(new Set(keys).size, 1);
    } finally {
      await server.close();
    }
  });

  it("give up after maxRetries, with the last answer's error", async () => {
    const server = await stub((_, response) => error(503, "api_error", "database_busy", { "retry-after": "0" })(response));
    try {
      const relay = new Relay({ apiKey: "sk_test_x", baseUrl: server.baseUrl, maxRetries: 1 });
      const refusal = await relay.verifications.retrieve("ver_1").catch((caught: unknown) => caught);
      assert.ok(refusal instanceof APIError);
      assert.equal(refusal.code, "database_busy");
      assert.equal(refusal.requestId, "req_stub");
      assert.equal(refusal.docUrl, "https://docs/database_busy");
      assert.equal(server.requests.length, 2);
    } finally {
      await server.close();
    }
  });

  it("do not try a configuration error or a bad request again", async () => {
    const server = await stub((request, response) =>
      request.method === "POST"
        ? error(503, "api_error", "no_route_available")(response)
        : error(400, "invalid_request_error", "parameter_invalid")(response),
    );
    try {
      const relay = new Relay({ apiKey: "sk_test_x", baseUrl: server.baseUrl });
      await assert.rejects(relay.verifications.create({ to: "+14155552671" }), { code: "no_route_available" });
      await assert.rejects(relay.verifications.retrieve("x"), InvalidRequestError);
      assert.equal(server.requests.length, 2);
    } finally {
      await server.close();
    }
  });

  it("time out a try that gets no answer, and try again with the same key", async () => {
    const server = await stub(() => undefined);
    try {
      const relay = new Relay({ apiKey: "sk_test_x", baseUrl: server.baseUrl, timeout: 200, maxRetries: 1 });
      const started = Date.now();
      const refusal = await relay.verifications.cancel("ver_1").catch((caught: unknown) => caught);
      assert.ok(refusal instanceof APIConnectionError, String(refusal));
      assert.ok(Date.now() - started < 3_000);
      const keys = server.requests.map((request) => request.headers["idempotency-key"]);
      assert.equal(keys.length, 2);
      assert.equal(keys[0], keys[1]);
    } finally {
      await server.close();
    }
  });

  it("stop at once when the caller aborts", async () => {
    const server = await stub(() => undefined);
    try {
      const relay = new Relay({ apiKey: "sk_test_x", baseUrl: server.baseUrl });
      const controller = new AbortController();
      setTimeout(() => controller.abort(new Error("caller gave up")), 100);
      await assert.rejects(relay.verifications.retrieve("ver_1", { signal: controller.signal }), /caller gave up/);
      assert.equal(server.requests.length, 1);
    } finally {
      await server.close();
    }
  });

  it("take the key and the address from the environment when not given", async () => {
    const server = await stub((_, response) => verification(response));
    process.env.RELAY_API_KEY = "sk_test_from_env";
    process.env.RELAY_BASE_URL = server.baseUrl;
    try {
      await new Relay().verifications.retrieve("ver_1");
      assert.equal(server.requests[0]?.headers.authorization, "Bearer sk_test_from_env");
    } finally {
      delete process.env.RELAY_API_KEY;
      delete process.env.RELAY_BASE_URL;
      await server.close();
    }
    assert.throws(() => new Relay(), /No API key/);
  });

  it("refuse plain HTTP to anything but loopback", () => {
    assert.throws(() => new Relay({ apiKey: "k", baseUrl: "http://relay.example.com" }), /HTTPS only/);
  });
});
