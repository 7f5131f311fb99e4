// A fetch that records what the client sent and what came back, for tests to read.

export interface Exchange {
  method: string;
  url: string;
  requestHeaders: Record<string, string>;
  status: number | null;
  responseHeaders: Headers | null;
}

export function recordingFetch(exchanges: Exchange[], inner: typeof fetch = globalThis.fetch): typeof fetch {
  return async (input, init) => {
    const exchange: Exchange = {
      method: init?.method ?? "GET",
      url: String(input),
      requestHeaders: { ...(init?.headers as Record<string, string>) },
      status: null,
      responseHeaders: null,
    };
    exchanges.push(exchange);
    const response = await inner(input, init);
    exchange.status = response.status;
    exchange.responseHeaders = response.headers;
    return response;
  };
}

let numbers = 0;

/** A number no other test of this process used: one pending verification per number. */
export function freshNumber(): string {
  numbers += 1;
  return `+1415556${String(process.pid % 100).padStart(2, "0")}${String(numbers).padStart(2, "0")}`;
}
