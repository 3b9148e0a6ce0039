// Signing up against a scripted fetch: what is sent (no credential), how the
// answer and the refusals are read, and that a refusal is not retried.
import { it } from "node:test";
import assert from "node:assert/strict";

import { HookwheelError, signUp, signupMode } from "../dist/index.js";

function scripted(answers) {
  const requests = [];
  return {
    requests,
    options: {
      baseUrl: "http://hookwheel.test/",
      fetch: async (request) => {
        requests.push({ method: request.method, url: request.url, auth: request.headers.get("Authorization"), body: await request.text() });
        return answers.shift();
      },
    },
  };
}

const json = (status, body, headers = {}) =>
  new Response(JSON.stringify(body), { status, headers: { "Content-Type": "application/json", ...headers } });

it("signupMode reads the server's mode", async () => {
  const s = scripted([json(200, { mode: "invite" })]);
  assert.equal(await signupMode(s.options), "invite");
  assert.equal(s.requests[0].url, "http://hookwheel.test/v1/signup");
  assert.equal(s.requests[0].auth, null);
});

it("signUp posts the name and code, without a credential, and returns the credentials", async () => {
  const created = { tenant: { id: "019ac9a0-9f8e-7d6c-8b5a-4f3e2d1c0b0a", name: "acme" }, api_key: "hw_a_b", signing_secret: "whsec_x" };
  const s = scripted([json(201, created)]);
  assert.deepEqual(await signUp(s.options, "acme", "hwinv_code"), created);
  assert.equal(s.requests[0].method, "POST");
  assert.equal(s.requests[0].auth, null);
  assert.deepEqual(JSON.parse(s.requests[0].body), { name: "acme", invite_code: "hwinv_code" });

  const open = scripted([json(201, created)]);
  await signUp(open.options, "acme");
  assert.deepEqual(JSON.parse(open.requests[0].body), { name: "acme" }, "no code, no invite_code");
});

it("signUp throws the refusal as a HookwheelError, once", async () => {
  const s = scripted([
    json(429, { type: "urn:hookwheel:problem:signup-limited", title: "Too many sign-ups", status: 429, detail: "retry in 60 s" },
      { "Retry-After": "60" }),
  ]);
  await assert.rejects(signUp(s.options, "acme"), (err) => {
    assert.ok(err instanceof HookwheelError);
    assert.equal(err.status, 429);
    assert.equal(err.type, "urn:hookwheel:problem:signup-limited");
    assert.equal(err.retryAfterMs, 60_000);
    return true;
  });
  assert.equal(s.requests.length, 1);
  await assert.rejects(signupMode({ baseUrl: "ftp://x" }), TypeError);
});
