// verifyWebhook against webhooks signed here with node:crypto, the way
// internal/signing signs them, and against headers the Go signer made
// (fixtures/go-signed.json, fixtures/go-signed-ed25519.json).
import { createHash, createHmac, generateKeyPairSync, randomBytes, sign as cryptoSign, webcrypto } from "node:crypto";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";
import assert from "node:assert/strict";

import {
  callbackResponseBody,
  verifyCallback,
  verifyWebhook,
  verifyWebhookSignature,
  WebhookVerificationError,
} from "../dist/index.js";

const newSecret = () => `whsec_${randomBytes(32).toString("base64")}`;
const keyOf = (secret) => Buffer.from(secret.slice("whsec_".length), "base64");
const b64url = (buf) => Buffer.from(buf).toString("base64url");

/** A new Ed25519 key pair: the private KeyObject, and the public key as hookwheel shows it ("whpk_..."). */
function newKeyPair() {
  const { publicKey, privateKey } = generateKeyPairSync("ed25519");
  const raw = Buffer.from(publicKey.export({ format: "jwk" }).x, "base64url");
  return { privateKey, publicKey: `whpk_${raw.toString("base64")}` };
}

/**
 * Signs as Signer.Sign does: one entry per key, v1 for a "whsec_" secret and
 * v1a for a key pair (newKeyPair), the JWT with the first (HS256 or EdDSA).
 * `jwt` overrides parts of the token to make bad ones; `jwt.secret` signs it
 * instead of the first key.
 */
function sign(
  secrets,
  {
    id = "01a2021f-503b-7651-aff3-c59e9afa4a43",
    url = "https://receiver.example/hook",
    body = '{"hello":"world"}',
    at = nowSeconds(),
    jwt = {},
  } = {},
) {
  const content = Buffer.concat([Buffer.from(`${id}.${at}.`), Buffer.from(body)]);
  const signature = secrets
    .map((s) =>
      typeof s === "string"
        ? "v1," + createHmac("sha256", keyOf(s)).update(content).digest("base64")
        : "v1a," + cryptoSign(null, content, s.privateKey).toString("base64"),
    )
    .join(" ");
  const jwtKey = jwt.secret ?? secrets[0];
  const header = jwt.header ?? { alg: typeof jwtKey === "string" ? "HS256" : "EdDSA", typ: "JWT" };
  const claims = {
    iss: "hookwheel",
    sub: url,
    jti: id,
    iat: at,
    exp: at + 300,
    body: b64url(createHash("sha256").update(body).digest()),
    ...jwt.claims,
  };
  const input = `${b64url(JSON.stringify(header))}.${b64url(JSON.stringify(claims))}`;
  const mac =
    typeof jwtKey === "string"
      ? createHmac("sha256", keyOf(jwtKey)).update(input).digest()
      : cryptoSign(null, Buffer.from(input), jwtKey.privateKey);
  return {
    "webhook-id": id,
    "webhook-timestamp": String(at),
    "webhook-signature": signature,
    "Hookwheel-Signature": `${input}.${b64url(mac)}`,
  };
}

function nowSeconds() {
  return Math.floor(Date.now() / 1000);
}

async function refused(promise, reason) {
  await assert.rejects(promise, (err) => {
    assert.ok(err instanceof WebhookVerificationError, `want a WebhookVerificationError, got ${err}`);
    assert.equal(err.reason, reason, err.message);
    return true;
  });
}

