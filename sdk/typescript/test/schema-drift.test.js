// src/schema.ts must be what `npm run generate` makes from the OpenAPI
// document now: a change to openapi/openapi.yaml without regenerating fails
// here, not in a user's type checker.
import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { it } from "node:test";
import assert from "node:assert/strict";

const pkgDir = fileURLToPath(new URL("..", import.meta.url));

it("src/schema.ts is up to date with openapi/openapi.yaml (else: npm run generate)", async () => {
  const pkg = JSON.parse(await readFile(join(pkgDir, "package.json"), "utf8"));
  // The generate script's own command line, with the output moved to a
  // temporary file, so that the two cannot drift apart.
  const args = pkg.scripts.generate.split(" ");
  assert.equal(args[0], "openapi-typescript");
  const out = args.indexOf("-o");
  assert.ok(out > 0, "the generate script names its output with -o");
  const dir = await mkdtemp(join(tmpdir(), "hookwheel-schema-"));
  try {
    const fresh = join(dir, "schema.ts");
    args.splice(out, 2, "-o", fresh);
    const cli = join(pkgDir, "node_modules", "openapi-typescript", "bin", "cli.js");
    await promisify(execFile)(process.execPath, [cli, ...args.slice(1)], { cwd: pkgDir });
    const want = await readFile(fresh, "utf8");
    const have = await readFile(join(pkgDir, "src", "schema.ts"), "utf8");
    if (want !== have) {
      const a = have.split("\n");
      const b = want.split("\n");
      let line = 0;
      while (line < a.length && a[line] === b[line]) line++;
      assert.fail(
        `src/schema.ts differs from the OpenAPI document from line ${line + 1}:\n` +
          `  committed: ${JSON.stringify(a[line])}\n  generated: ${JSON.stringify(b[line])}\n` +
          "run `npm run generate` in sdk/typescript and commit src/schema.ts",
      );
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
