// `Relay`: settings, the request on the wire with its retries, reading the answer.

import { nextPage, type Call, type RequestOptions } from "./calls.js";
import { APIConnectionError, APIError, errorFromAnswer, isObject, RelayError } from "./errors.js";
import type { Page } from "./objects.js";
import { Erasures, Events, Messages, Verifications } from "./resources.js";
import { afterError, afterResponse, retryPolicy, type RetryPolicy } from "./retries.js";
import { VERSION } from "./version.js";

export const DEFAULT_BASE_URL = "https://127.0.0.1:8443";
/** Milliseconds per try. */
export const DEFAULT_TIMEOUT = 30_000;
export const DEFAULT_MAX_RETRIES = 2;

const loopback = new Set(["localhost", "127.0.0.1", "[::1]"]);

export interface RelayOptions {
  /** Default: the RELAY_API_KEY environment variable, where the runtime has one. */
  apiKey?: string;
  /** Default: RELAY_BASE_URL, else https://127.0.0.1:8443. A trailing /v1 is fine. */
  baseUrl?: string;
  /** Milliseconds per try; default 30 000. */
  timeout?: number;
  /** Tries after the first; default 2, 0 turns retries off. */
  maxRetries?: number;
  /** A fetch of your own (a proxy, a custom TLS agent, instrumentation); default globalThis.fetch. */
  fetch?: typeof fetch;
}

/** A Relay API client. One per application is enough; it keeps no connection state of its own. */
export class Relay {
  readonly verifications: Verifications;
  readonly messages: Messages;
  readonly events: Events;
  readonly erasures: Erasures;
  readonly baseUrl: string;
  readonly #apiKey: string;
  readonly #timeout: number;
  readonly #policy: RetryPolicy;
  readonly #fetch: typeof fetch;

  constructor(options: RelayOptions = {}) {
    const apiKey = options.apiKey ?? environment("RELAY_API_KEY");
    if (!apiKey) {
      throw new TypeError("No API key: pass apiKey or set RELAY_API_KEY.");
    }
    const maxRetries = options.maxRetries ?? DEFAULT_MAX_RETRIES;
    if (!Number.isInteger(maxRetries) || maxRetries < 0) {
      throw new TypeError("maxRetries must be a whole number, 0 or more");
    }
    this.#apiKey = apiKey;
    this.baseUrl = origin(options.baseUrl ?? environment("RELAY_BASE_URL") ?? DEFAULT_BASE_URL);
    this.#timeout = options.timeout ?? DEFAULT_TIMEOUT;
    this.#policy = retryPolicy(maxRetries);
    const fetchFunction = options.fetch ?? globalThis.fetch;
    if (typeof fetchFunction !== "function") {
      throw new TypeError("No fetch in this runtime: pass options.fetch");
    }
    // Bound: some runtimes refuse a fetch called with another `this`.
    this.#fetch = fetchFunction.bind(globalThis);
    this.verifications = new Verifications(this);
    this.messages = new Messages(this);
    this.events = new Events(this);
    this.erasures = new Erasures(this);
  }

  /** @internal Sends `call`, retrying as documented; the answer's JSON object. */
  async request<T>(call: Call, options: RequestOptions = {}): Promise<T> {
    const policy = options.maxRetries === undefined ? this.#policy : { ...this.#policy, maxRetries: options.maxRetries };
    const timeout = options.timeout ?? this.#timeout;
    const url = new URL(this.baseUrl + call.path);
    for (const [name, value] of Object.entries(call.query ?? {})) {
      url.searchParams.set(name, value);
    }
    const headers: Record<string, string> = {
      Authorization: `Bearer ${this.#apiKey}`,
      Accept: "application/json",
      "User-Agent": `relay-client-typescript/${VERSION}`,
    };
    let body: string | undefined;
    if (call.method === "POST") {
      headers["Content-Type"] = "application/json";
      // One key for every try of this request: Relay replays the first answer.
      headers["Idempotency-Key"] = options.idempotencyKey ?? newIdempotencyKey();
      body = JSON.stringify(call.body ?? {});
    }
    for (let attempt = 0; ; attempt++) {
      let delay: number | null;
      let response: Response;
      let content: string;
      try {
        [response, content] = await this.#send(url, call.method, headers, body, timeout, options.signal);
      } catch (error) {
        if (options.signal?.aborted) {
          throw options.signal.reason ?? error;
        }
        delay = afterError(policy, attempt, error);
        if (delay === null) {
          throw connectionError(error);
        }
        await sleep(delay, options.signal);
        continue;
      }
      const answer = jsonOrNull(content);
      delay = afterResponse(policy, attempt, response.status, response.headers.get("retry-after"), errorCode(answer));
      if (delay === null) {
        return read<T>(response, answer);
      }
      await sleep(delay, options.signal);
    }
  }

