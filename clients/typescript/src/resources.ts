// The API's resources: each method builds its call (calls.ts) and hands it to the client.

import * as calls from "./calls.js";
import type { RequestOptions } from "./calls.js";
import type { Relay } from "./client.js";
import type {
  CheckVerificationParams,
  CreateErasureParams,
  CreateVerificationParams,
  Erasure,
  Event,
  ListEventsParams,
  ListVerificationsParams,
  Message,
  SendMessageParams,
  Verification,
} from "./objects.js";

/**
 * Every item of a list, newest first: `for await (const item of list)` fetches the next
 * page (keyset cursor) when it reaches the end of the current one.
 */
export class AsyncPaginator<T extends { id: string }> implements AsyncIterable<T> {
  readonly #client: Relay;
  readonly #first: calls.Call;
  readonly #options: RequestOptions;

  constructor(client: Relay, first: calls.Call, options: RequestOptions) {
    this.#client = client;
    this.#first = first;
    this.#options = options;
  }

  [Symbol.asyncIterator](): AsyncIterator<T> {
    return this.#client.pages<T>(this.#first, this.#options);
  }

  /** At most `max` items, walking as many pages as that takes. */
  async toArray(max = Infinity): Promise<T[]> {
    const items: T[] = [];
    if (max <= 0) {
      return items;
    }
    for await (const item of this) {
      items.push(item);
      if (items.length >= max) {
        break;
      }
    }
    return items;
  }
}

export class Verifications {
  readonly #client: Relay;

  constructor(client: Relay) {
    this.#client = client;
  }

  /**
   * Send a code to `to` on `channel` (sms, the default; whatsapp; email), or on `channels`
   * in order, each tried when the one before fails. For a destination with a pending
   * verification, resend it (on the channels given now).
   */
  create(params: CreateVerificationParams, options?: RequestOptions): Promise<Verification> {
    return this.#client.request(calls.createVerification(params), options);
  }

  /** Submit `code` for verification `id`, or for `to`'s pending verification. */
  check(params: CheckVerificationParams, options?: RequestOptions): Promise<Verification> {
    return this.#client.request(calls.checkVerification(params), options);
  }

  retrieve(id: string, options?: RequestOptions): Promise<Verification> {
    return this.#client.request(calls.retrieveVerification(id), options);
  }

  cancel(id: string, options?: RequestOptions): Promise<Verification> {
    return this.#client.request(calls.cancelVerification(id), options);
  }

  /** `limit` is the page size; iteration goes on to the last page. */
  list(params: ListVerificationsParams = {}, options: RequestOptions = {}): AsyncPaginator<Verification> {
    return new AsyncPaginator(this.#client, calls.listVerifications(params), options);
  }
}

export class Messages {
  readonly #client: Relay;

  constructor(client: Relay) {
    this.#client = client;
  }

  /** Deliver your own `code` to `to`. */
  send(params: SendMessageParams, options?: RequestOptions): Promise<Message> {
    return this.#client.request(calls.sendMessage(params), options);
  }

  retrieve(id: string, options?: RequestOptions): Promise<Message> {
    return this.#client.request(calls.retrieveMessage(id), options);
  }
}

export class Erasures {
  readonly #client: Relay;

  constructor(client: Relay) {
    this.#client = client;
  }

  /**
   * Delete every verification and message of this key's account and mode sent to `to`,
   * with all that names it; the counts of what was deleted, per kind.
   */
  create(params: CreateErasureParams, options?: RequestOptions): Promise<Erasure> {
    return this.#client.request(calls.createErasure(params), options);
  }
}

export class Events {
  readonly #client: Relay;

  constructor(client: Relay) {
    this.#client = client;
  }

  retrieve(id: string, options?: RequestOptions): Promise<Event> {
    return this.#client.request(calls.retrieveEvent(id), options);
  }

  /** Events newest first; `related` (a verification or message id) narrows them. */
  list(params: ListEventsParams = {}, options: RequestOptions = {}): AsyncPaginator<Event> {
    return new AsyncPaginator(this.#client, calls.listEvents(params), options);
  }
}
