// What `npm pack` would publish: the built ESM and its declarations, the
// README and package.json, and nothing else (no sources, tests or fixtures).
import { execFile } from "node:child_process";
import { readFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { it } from "node:test";
import assert from "node:assert/strict";

const pkgDir = fileURLToPath(new URL("..", import.meta.url));

it("npm pack publishes dist and README only", async () => {
  // --ignore-scripts: prepack would build again, and `npm test` has just built.
  const { stdout } = await promisify(execFile)("npm", ["pack", "--dry-run", "--json", "--ignore-scripts"], {
    cwd: pkgDir,
    env: { ...process.env, npm_config_loglevel: "error" },
  });
  const [report] = JSON.parse(stdout);
  assert.equal(report.name, "@hookwheel/sdk");
  const files = report.files.map((f) => f.path).sort();
  for (const want of [
    "package.json",
    "README.md",
    "dist/index.js",
    "dist/index.d.ts",
    "dist/webhook.js",
    "dist/webhook.d.ts",
    "dist/schema.d.ts",
  ]) {
    assert.ok(files.includes(want), `${want} is not in the package: ${files.join(", ")}`);
  }
  const stray = files.filter(
    (f) => !(f === "package.json" || f === "README.md" || /^dist\/[a-z]+\.(js|d\.ts)$/.test(f)),
  );
  assert.deepEqual(stray, [], "files the package should not ship");
});

it("package.json's exports point at files that exist and load", async () => {
  const pkg = JSON.parse(await readFile(new URL("../package.json", import.meta.url), "utf8"));
  assert.equal(pkg.type, "module");
  for (const [entry, target] of Object.entries(pkg.exports)) {
    if (typeof target === "string") continue;
    await readFile(new URL(`../${target.types}`, import.meta.url));
    const mod = await import(new URL(`../${target.default}`, import.meta.url).href);
    assert.equal(typeof mod.verifyWebhook, "function", `${entry} exports verifyWebhook`);
  }
  // Imported by its own name, as a user would, through exports.
  const self = await import("@hookwheel/sdk");
  assert.equal(typeof self.createClient, "function");
  assert.equal(typeof self.HookwheelError, "function");
  assert.equal(typeof (await import("@hookwheel/sdk/webhook")).WebhookVerificationError, "function");
});
