// `npm test`: one TLS identity for the run, made before the test processes start so
// they can trust it from the beginning (NODE_EXTRA_CA_CERTS); then `node --test`.

import { spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { makeIdentity } from "./server.js";

const tests = join(dirname(fileURLToPath(import.meta.url)), "..");
const scratch = mkdtempSync(join(tmpdir(), "relay-ts-tls-"));
let status = 1;
try {
  const identity = makeIdentity(join(scratch, "tls"));
  const files = readdirSync(tests)
    .filter((name) => name.endsWith(".test.js"))
    .sort()
    .map((name) => join(tests, name));
  const run = spawnSync(process.execPath, ["--test", ...process.argv.slice(2), ...files], {
    stdio: "inherit",
    env: { ...process.env, NODE_EXTRA_CA_CERTS: identity.cert, RELAY_TS_TEST_TLS: identity.directory },
  });
  status = run.status ?? 1;
} finally {
  rmSync(scratch, { recursive: true, force: true });
}
process.exit(status);
