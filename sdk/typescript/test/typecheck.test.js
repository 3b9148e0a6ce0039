// The published declarations type-check code a user would write
// (test/types/consumer.ts), resolved as a user's TypeScript resolves them.
import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { it } from "node:test";
import assert from "node:assert/strict";

const pkgDir = fileURLToPath(new URL("..", import.meta.url));
const tsc = fileURLToPath(new URL("../node_modules/typescript/bin/tsc", import.meta.url));

for (const resolution of [
  ["NodeNext", "NodeNext"],
  ["ESNext", "Bundler"],
]) {
  it(`dist's declarations type-check a user's code (module ${resolution[0]}, resolution ${resolution[1]})`, async () => {
    const args = [
      tsc,
      "-p",
      "test/types/tsconfig.json",
      "--module",
      resolution[0],
      "--moduleResolution",
      resolution[1],
    ];
    const result = await promisify(execFile)(process.execPath, args, { cwd: pkgDir }).catch((err) => err);
    assert.equal(result.code ?? 0, 0, `tsc:\n${result.stdout}${result.stderr}`);
  });
}
