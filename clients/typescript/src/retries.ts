// When the client tries a request again, as a pure policy: no clock, no sleeping.
//
// Every request the client sends is safe to repeat: GETs by nature, POSTs because each
// carries one idempotency key across all of its tries, so Relay replays the first
// answer instead of sending a second SMS.

import { parseRetryAfter } from "./errors.js";

// 5xx that may heal by themselves. 501 and 505 will not; 503 `no_route_available` is a
// configuration problem, told apart by its code.
const retryableStatuses = new Set([500, 502, 503, 504]);
const permanentCodes = new Set(["no_route_available"]);

export interface RetryPolicy {
  maxRetries: number;
  /** Seconds. */
  initialDelay: number;
  /** Seconds. */
  maxDelay: number;
  /**
   * Seconds. A longer Retry-After (resend_too_soon is 30 s, max_sends_reached hours) is
   * thrown to the caller at once rather than blocking it silently.
   */
  maxRetryAfter: number;
  jitter: () => number;
}

export function retryPolicy(maxRetries: number): RetryPolicy {
  return { maxRetries, initialDelay: 0.5, maxDelay: 8, maxRetryAfter: 10, jitter: Math.random };
}

/**
 * Exponential, capped, with jitter so clients cut off together do not return together;
 * never below half the nominal delay.
 */
export function backoff(policy: RetryPolicy, attempt: number): number {
  const nominal = Math.min(policy.maxDelay, policy.initialDelay * 2 ** attempt);
  return nominal * (0.5 + policy.jitter() / 2);
}

/** Seconds to wait before trying again, or null to settle on this answer. */
export function afterResponse(
  policy: RetryPolicy,
  attempt: number,
  status: number,
  retryAfterHeader: string | null,
  code: string | null,
): number | null {
  if (attempt >= policy.maxRetries || !worthRetrying(status, code)) {
    return null;
  }
  const retryAfter = parseRetryAfter(retryAfterHeader);
  if (retryAfter === null) {
    return backoff(policy, attempt);
  }
  return retryAfter <= policy.maxRetryAfter ? retryAfter : null;
}

/** Seconds to wait before trying again after no answer at all, or null. */
export function afterError(policy: RetryPolicy, attempt: number, error: unknown): number | null {
  if (attempt >= policy.maxRetries || !transient(error)) {
    return null;
  }
  return backoff(policy, attempt);
}

function worthRetrying(status: number, code: string | null): boolean {
  if (status === 429) {
    return true;
  }
  if (status === 409) {
    // The first try with this key is still running on the server (it may be the one
    // whose answer a cut connection lost): its replay is coming.
    return code === "idempotency_key_in_use";
  }
  return retryableStatuses.has(status) && !permanentCodes.has(code ?? "");
}

// A certificate that does not verify will not verify on the next try either (Node's
// codes; other runtimes' fetch says less, and such a failure is then retried).
const certificateCodes = new Set([
  "CERT_HAS_EXPIRED",
  "CERT_NOT_YET_VALID",
  "CERT_UNTRUSTED",
  "DEPTH_ZERO_SELF_SIGNED_CERT",
  "ERR_TLS_CERT_ALTNAME_INVALID",
  "SELF_SIGNED_CERT_IN_CHAIN",
  "UNABLE_TO_GET_ISSUER_CERT",
  "UNABLE_TO_GET_ISSUER_CERT_LOCALLY",
  "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
]);

function transient(error: unknown): boolean {
  let cause: unknown = error;
  for (let depth = 0; cause !== undefined && cause !== null && depth < 8; depth++) {
    const code = (cause as { code?: unknown }).code;
    if (typeof code === "string" && certificateCodes.has(code)) {
      return false;
    }
    cause = (cause as { cause?: unknown }).cause;
  }
  return true;
}