  /** @internal Every item of a list, newest first, fetching pages as iteration reaches them. */
  async *pages<T extends { id: string }>(first: Call, options: RequestOptions = {}): AsyncGenerator<T> {
    let call: Call | null = first;
    while (call !== null) {
      const page: Page<T> = await this.request<Page<T>>(call, options);
      yield* page.data;
      call = nextPage(call, page);
    }
  }

  async #send(
    url: URL,
    method: string,
    headers: Record<string, string>,
    body: string | undefined,
    timeout: number,
    signal: AbortSignal | undefined,
  ): Promise<[Response, string]> {
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(new TimeoutError(timeout)), timeout);
    const cancel = () => controller.abort(signal?.reason);
    signal?.addEventListener("abort", cancel, { once: true });
    try {
      if (signal?.aborted) {
        cancel();
      }
      const init: RequestInit = { method, headers, signal: controller.signal, redirect: "manual" };
      if (body !== undefined) {
        init.body = body;
      }
      const response = await this.#fetch(url, init);
      // The body is read under the same timeout: a server may stall after its head.
      return [response, await response.text()];
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener("abort", cancel);
    }
  }
}

/** A try that ran out of time (the client's `timeout`). */
class TimeoutError extends Error {
  constructor(readonly milliseconds: number) {
    super(`no answer within ${milliseconds} ms`);
    this.name = "TimeoutError";
  }
}

export function newIdempotencyKey(): string {
  return `rc_${globalThis.crypto.randomUUID().replaceAll("-", "")}`;
}

function origin(baseUrl: string): string {
  let parsed: URL;
  try {
    parsed = new URL(baseUrl);
  } catch {
    throw new TypeError(`baseUrl must be an https:// URL, not ${JSON.stringify(baseUrl)}`);
  }
  if (parsed.protocol !== "https:" && parsed.protocol !== "http:") {
    throw new TypeError(`baseUrl must be an https:// URL, not ${JSON.stringify(baseUrl)}`);
  }
  // Plain HTTP would carry the API key in clear; only a loopback twin may use it.
  if (parsed.protocol === "http:" && !loopback.has(parsed.hostname)) {
    throw new TypeError("Relay accepts HTTPS only: baseUrl must start with https://");
  }
  // The spec's `{base_url}` ends in /v1 while paths carry it too: accept both forms.
  return baseUrl.replace(/\/+$/, "").replace(/\/v1$/, "");
}

function environment(name: string): string | undefined {
  const process = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process;
  try {
    return process?.env?.[name] || undefined;
  } catch {
    // Deno without --allow-env throws rather than answering: as if unset.
    return undefined;
  }
}

function jsonOrNull(content: string): unknown {
  try {
    return JSON.parse(content);
  } catch {
    return null;
  }
}

function errorCode(answer: unknown): string | null {
  const detail = isObject(answer) ? answer.error : undefined;
  return isObject(detail) && typeof detail.code === "string" ? detail.code : null;
}

function lowered(headers: Headers): Record<string, string> {
  const out: Record<string, string> = {};
  headers.forEach((value, name) => {
    out[name.toLowerCase()] = value;
  });
  return out;
}

/** The answer's JSON object, or the error it stands for. */
function read<T>(response: Response, answer: unknown): T {
  const headers = lowered(response.headers);
  const requestId = headers["request-id"] ?? null;
  if (response.ok && isObject(answer)) {
    return answer as T;
  }
  if (response.ok) {
    throw new APIError("Relay answered without a JSON object.", {
      requestId,
      httpStatus: response.status,
      headers,
    });
  }
  throw errorFromAnswer(response.status, answer, headers, requestId);
}

function connectionError(error: unknown): RelayError {
  const reason = error instanceof Error ? error : new Error(String(error));
  const cause = (reason as { cause?: unknown }).cause;
  const detail = cause instanceof Error ? `${reason.message}: ${cause.message}` : reason.message;
  return new APIConnectionError(`Could not get an answer from Relay (${reason.name}: ${detail || "no detail"}).`, {
    cause: error,
  });
}

function sleep(seconds: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", stop);
      resolve();
    }, seconds * 1000);
    const stop = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    signal?.addEventListener("abort", stop, { once: true });
  });
}
