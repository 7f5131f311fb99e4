// TypeScript client for the Relay OTP API (SMS, WhatsApp, email): fetch and Web Crypto
// only, so it runs on Node 18+, Deno, Bun and edge runtimes.
//
//   import { Relay } from "@relay-otp/client";
//   const relay = new Relay({ apiKey: "sk_test_...", baseUrl: "https://relay.example.com" });
//   const verification = await relay.verifications.create({ to: "+14155552671" });
//   await relay.verifications.check({ id: verification.id, code: "123456" });

export type { RequestOptions } from "./calls.js";
export { DEFAULT_BASE_URL, DEFAULT_MAX_RETRIES, DEFAULT_TIMEOUT, Relay, newIdempotencyKey, type RelayOptions } from "./client.js";
export {
  APIConnectionError,
  APIError,
  AuthenticationError,
  ConflictError,
  InvalidRequestError,
  NotFoundError,
  RateLimitError,
  RelayError,
  SignatureVerificationError,
  type RelayErrorFields,
} from "./errors.js";
export type {
  Attempt,
  AttemptError,
  Channel,
  CheckVerificationParams,
  CreateErasureParams,
  CreateVerificationParams,
  DeliveryAttempt,
  DeliveryStatus,
  Erasure,
  ErrorDetail,
  Event,
  EventType,
  ListEventsParams,
  ListVerificationsParams,
  Message,
  Page,
  SendMessageParams,
  Verification,
  VerificationStatus,
  WebhookEvent,
} from "./objects.js";
export { AsyncPaginator, Erasures, Events, Messages, Verifications } from "./resources.js";
export type { components, operations, paths } from "./schema.js";
export { DEFAULT_TOLERANCE, SIGNATURE_HEADER, verifyWebhook, type SignatureHeader, type VerifyWebhookOptions } from "./webhooks.js";
export { VERSION } from "./version.js";
