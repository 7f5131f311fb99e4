// Check that a webhook delivery comes from Relay before trusting its event.
//
// Relay signs each delivery in the `Relay-Signature` header, `t=<unix time>, v1=<hex>[,
// v1=<hex>...]`: `v1` is the HMAC-SHA256, keyed by the UTF-8 bytes of the account's
// signing secret (`whsec_...`, prefix included), of `<t>.` followed by the raw request
// body. During a secret roll there is one `v1` per active secret.

import { isObject, SignatureVerificationError } from "./errors.js";
import type { WebhookEvent } from "./objects.js";

export const SIGNATURE_HEADER = "Relay-Signature";
/** Seconds. */
export const DEFAULT_TOLERANCE = 300;

/** The header's value, or the request's headers: a `Headers`, or a record such as Node's. */
export type SignatureHeader =
  | string
  | null
  | undefined
  | { get(name: string): string | null }
  | Record<string, string | readonly string[] | undefined>;

export interface VerifyWebhookOptions {
  /** Seconds a timestamp may be from now, either way; default 300. */
  tolerance?: number;
  /** Unix seconds to compare with; default the clock. */
  now?: number;
}

const encoder = new TextEncoder();

/**
 * The delivered event, once its signature and age check out; else a rejected
 * `SignatureVerificationError`.
 *
 * `body` must be the raw body as received, before any JSON parsing: a re-serialised
 * body no longer matches. `header` is the `Relay-Signature` header's value, or the
 * request's headers (a `Headers`, or a record with names in any case). `secrets`:
 * one, or several while you roll them (any one matching is enough).
 */
export async function verifyWebhook(
  body: string | Uint8Array | ArrayBuffer,
  header: SignatureHeader,
  secrets: string | readonly string[],
  options: VerifyWebhookOptions = {},
): Promise<WebhookEvent> {
  const tolerance = options.tolerance ?? DEFAULT_TOLERANCE;
  const keys = typeof secrets === "string" ? [secrets] : [...secrets];
  if (keys.length === 0 || keys.some((secret) => typeof secret !== "string" || secret === "")) {
    throw new TypeError("verifyWebhook needs at least one non-empty secret");
  }
  const value = headerValue(header);
  if (value === null) {
    throw new SignatureVerificationError(`No ${SIGNATURE_HEADER} header.`);
  }
  const payload = bytes(body);
  const { timestamp, candidates } = parse(value);
  const signed = concat(encoder.encode(`${timestamp}.`), payload);
  if (!(await anyMatches(signed, keys, candidates))) {
    throw new SignatureVerificationError("No v1 signature matches the payload and secrets.");
  }
  const now = options.now ?? Date.now() / 1000;
  // Both ways: a timestamp from the future is as suspect as an old one.
  if (Math.abs(now - timestamp) > tolerance) {
    throw new SignatureVerificationError(`Signature timestamp ${timestamp} is more than ${tolerance} s from now.`);
  }
  return event(payload);
}

function headerValue(header: SignatureHeader): string | null {
  if (typeof header === "string") {
    return header === "" ? null : header;
  }
  if (header === null || header === undefined) {
    return null;
  }
  if (typeof header.get === "function") {
    return (header as { get(name: string): string | null }).get(SIGNATURE_HEADER) || null;
  }
  const wanted = SIGNATURE_HEADER.toLowerCase();
  for (const [name, value] of Object.entries(header)) {
    if (name.toLowerCase() === wanted) {
      // A repeated header is not Relay's: it sends one.
      return typeof value === "string" && value !== "" ? value : null;
    }
  }
  return null;
}

function parse(header: string): { timestamp: number; candidates: string[] } {
  let timestamp: number | null = null;
  const candidates: string[] = [];
  for (const item of header.split(",")) {
    const element = item.trim();
    const at = element.indexOf("=");
    const scheme = at < 0 ? element : element.slice(0, at);
    const value = at < 0 ? "" : element.slice(at + 1);
    if (scheme === "t") {
      // ASCII digits only: Number() alone would take "1e9", " 1" or "0x10".
      if (timestamp !== null || !/^[0-9]+$/.test(value)) {
        throw new SignatureVerificationError(`Bad timestamp in ${SIGNATURE_HEADER}.`);
      }
      timestamp = Number(value);
    } else if (scheme === "v1" && value) {
      candidates.push(value);
    }
  }
  if (timestamp === null || candidates.length === 0) {
    throw new SignatureVerificationError(`${SIGNATURE_HEADER} needs a t= and at least one v1=.`);
  }
  return { timestamp, candidates };
}

async function anyMatches(signed: Uint8Array<ArrayBuffer>, secrets: string[], candidates: string[]): Promise<boolean> {
  const subtle = globalThis.crypto?.subtle;
  if (!subtle) {
    throw new TypeError("No Web Crypto (globalThis.crypto.subtle) in this runtime");
  }
  // crypto.subtle.verify compares in constant time; every pair is checked, with no early
  // exit, so timing tells neither the digest nor which secret or signature matched.
  const signatures = candidates.map(fromHex).filter((signature): signature is Uint8Array<ArrayBuffer> => signature !== null);
  let matched = false;
  for (const secret of secrets) {
    const key = await subtle.importKey("raw", encoder.encode(secret), { name: "HMAC", hash: "SHA-256" }, false, [
      "verify",
    ]);
    for (const signature of signatures) {
      matched = (await subtle.verify("HMAC", key, signature, signed)) || matched;
    }
  }
  return matched;
}

/** The 32 bytes of a hex SHA-256 signature, or null for anything else (never a match). */
function fromHex(value: string): Uint8Array<ArrayBuffer> | null {
  if (!/^[0-9a-fA-F]{64}$/.test(value)) {
    return null;
  }
  const out = new Uint8Array(32);
  for (let i = 0; i < 32; i++) {
    out[i] = parseInt(value.slice(2 * i, 2 * i + 2), 16);
  }
  return out;
}

function bytes(body: string | Uint8Array | ArrayBuffer): Uint8Array {
  if (typeof body === "string") {
    return encoder.encode(body);
  }
  if (body instanceof Uint8Array) {
    return body;
  }
  if (body instanceof ArrayBuffer) {
    return new Uint8Array(body);
  }
  throw new TypeError("body must be the raw request body: a string, Uint8Array or ArrayBuffer");
}

function concat(head: Uint8Array, tail: Uint8Array): Uint8Array<ArrayBuffer> {
  const out = new Uint8Array(head.length + tail.length);
  out.set(head, 0);
  out.set(tail, head.length);
  return out;
}

function event(payload: Uint8Array): WebhookEvent {
  let parsed: unknown;
  try {
    parsed = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(payload));
  } catch (error) {
    throw new SignatureVerificationError("The signed payload is not JSON.", { cause: error });
  }
  if (!isObject(parsed) || !("id" in parsed) || !("type" in parsed)) {
    throw new SignatureVerificationError("The signed payload is not a Relay event.");
  }
  return parsed as unknown as WebhookEvent;
}
