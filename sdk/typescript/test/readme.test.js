// The TypeScript receiver of the root README.md, compiled as it is written
// and run against webhooks signed here the way hookwheel signs them: the
// snippet users copy cannot rot unnoticed.
import { createHmac, randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import ts from "typescript";

const readme = readFileSync(new URL("../../../README.md", import.meta.url), "utf8");
const section = readme.slice(readme.indexOf("### Receiving webhooks"));
const snippet = /```ts\n([\s\S]*?)```/.exec(section)?.[1];

// Compiled into a folder of this package, so that "@hookwheel/sdk/webhook"
// resolves to this package's own build through its exports.
const dir = mkdtempSync(join(new URL("../", import.meta.url).pathname, ".readme-"));
after(() => rmSync(dir, { recursive: true, force: true }));

async function load() {
  assert.ok(snippet, "README.md's Receiving webhooks section has a ```ts block");
  const check = ts.transpileModule(snippet, {
    reportDiagnostics: true,
    compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022, strict: true },
  });
  assert.deepEqual(check.diagnostics, [], "the snippet is valid TypeScript");
  const file = join(dir, "receiver.mjs");
  writeFileSync(file, check.outputText);
  return import(file);
}

const secret = `whsec_${randomBytes(32).toString("base64")}`;

function signed(body, { id = "01a2021f-503b-7651-aff3-c59e9afa4a43", at = Math.floor(Date.now() / 1000), key = secret } = {}) {
  const mac = createHmac("sha256", Buffer.from(key.slice("whsec_".length), "base64")).update(`${id}.${at}.${body}`).digest("base64");
  return new Request("https://receiver.example/hooks", {
    method: "POST",
    body,
    headers: { "webhook-id": id, "webhook-timestamp": String(at), "webhook-signature": `v1,${mac}` },
  });
}

describe("README receiver", () => {
  it("hands a verified webhook to handle and answers 204", async () => {
    const { handleWebhook } = await load();
    const seen = [];
    const res = await handleWebhook(signed('{"order":42}'), secret, async (id, payload) => seen.push([id, payload]));
    assert.equal(res.status, 204);
    assert.deepEqual(seen, [["01a2021f-503b-7651-aff3-c59e9afa4a43", { order: 42 }]]);
  });

  it("refuses a forged or stale webhook with 401, handling nothing", async () => {
    const { handleWebhook } = await load();
    const other = `whsec_${randomBytes(32).toString("base64")}`;
    for (const req of [signed("{}", { key: other }), signed("{}", { at: Math.floor(Date.now() / 1000) - 600 })]) {
      const res = await handleWebhook(req, secret, async () => assert.fail("handled a webhook that does not verify"));
      assert.equal(res.status, 401);
    }
  });

  it("answers 503 when handling fails, so that hookwheel retries", async () => {
    const { handleWebhook } = await load();
    const res = await handleWebhook(signed("{}"), secret, async () => {
      throw new Error("database down");
    });
    assert.equal(res.status, 503);
  });
});
