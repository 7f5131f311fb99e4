// A real `relay serve --demo` for the tests and for `npm run generate`: its own data
// dir, a free port, the demo account it prints. The TLS identity is made once per
// test run (see run.ts) and copied into each data dir, so the test process can trust
// it from its start (NODE_EXTRA_CA_CERTS) and the webhook receiver can serve with it.

import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { chmodSync, copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
/** clients/typescript, from build/test/support. */
export const packageRoot = resolve(here, "..", "..", "..");
const repoRoot = resolve(packageRoot, "..", "..");
const venvBin = process.env.RELAY_VENV_BIN ?? join(repoRoot, ".venv", "bin");

export interface Identity {
  directory: string;
  cert: string;
  key: string;
}

export interface Served {
  baseUrl: string;
  apiKey: string;
  webhookSecret: string;
  dataDir: string;
  stop(): Promise<void>;
}

/** The certificate and key `relay serve` would make for itself, made by Relay's own code. */
export function makeIdentity(directory: string): Identity {
  const made = spawnSync(
    join(venvBin, "python"),
    [
      "-c",
      "import pathlib, sys; from relay.tls import ensure_self_signed; " +
        "ensure_self_signed(pathlib.Path(sys.argv[1]))",
      directory,
    ],
    { encoding: "utf8" },
  );
  if (made.status !== 0) {
    throw new Error(`could not make a TLS identity with ${venvBin}/python: ${made.stderr}`);
  }
  return { directory, cert: join(directory, "cert.pem"), key: join(directory, "key.pem") };
}

/** The identity run.ts made for this test run. */
export function testIdentity(): Identity {
  const directory = process.env.RELAY_TS_TEST_TLS;
  if (!directory) {
    throw new Error("RELAY_TS_TEST_TLS is unset: run the tests with `npm test`");
  }
  return { directory, cert: join(directory, "cert.pem"), key: join(directory, "key.pem") };
}

export async function startRelay(
  identity: Identity,
  environment: Record<string, string> = {},
): Promise<Served> {
  const dataDir = mkdtempSync(join(tmpdir(), "relay-ts-"));
  chmodSync(dataDir, 0o700);
  mkdirSync(join(dataDir, "tls"), { mode: 0o700 });
  copyFileSync(identity.cert, join(dataDir, "tls", "cert.pem"));
  copyFileSync(identity.key, join(dataDir, "tls", "key.pem"));
  const child = spawn(join(venvBin, "relay"), ["serve", "--demo", "--port", "0"], {
    env: {
      ...process.env,
      RELAY_DATA_DIR: dataDir,
      RELAY_HOST: "127.0.0.1",
      RELAY_LOG_LEVEL: "warning",
      ...environment,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const stop = () => stopped(child, dataDir);
  try {
    const baseUrl = await listening(child);
    const account = JSON.parse(readFileSync(join(dataDir, "demo-account.json"), "utf8")) as {
      test_key: string;
      webhook_secret: string;
    };
    return { baseUrl, apiKey: account.test_key, webhookSecret: account.webhook_secret, dataDir, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

function listening(child: ChildProcess): Promise<string> {
  return new Promise((resolvePromise, reject) => {
    let output = "";
    const timer = setTimeout(() => reject(new Error(`relay serve did not start:\n${output}`)), 30_000);
    const read = (chunk: Buffer) => {
      output += chunk.toString();
      const match = /Relay listening on (https:\/\/\S+)/.exec(output);
      if (match?.[1]) {
        clearTimeout(timer);
        resolvePromise(match[1]);
      }
    };
    child.stdout?.on("data", read);
    child.stderr?.on("data", read);
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`relay serve exited (${code}):\n${output}`));
    });
  });
}

async function stopped(child: ChildProcess, dataDir: string): Promise<void> {
  if (child.exitCode === null && child.signalCode === null) {
    const exited = new Promise((done) => child.once("exit", done));
    child.kill("SIGTERM");
    const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
    await exited;
    clearTimeout(timer);
  }
  rmSync(dataDir, { recursive: true, force: true });
}