describe("verifyWebhook", () => {
  it("accepts a webhook and returns its parsed body", async () => {
    const secret = newSecret();
    const headers = sign([secret]);
    assert.deepEqual(await verifyWebhook(secret, headers, '{"hello":"world"}'), { hello: "world" });
  });

  it("takes the body as bytes and the headers as a fetch Headers", async () => {
    const secret = newSecret();
    const body = '{"city":"Zürich","emoji":"🚀"}';
    const headers = new Headers(sign([secret], { body }));
    const bytes = new TextEncoder().encode(body);
    assert.deepEqual(await verifyWebhook([secret], headers, bytes), { city: "Zürich", emoji: "🚀" });
    assert.deepEqual(await verifyWebhook([secret], headers, Buffer.from(body)), { city: "Zürich", emoji: "🚀" });
    assert.deepEqual(await verifyWebhook([secret], headers, bytes.buffer), { city: "Zürich", emoji: "🚀" });
  });

  it("reads headers in any letter case, as Node and Express give them", async () => {
    const secret = newSecret();
    const lower = Object.fromEntries(Object.entries(sign([secret])).map(([k, v]) => [k.toLowerCase(), v]));
    const upper = Object.fromEntries(Object.entries(sign([secret])).map(([k, v]) => [k.toUpperCase(), v]));
    await verifyWebhook(secret, lower, '{"hello":"world"}');
    await verifyWebhook(secret, upper, '{"hello":"world"}');
  });

  it("verifies the headers the Go signer made, JWT and URL included", async () => {
    const fx = JSON.parse(readFileSync(new URL("./fixtures/go-signed.json", import.meta.url), "utf8"));
    const now = new Date((fx.signedAt + 10) * 1000);
    for (const secret of fx.secrets) {
      const got = await verifyWebhookSignature([secret], fx.headers, fx.body, { now });
      assert.equal(got.id, fx.headers["webhook-id"]);
      assert.equal(got.timestamp.getTime(), fx.signedAt * 1000);
      assert.equal(got.body, fx.body);
    }
    assert.deepEqual(await verifyWebhook(fx.secrets, fx.headers, fx.body, { now, url: fx.url }), {
      order: 42,
      note: "café ☕",
    });
    await refused(
      verifyWebhook(fx.secrets, fx.headers, fx.body, { now, url: "https://example.com/hooks/order" }),
      "jwt_subject",
    );
    await refused(verifyWebhook(fx.secrets, fx.headers, fx.body.replace("42", "43"), { now }), "no_matching_signature");
    await refused(
      verifyWebhook(fx.secrets, fx.headers, fx.body, { now: new Date((fx.signedAt + 301) * 1000) }),
      "timestamp_too_old",
    );
  });

  describe("secret rotation", () => {
    it("accepts a webhook signed with both secrets, holding either or both", async () => {
      const [current, previous] = [newSecret(), newSecret()];
      const headers = sign([current, previous]);
      const url = "https://receiver.example/hook";
      await verifyWebhook([current, previous], headers, '{"hello":"world"}', { url });
      await verifyWebhook([previous, current], headers, '{"hello":"world"}', { url });
      await verifyWebhook([current], headers, '{"hello":"world"}', { url });
    });

    it("accepts, before it holds the new secret, a webhook whose JWT the new secret signed", async () => {
      const [current, previous] = [newSecret(), newSecret()];
      const headers = sign([current, previous]);
      await verifyWebhook([previous], headers, '{"hello":"world"}');
      // Binding to the URL needs the JWT, so it needs the current secret.
      await refused(
        verifyWebhook([previous], headers, '{"hello":"world"}', { url: "https://receiver.example/hook" }),
        "jwt_signature",
      );
    });

    it("refuses a JWT the secret of the first entry does not verify", async () => {
      const [current, other] = [newSecret(), newSecret()];
      // The entry this receiver matches comes first, so the JWT must be its.
      const headers = sign([current], { jwt: { secret: other } });
      await refused(verifyWebhook([current], headers, '{"hello":"world"}'), "jwt_signature");
    });

    it("refuses a webhook signed with a secret it does not hold", async () => {
      const headers = sign([newSecret()]);
      await refused(verifyWebhook([newSecret(), newSecret()], headers, '{"hello":"world"}'), "no_matching_signature");
    });
  });

  it("refuses a tampered body, id or timestamp", async () => {
    const secret = newSecret();
    const headers = sign([secret]);
    await refused(verifyWebhook(secret, headers, '{"hello":"World"}'), "no_matching_signature");
    await refused(
      verifyWebhook(secret, { ...headers, "webhook-id": "another" }, '{"hello":"world"}'),
      "no_matching_signature",
    );
    const ts = String(Number(headers["webhook-timestamp"]) - 1);
    await refused(
      verifyWebhook(secret, { ...headers, "webhook-timestamp": ts }, '{"hello":"world"}'),
      "no_matching_signature",
    );
  });

  it("refuses signature entries of other versions or mangled", async () => {
    const secret = newSecret();
    const headers = sign([secret]);
    const mac = headers["webhook-signature"].slice(3);
    for (const bad of [`v2,${mac}`, `v1a,${mac}`, mac, `v1,${mac.slice(0, -2)}`, "v1,!!!!", ""]) {
      await refused(
        verifyWebhook(secret, { ...headers, "webhook-signature": bad }, '{"hello":"world"}'),
        bad === "" ? "missing_header" : "no_matching_signature",
      );
    }
    // Unknown versions beside a good entry are skipped, as Standard Webhooks says.
    await verifyWebhook(secret, { ...headers, "webhook-signature": `v2,abcd v1,${mac}` }, '{"hello":"world"}');
  });

  it("refuses a timestamp outside the tolerance, either way", async () => {
    const secret = newSecret();
    // One instant for signing and verifying: a second ticking between them
    // would move the edges.
    const t = nowSeconds();
    const now = new Date(t * 1000);
    // The JWT's own expiry is checked apart from the tolerance; kept valid here.
    const old = sign([secret], { at: t - 301, jwt: { claims: { exp: t + 60 } } });
    await refused(verifyWebhook(secret, old, '{"hello":"world"}', { now }), "timestamp_too_old");
    await verifyWebhook(secret, old, '{"hello":"world"}', { toleranceSeconds: 400, now });
    const future = sign([secret], { at: t + 301 });
    await refused(verifyWebhook(secret, future, '{"hello":"world"}', { now }), "timestamp_too_new");
    await refused(
      verifyWebhook(secret, { ...old, "webhook-timestamp": "1e9" }, '{"hello":"world"}'),
      "invalid_timestamp",
    );
  });

  it("refuses a webhook missing a header", async () => {
    const secret = newSecret();
    for (const name of ["webhook-id", "webhook-timestamp", "webhook-signature"]) {
      const headers = sign([secret]);
      delete headers[name];
      await assert.rejects(
        verifyWebhook(secret, headers, '{"hello":"world"}'),
        (err) => err.reason === "missing_header" && err.message.includes(name),
      );
    }
  });

  describe("Hookwheel-Signature", () => {
    const body = '{"hello":"world"}';
    const cases = [
      ["alg none", { header: { alg: "none", typ: "JWT" } }, "jwt_algorithm"],
      ["alg HS512", { header: { alg: "HS512", typ: "JWT" } }, "jwt_algorithm"],
      ["another secret", { secret: newSecret() }, "jwt_signature"],
      ["another issuer", { claims: { iss: "someone" } }, "jwt_issuer"],
      ["another jti", { claims: { jti: "another" } }, "jwt_id"],
      ["expired", { claims: { exp: nowSeconds() - 120 } }, "jwt_expired"],
      ["expired a minute ago", { claims: { exp: nowSeconds() - 60 } }, "jwt_expired"],
      ["no exp", { claims: { exp: undefined } }, "jwt_expired"],
      ["another body", { claims: { body: b64url(createHash("sha256").update("other").digest()) } }, "jwt_body"],
      ["a padded body hash", { claims: { body: createHash("sha256").update(body).digest("base64") } }, "jwt_body"],
    ];
    for (const [name, jwt, reason] of cases) {
      it(`refuses a token with ${name}`, async () => {
        const secret = newSecret();
        await refused(verifyWebhook(secret, sign([secret], { body, jwt }), body), reason);
      });
    }

    it("allows a minute of clock skew on exp", async () => {
      const secret = newSecret();
      await verifyWebhook(secret, sign([secret], { body, jwt: { claims: { exp: nowSeconds() - 55 } } }), body);
    });

    it("refuses a token that is not a JWT", async () => {
      const secret = newSecret();
      const headers = sign([secret], { body });
      const [h, c, s] = headers["Hookwheel-Signature"].split(".");
      for (const bad of [
        "garbage",
        `${h}.${c}`,
        `${h}.${c}.${s}.x`,
        `${h}.!!.${s}`,
        `${b64url("[1]")}.${c}.${s}`,
        `${h}.${c}.`,
      ]) {
        await refused(verifyWebhook(secret, { ...headers, "Hookwheel-Signature": bad }, body), "jwt_malformed");
      }
    });

    it("checks sub against the URL when one is given, and then requires the token", async () => {
      const secret = newSecret();
      const headers = sign([secret], { url: "https://receiver.example/hook?a=1" });
      await verifyWebhook(secret, headers, '{"hello":"world"}', { url: "https://receiver.example/hook?a=1" });
      await refused(
        verifyWebhook(secret, headers, '{"hello":"world"}', { url: "https://receiver.example/other" }),
        "jwt_subject",
      );
      const { "Hookwheel-Signature": _, ...withoutJWT } = headers;
      await verifyWebhook(secret, withoutJWT, '{"hello":"world"}');
      await refused(
        verifyWebhook(secret, withoutJWT, '{"hello":"world"}', { url: "https://receiver.example/hook?a=1" }),
        "jwt_missing",
      );
    });
  });

  it("returns undefined for an empty body, and refuses a body that is not JSON", async () => {
    const secret = newSecret();
    assert.equal(await verifyWebhook(secret, sign([secret], { body: "" }), ""), undefined);
    await refused(verifyWebhook(secret, sign([secret], { body: "plain text" }), "plain text"), "invalid_json");
    const got = await verifyWebhookSignature(secret, sign([secret], { body: "plain text" }), "plain text");
    assert.equal(got.body, "plain text");
  });

  it("throws a TypeError, not a verification error, for a bad secret or a parsed body", async () => {
    const secret = newSecret();
    const headers = sign([secret]);
    await assert.rejects(verifyWebhook("whsec_not base64!", headers, "{}"), TypeError);
    await assert.rejects(verifyWebhook("whsec_", headers, "{}"), TypeError);
    await assert.rejects(verifyWebhook([], headers, "{}"), TypeError);
    await assert.rejects(verifyWebhook(secret, headers, { hello: "world" }), TypeError);
  });

  it("accepts a secret without its whsec_ prefix, and a WebCrypto passed in", async () => {
    const secret = newSecret();
    const headers = sign([secret]);
    await verifyWebhook(secret.slice("whsec_".length), headers, '{"hello":"world"}', { crypto: webcrypto });
  });
  it("refuses options that would switch the timestamp check off", async () => {
    const secret = newSecret();
    const old = sign([secret], { at: 1_000_000_000 });
    for (const options of [{ toleranceSeconds: NaN }, { toleranceSeconds: Infinity }, { toleranceSeconds: -1 }, { now: new Date("nonsense") }, { now: NaN }]) {
      await assert.rejects(verifyWebhook(secret, old, '{"hello":"world"}', options), TypeError, JSON.stringify(String(Object.values(options)[0])));
    }
  });
});

