// What each endpoint sends, as data: the client only transports it.

import type {
  CheckVerificationParams,
  CreateErasureParams,
  CreateVerificationParams,
  ListEventsParams,
  ListVerificationsParams,
  Page,
  SendMessageParams,
} from "./objects.js";

export interface Call {
  method: "GET" | "POST";
  path: string;
  body?: Record<string, unknown>;
  query?: Record<string, string>;
}

/** Per request: each overrides the client's setting for this call only. */
export interface RequestOptions {
  /**
   * The `Idempotency-Key` of a POST: one tied to your own operation (an order id, say)
   * makes your own retries safe too. Default: a random one, the same on every try.
   */
  idempotencyKey?: string;
  /** Milliseconds per try. */
  timeout?: number;
  maxRetries?: number;
  /** Aborts the request, its retries and the waits between them. */
  signal?: AbortSignal;
}

// Omitted, not null: Relay then applies its documented defaults.
function given(fields: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(fields).filter(([, value]) => value !== undefined && value !== null));
}

function query(fields: Record<string, string | number | Date | undefined | null>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(fields)) {
    if (value !== undefined && value !== null) {
      out[name] = value instanceof Date ? value.toISOString() : String(value);
    }
  }
  return out;
}

// An id is opaque to the client; encoding keeps it one path segment whatever it holds.
const segment = (id: string): string => encodeURIComponent(id);

export function createVerification(params: CreateVerificationParams): Call {
  return { method: "POST", path: "/v1/verifications", body: given({ ...params }) };
}

export function checkVerification(params: CheckVerificationParams): Call {
  const hasId = params.id !== undefined && params.id !== null;
  const hasTo = params.to !== undefined && params.to !== null;
  if (hasId === hasTo) {
    throw new TypeError("check needs exactly one of id and to");
  }
  return { method: "POST", path: "/v1/verifications/check", body: given({ ...params }) };
}

export function retrieveVerification(id: string): Call {
  return { method: "GET", path: `/v1/verifications/${segment(id)}` };
}

export function cancelVerification(id: string): Call {
  return { method: "POST", path: `/v1/verifications/${segment(id)}/cancel`, body: {} };
}

export function listVerifications(params: ListVerificationsParams = {}): Call {
  return {
    method: "GET",
    path: "/v1/verifications",
    query: query({
      limit: params.limit,
      status: params.status,
      to: params.to,
      starting_after: params.startingAfter,
      ending_before: params.endingBefore,
      "created[gte]": params.createdGte,
      "created[lt]": params.createdLt,
    }),
  };
}

export function sendMessage(params: SendMessageParams): Call {
  return { method: "POST", path: "/v1/messages", body: given({ ...params }) };
}

export function retrieveMessage(id: string): Call {
  return { method: "GET", path: `/v1/messages/${segment(id)}` };
}

export function createErasure(params: CreateErasureParams): Call {
  return { method: "POST", path: "/v1/erasures", body: given({ ...params }) };
}

export function retrieveEvent(id: string): Call {
  return { method: "GET", path: `/v1/events/${segment(id)}` };
}

export function listEvents(params: ListEventsParams = {}): Call {
  return {
    method: "GET",
    path: "/v1/events",
    query: query({
      related: params.related,
      type: params.type,
      delivery_status: params.deliveryStatus,
      limit: params.limit,
      starting_after: params.startingAfter,
      ending_before: params.endingBefore,
    }),
  };
}

/**
 * The call for the page after `page`, or null at the end. Lists are newest first. Paging
 * forward (the default) continues after the oldest item seen; a list started with
 * `endingBefore` pages toward newer items, before the newest seen.
 */
export function nextPage(call: Call, page: Page<{ id: string }>): Call | null {
  const data = page.data ?? [];
  const first = data[0];
  const last = data[data.length - 1];
  if (!page.has_more || !first || !last) {
    return null;
  }
  const base = call.query ?? {};
  const cursor: Record<string, string> = "ending_before" in base ? { ending_before: first.id } : { starting_after: last.id };
  return { ...call, query: { ...base, ...cursor } };
}
