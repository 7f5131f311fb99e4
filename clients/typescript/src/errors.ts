// What the client throws: one class per kind of failure, all under `RelayError`.

export interface RelayErrorFields {
  type?: string | null;
  code?: string | null;
  param?: string | null;
  docUrl?: string | null;
  requestId?: string | null;
  httpStatus?: number | null;
  /** The answer's headers, names lower-cased. */
  headers?: Record<string, string>;
  cause?: unknown;
}

/**
 * Base of every error this package throws. For an answer from the API the fields come
 * from its error body (`{"error": {"type", "code", "message", "param", "doc_url"}}`) and
 * its `Request-Id` header; quote `requestId` when asking the operator about it.
 */
export class RelayError extends Error {
  readonly type: string | null;
  readonly code: string | null;
  readonly param: string | null;
  readonly docUrl: string | null;
  readonly requestId: string | null;
  readonly httpStatus: number | null;
  readonly headers: Record<string, string>;

  constructor(message: string, fields: RelayErrorFields = {}) {
    super(message, fields.cause === undefined ? undefined : { cause: fields.cause });
    this.name = new.target.name;
    this.type = fields.type ?? null;
    this.code = fields.code ?? null;
    this.param = fields.param ?? null;
    this.docUrl = fields.docUrl ?? null;
    this.requestId = fields.requestId ?? null;
    this.httpStatus = fields.httpStatus ?? null;
    this.headers = { ...(fields.headers ?? {}) };
  }

  /** `docUrl` under the API's own name, as relay-client (Python) spells it. */
  get doc_url(): string | null {
    return this.docUrl;
  }

  override toString(): string {
    const what = this.code ? `${this.httpStatus} ${this.code}: ` : "";
    const where = this.requestId ? ` (request ${this.requestId})` : "";
    return `${this.name}: ${what}${this.message}${where}`;
  }
}

/** The request cannot succeed as sent (400, 403, 405, 413, 415, 422). */
export class InvalidRequestError extends RelayError {}

/** The API key is missing, malformed, unknown or revoked (401). */
export class AuthenticationError extends RelayError {}

/** No such object for this key's account and mode, or no such route (404). */
export class NotFoundError extends RelayError {}

/**
 * The object's state forbids the request, e.g. checking an approved verification, or a
 * request with the same idempotency key is still running (409).
 */
export class ConflictError extends RelayError {}

/** Too many requests, sends or checks (429); `retryAfter` says when to try again. */
export class RateLimitError extends RelayError {
  /** Seconds from the `Retry-After` header, or null. */
  get retryAfter(): number | null {
    return parseRetryAfter(this.headers["retry-after"]);
  }
}

/** Relay failed or cannot serve the request now (5xx), or answered in a way the client does not understand. */
export class APIError extends RelayError {}

/** No answer from Relay: connection refused or cut, timed out, or TLS failed. */
export class APIConnectionError extends APIError {}

/** A webhook delivery is not provably from Relay with these secrets, or is too old. */
export class SignatureVerificationError extends RelayError {}

/** Seconds from a `Retry-After` header; Relay sends whole seconds, never dates. */
export function parseRetryAfter(value: string | null | undefined): number | null {
  if (value === null || value === undefined || value.trim() === "") {
    return null;
  }
  const seconds = Number(value.trim());
  return Number.isFinite(seconds) && seconds >= 0 ? seconds : null;
}

type ErrorClass = new (message: string, fields?: RelayErrorFields) => RelayError;

// Status decides first where it is more telling than the type (both 404 and 409 carry
// `invalid_request_error`); the type decides for the rest.
const byStatus: Record<number, ErrorClass> = {
  401: AuthenticationError,
  404: NotFoundError,
  409: ConflictError,
  429: RateLimitError,
};
const byType: Record<string, ErrorClass> = {
  invalid_request_error: InvalidRequestError,
  idempotency_error: InvalidRequestError,
  authentication_error: AuthenticationError,
  rate_limit_error: RateLimitError,
  api_error: APIError,
};

export function errorClass(status: number, type: string | null): ErrorClass {
  const fromStatus = byStatus[status];
  if (fromStatus) {
    return fromStatus;
  }
  if (status >= 500) {
    return APIError;
  }
  return byType[type ?? ""] ?? InvalidRequestError;
}

/** The error for a non-2xx answer, whatever its body holds. */
export function errorFromAnswer(
  status: number,
  body: unknown,
  headers: Record<string, string>,
  requestId: string | null,
): RelayError {
  const detail = isObject(body) ? body.error : undefined;
  if (!isObject(detail)) {
    return new APIError(`Relay answered HTTP ${status} without an error body.`, {
      requestId,
      httpStatus: status,
      headers,
    });
  }
  const type = text(detail.type);
  const ErrorFor = errorClass(status, type);
  return new ErrorFor(text(detail.message) ?? `HTTP ${status}`, {
    type,
    code: text(detail.code),
    param: text(detail.param),
    docUrl: text(detail.doc_url),
    requestId,
    httpStatus: status,
    headers,
  });
}

export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function text(value: unknown): string | null {
  return typeof value === "string" ? value : null;
}