describe("verifyWebhook with Ed25519 keys (v1a)", () => {
  const body = '{"hello":"world"}';
  const url = "https://receiver.example/hook";

  it("accepts a webhook signed by the key pair, with its public key, JWT (EdDSA) and URL included", async () => {
    const pair = newKeyPair();
    const headers = sign([pair]);
    assert.match(headers["webhook-signature"], /^v1a,[A-Za-z0-9+/]{86}==$/);
    assert.deepEqual(await verifyWebhook(pair.publicKey, headers, body, { url }), { hello: "world" });
    await refused(verifyWebhook(pair.publicKey, headers, body, { url: "https://receiver.example/other" }), "jwt_subject");
  });

  it("refuses another key pair's signature, a tampered body and a mangled entry", async () => {
    const pair = newKeyPair();
    const headers = sign([pair]);
    await refused(verifyWebhook(newKeyPair().publicKey, headers, body), "no_matching_signature");
    await refused(verifyWebhook(pair.publicKey, headers, '{"hello":"World"}'), "no_matching_signature");
    const sig = headers["webhook-signature"].slice(4);
    for (const bad of [`v1,${sig}`, `v1a,${sig.slice(0, -4)}`, "v1a,!!!!", `v1a,${Buffer.alloc(64).toString("base64")}`]) {
      await refused(verifyWebhook(pair.publicKey, { ...headers, "webhook-signature": bad }, body), "no_matching_signature");
    }
  });

  it("verifies a rotation from an HMAC secret to a key pair with either, the JWT with the public key", async () => {
    const [pair, previous] = [newKeyPair(), newSecret()];
    const headers = sign([pair, previous]);
    assert.match(headers["webhook-signature"], /^v1a,\S+ v1,\S+$/);
    await verifyWebhook([pair.publicKey], headers, body, { url });
    await verifyWebhook([previous, pair.publicKey], headers, body, { url });
    // The old secret verifies its v1 entry; the EdDSA JWT needs the public key.
    await verifyWebhook([previous], headers, body);
    await refused(verifyWebhook([previous], headers, body, { url }), "jwt_signature");
  });

  it("verifies a rotation from a key pair back to an HMAC secret with either", async () => {
    const [current, pair] = [newSecret(), newKeyPair()];
    const headers = sign([current, pair]);
    assert.match(headers["webhook-signature"], /^v1,\S+ v1a,\S+$/);
    await verifyWebhook([current], headers, body, { url });
    await verifyWebhook([pair.publicKey], headers, body);
    await refused(verifyWebhook([pair.publicKey], headers, body, { url }), "jwt_signature");
  });

  it("refuses a JWT another key pair signed beside the receiver's first entry", async () => {
    const pair = newKeyPair();
    await refused(verifyWebhook(pair.publicKey, sign([pair], { jwt: { secret: newKeyPair() } }), body), "jwt_signature");
  });

  it("never checks an HS256 token with a public key's bytes", async () => {
    const pair = newKeyPair();
    // An attacker who knows the public key MACs a token with its bytes as
    // the secret and claims HS256.
    const asSecret = `whsec_${pair.publicKey.slice("whpk_".length)}`;
    const forged = sign([pair], { jwt: { secret: asSecret } });
    await refused(verifyWebhook(pair.publicKey, forged, body), "jwt_signature");
  });

  it("verifies the headers the Go signer made during a rotation to Ed25519", async () => {
    const fx = JSON.parse(readFileSync(new URL("./fixtures/go-signed-ed25519.json", import.meta.url), "utf8"));
    const now = new Date((fx.signedAt + 10) * 1000);
    const [publicKey, previous] = fx.keys;
    assert.deepEqual(await verifyWebhook([publicKey], fx.headers, fx.body, { now, url: fx.url }), { order: 42 });
    await verifyWebhook([previous], fx.headers, fx.body, { now });
    await refused(verifyWebhook([publicKey], fx.headers, fx.body.replace("42", "43"), { now }), "no_matching_signature");
  });

  it("throws a TypeError for a public key that is not 32 bytes, never showing it", async () => {
    const headers = sign([newKeyPair()]);
    for (const bad of [`whpk_${randomBytes(31).toString("base64")}`, "whpk_not base64 at all!", "whpk_"]) {
      await assert.rejects(verifyWebhook(bad, headers, body), (err) => {
        assert.ok(err instanceof TypeError);
        if (bad.length > 8) assert.ok(!err.message.includes(bad.slice(5)), err.message);
        return true;
      });
    }
  });
});

