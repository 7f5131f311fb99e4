// A webhook receiver over HTTPS, serving with the test run's identity (Relay trusts it
// through RELAY_WEBHOOK_CA_BUNDLE). It keeps each delivery's raw body and headers.

import { readFileSync } from "node:fs";
import { createServer } from "node:https";
import type { AddressInfo } from "node:net";
import type { Identity } from "./server.js";

export interface Delivery {
  body: Buffer;
  headers: Record<string, string | string[] | undefined>;
}

export interface Receiver {
  url: string;
  deliveries: Delivery[];
  /** The first delivery `matches` accepts, waiting for it up to `timeout` ms. */
  next(matches: (delivery: Delivery) => boolean, timeout?: number): Promise<Delivery>;
  close(): Promise<void>;
}

export async function startReceiver(identity: Identity): Promise<Receiver> {
  const deliveries: Delivery[] = [];
  const waiting = new Set<() => void>();
  const server = createServer(
    { cert: readFileSync(identity.cert), key: readFileSync(identity.key) },
    (request, response) => {
      const chunks: Buffer[] = [];
      request.on("data", (chunk: Buffer) => chunks.push(chunk));
      request.on("end", () => {
        deliveries.push({ body: Buffer.concat(chunks), headers: request.headers });
        response.writeHead(200, { "content-type": "text/plain" }).end("ok");
        for (const wake of waiting) {
          wake();
        }
      });
    },
  );
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `https://127.0.0.1:${port}/relay-events`,
    deliveries,
    next(matches, timeout = 15_000) {
      return new Promise((resolve, reject) => {
        const look = () => {
          const found = deliveries.find(matches);
          if (found) {
            clearTimeout(timer);
            waiting.delete(look);
            resolve(found);
          }
        };
        const timer = setTimeout(() => {
          waiting.delete(look);
          reject(new Error(`no matching webhook delivery within ${timeout} ms`));
        }, timeout);
        waiting.add(look);
        look();
      });
    },
    close() {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}
