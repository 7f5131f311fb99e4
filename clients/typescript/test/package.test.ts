import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { it } from "node:test";
import { packageRoot } from "./support/server.js";

const manifest = JSON.parse(readFileSync(join(packageRoot, "package.json"), "utf8")) as Record<string, unknown>;

it("the package has no runtime dependencies", () => {
  assert.equal(manifest.dependencies, undefined);
  assert.equal(manifest.peerDependencies, undefined);
  assert.equal(manifest.optionalDependencies, undefined);
});

it("the package holds only dist/, README.md, LICENSE and package.json", () => {
  const npm = process.platform === "win32" ? "npm.cmd" : "npm";
  const output = execFileSync(npm, ["pack", "--dry-run", "--json", "--ignore-scripts"], {
    cwd: packageRoot,
    encoding: "utf8",
  });
  const [packed] = JSON.parse(output) as [{ files: { path: string }[] }];
  const paths = packed.files.map((file) => file.path);
  const strays = paths.filter(
    (path) => !(path.startsWith("dist/") || ["README.md", "LICENSE", "package.json"].includes(path)),
  );
  assert.deepEqual(strays, []);
  assert.ok(paths.includes("dist/index.js") && paths.includes("dist/index.d.ts"));
  assert.ok(paths.includes("README.md") && paths.includes("LICENSE"));
  assert.ok(!paths.some((path) => path.endsWith(".ts") && !path.endsWith(".d.ts")), "no TypeScript sources");
});

it("the client reports the package's version", async () => {
  const { VERSION } = await import("@relay-otp/client");
  assert.equal(VERSION, manifest.version);
});