describe("verifyCallback", () => {
  const delivered = JSON.stringify({
    task_id: "019aa8f2-4c3e-7b21-9d5e-3f0c2a7b8e41",
    status: "delivered",
    attempt: 2,
    error: null,
    response: { status_code: 200, headers: { "Content-Type": "text/plain" }, body: "/wBvaw==", body_truncated: false },
    added_later: true,
  });

  it("returns the payload of a signed callback, and the response's bytes", async () => {
    const secret = newSecret();
    const payload = await verifyCallback(secret, sign([secret], { body: delivered }), delivered);
    assert.equal(payload.task_id, "019aa8f2-4c3e-7b21-9d5e-3f0c2a7b8e41");
    assert.equal(payload.status, "delivered");
    assert.equal(payload.attempt, 2);
    assert.equal(payload.response.status_code, 200);
    assert.equal(payload.added_later, true, "fields it does not know are kept");
    assert.deepEqual([...callbackResponseBody(payload)], [0xff, 0, 0x6f, 0x6b]);
  });

  it("reads a callback of a death with no response", async () => {
    const secret = newSecret();
    const body = JSON.stringify({
      task_id: "019aa8f2-4c3e-7b21-9d5e-3f0c2a7b8e41",
      status: "dead",
      attempt: 10,
      error: "no response within the 30s timeout",
      response: { status_code: null, headers: {}, body: "", body_truncated: false },
    });
    const payload = await verifyCallback(secret, sign([secret], { body }), body);
    assert.equal(payload.status, "dead");
    assert.equal(payload.response.status_code, null);
    assert.equal(callbackResponseBody(payload).length, 0);
  });

  it("reads a callback of an expiry before any attempt, and refuses attempt 0 of any other status", async () => {
    const secret = newSecret();
    const expiry = (status) => JSON.stringify({
      task_id: "019aa8f2-4c3e-7b21-9d5e-3f0c2a7b8e41",
      status,
      attempt: 0,
      error: "expired at 2026-11-28T14:10:00Z before attempt 1 could start",
      response: { status_code: null, headers: {}, body: "", body_truncated: false },
    });
    const body = expiry("expired");
    const payload = await verifyCallback(secret, sign([secret], { body }), body);
    assert.equal(payload.status, "expired");
    assert.equal(payload.attempt, 0);
    const dead = expiry("dead");
    await refused(verifyCallback(secret, sign([secret], { body: dead }), dead), "invalid_callback");
  });

  it("refuses a forged callback, and a signed body that is not a callback", async () => {
    const secret = newSecret();
    await refused(verifyCallback(newSecret(), sign([secret], { body: delivered }), delivered), "no_matching_signature");
    for (const body of ['{"hello":"world"}', '{"task_id":"x","status":"retrying","attempt":1,"response":{"body":""}}']) {
      await refused(verifyCallback(secret, sign([secret], { body }), body), "invalid_callback");
    }
  });
});
