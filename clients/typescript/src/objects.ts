// The API's objects, named: each is the generated type of the OpenAPI document
// `relay serve` serves (schema.ts), so they cannot drift from the server.
// Timestamps stay ISO 8601 strings (UTC) as sent.

import type { components, operations } from "./schema.js";

type Schemas = components["schemas"];

export type Verification = Schemas["VerificationObject"];
export type Message = Schemas["MessageObject"];
/** What an erasure deleted, per kind; `to` is the destination masked (`+1415…71`). */
export type Erasure = Schemas["ErasureObject"];
export type Attempt = Schemas["AttemptObject"];
export type AttemptError = Schemas["AttemptError"];
/** An event as `GET /v1/events` shows it: the envelope and its delivery state. */
export type Event = Schemas["EventObject"];
/** The envelope a webhook delivery carries. */
export type WebhookEvent = Pick<Event, "id" | "object" | "type" | "created_at" | "livemode" | "data">;
export type EventType = Schemas["EventType"];
export type DeliveryStatus = Schemas["DeliveryStatus"];
export type DeliveryAttempt = Schemas["DeliveryAttemptObject"];
export type ErrorDetail = Schemas["ErrorDetail"];
export type VerificationStatus = Verification["status"];
export type Channel = Verification["channel"];

/** One page of a list, as the API returns it. */
export interface Page<T> {
  object: "list";
  url: string;
  data: T[];
  has_more: boolean;
}

/** `POST /v1/verifications`: `to` is E.164 for sms and whatsapp, an email address for email. */
export type CreateVerificationParams = Omit<Schemas["CreateVerificationBody"], "to"> & { to: string };

/** `POST /v1/verifications/check`: exactly one of `id` and `to`. */
export type CheckVerificationParams = { code: string } & ({ id: string; to?: never } | { to: string; id?: never });

/** `POST /v1/erasures`: a number in E.164 form or an email address. */
export type CreateErasureParams = Schemas["EraseBody"];

/** `POST /v1/messages`: you generate the code. */
export type SendMessageParams = Schemas["SendMessageBody"];

type Query<Operation extends keyof operations> = NonNullable<operations[Operation]["parameters"]["query"]>;
type VerificationQuery = Query<"list_verifications">;
type EventQuery = Query<"list_events">;

export interface ListVerificationsParams {
  status?: VerificationQuery["status"];
  to?: string;
  /** Created at or after: a Date or an ISO 8601 time with its zone. */
  createdGte?: Date | string;
  /** Created before: a Date or an ISO 8601 time with its zone. */
  createdLt?: Date | string;
  /** The page size, not a total: iteration goes on to the last page. */
  limit?: number;
  startingAfter?: string;
  /** Walk toward newer objects from this id, page by page. */
  endingBefore?: string;
}

export interface ListEventsParams {
  /** A verification or message id. */
  related?: string;
  type?: EventQuery["type"];
  deliveryStatus?: EventQuery["delivery_status"];
  limit?: number;
  startingAfter?: string;
  endingBefore?: string;
}
