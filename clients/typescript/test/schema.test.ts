import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { after, before, it } from "node:test";
import { fetchDocument, generateTypes, schemaPath } from "./support/generate.js";
import { startRelay, testIdentity, type Served } from "./support/server.js";

let served: Served;

before(async () => {
  served = await startRelay(testIdentity());
});

after(async () => {
  await served?.stop();
});

it("the committed types are those of the document relay serve serves (else: npm run generate)", async () => {
  const document = await fetchDocument(served.baseUrl, testIdentity());
  const generated = await generateTypes(document);
  assert.equal(readFileSync(schemaPath, "utf8"), generated, "src/schema.ts is stale: run `npm run generate`");
});
