// `npm run generate`: src/schema.ts from the OpenAPI document a real `relay serve`
// serves. The drift test (test/schema.test.ts) runs the same generation and compares.

import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { get } from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import openapiTS, { astToString, COMMENT_HEADER } from "openapi-typescript";
import { makeIdentity, packageRoot, startRelay, type Identity } from "./server.js";

export const schemaPath = join(packageRoot, "src", "schema.ts");
export const documentPath = "/v1/openapi.json";

export async function generateTypes(document: string): Promise<string> {
  // Fields with a server-side default stay optional in request bodies.
  const ast = await openapiTS(document, { defaultNonNullable: false });
  return COMMENT_HEADER + astToString(ast);
}

/** The served document, read over HTTPS trusting only the server's own certificate. */
export function fetchDocument(baseUrl: string, identity: Identity): Promise<string> {
  const ca = readFileSync(identity.cert, "utf8");
  return new Promise((resolve, reject) => {
    get(new URL(documentPath, baseUrl), { ca }, (response) => {
      let body = "";
      response.setEncoding("utf8");
      response.on("data", (chunk: string) => (body += chunk));
      response.on("end", () =>
        response.statusCode === 200
          ? resolve(body)
          : reject(new Error(`${documentPath}: HTTP ${response.statusCode}`)),
      );
    }).on("error", reject);
  });
}

async function main(): Promise<void> {
  const scratch = mkdtempSync(join(tmpdir(), "relay-ts-generate-"));
  try {
    const identity = makeIdentity(join(scratch, "tls"));
    const served = await startRelay(identity);
    try {
      const document = await fetchDocument(served.baseUrl, identity);
      writeFileSync(schemaPath, await generateTypes(document));
      console.log(`wrote ${schemaPath} from ${served.baseUrl}${documentPath}`);
    } finally {
      await served.stop();
    }
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  await main();
}
