// Verification of the webhooks hookwheel sends, with WebCrypto only
// (globalThis.crypto.subtle) so that the same code runs in Node, Deno, Bun,
// browsers and edge runtimes, none of which share another crypto API.
//
// What is checked mirrors internal/signing/signing.go, which signs them:
//
//   - Standard Webhooks: webhook-signature holds space-separated entries, one
//     per key the server signs with (several during a rotation), each over
//     "<webhook-id>.<webhook-timestamp>.<body>": "v1,<base64>" the HMAC-SHA256
//     keyed by the base64-decoded part of a "whsec_..." secret, or
//     "v1a,<base64>" the Ed25519 signature by a key pair whose public key the
//     receiver holds as "whpk_<base64 of 32 bytes>".
//   - Hookwheel-Signature: a JWT signed by the server's current key (the
//     first): HS256 keyed by a secret, or EdDSA by an Ed25519 key, with iss
//     "hookwheel", sub the task's URL, jti the webhook-id, iat, exp and body,
//     the unpadded base64url SHA-256 of the body.

import type { components } from "./schema.js";

/**
 * The body of a callback webhook: what the final attempt of a task got, sent to
 * the task's `callback` once it is delivered and to its `failure_callback` once
 * it is dead or expired (`CallbackPayload` in the API reference). `response.body` is the
 * first 64 KiB of the receiver's answer in base64: `callbackResponseBody`
 * decodes it.
 */
export type CallbackPayload = components["schemas"]["CallbackPayload"];

/** Why a webhook was refused; `WebhookVerificationError.reason`. */
export type WebhookFailure =
  | "missing_header"
  | "invalid_timestamp"
  | "timestamp_too_old"
  | "timestamp_too_new"
  | "no_matching_signature"
  | "jwt_missing"
  | "jwt_malformed"
  | "jwt_algorithm"
  | "jwt_signature"
  | "jwt_issuer"
  | "jwt_id"
  | "jwt_expired"
  | "jwt_body"
  | "jwt_subject"
  | "invalid_json"
  | "invalid_callback";

/** A webhook that failed verification; `reason` says which check, `message` says it for a person. */
export class WebhookVerificationError extends Error {
  override readonly name = "WebhookVerificationError";
  readonly reason: WebhookFailure;

  constructor(reason: WebhookFailure, message: string) {
    super(message);
    this.reason = reason;
  }
}

/**
 * Request headers: a fetch `Headers` (Hono, edge runtimes, Deno, Bun), or a
 * plain object such as Node's `req.headers` (Express), looked up in any letter
 * case.
 */
export type WebhookHeaders =
  | { get(name: string): string | null }
  | Record<string, string | string[] | undefined | null>;

/** The raw request body, exactly as received: text, or bytes (a Node Buffer is a Uint8Array). */
export type WebhookBody = string | Uint8Array | ArrayBuffer;

export interface VerifyOptions {
  /**
   * The URL the webhook was sent to, as the task names it. When given, the
   * Hookwheel-Signature JWT is required and its `sub` must equal it, so that a
   * webhook captured on its way to another receiver of the same tenant is
   * refused here.
   */
  url?: string;
  /** How far webhook-timestamp may be from now, in seconds (default 300, as Standard Webhooks says). */
  toleranceSeconds?: number;
  /** The current time (default now); for tests. */
  now?: Date | number;
  /**
   * The WebCrypto implementation (default `globalThis.crypto`). Node 18 has no
   * global one unless started with `--experimental-global-webcrypto`: pass
   * `(await import("node:crypto")).webcrypto` there.
   */
  crypto?: Crypto;
}

/** A verified webhook. */
export interface VerifiedWebhook {
  /** webhook-id: the task id, the same on every attempt; deduplicate on it. */
  id: string;
  /** webhook-timestamp: when this attempt was signed. */
  timestamp: Date;
  /** The body decoded as UTF-8 (task bodies are text). */
  body: string;
}

// Bytes WebCrypto takes: TypeScript's BufferSource excludes views of a
// SharedArrayBuffer.
type Bytes = Uint8Array<ArrayBuffer>;

const DEFAULT_TOLERANCE_SECONDS = 5 * 60;
const SECRET_PREFIX = "whsec_";
const PUBLIC_KEY_PREFIX = "whpk_";
const ED25519_PUBLIC_KEY_BYTES = 32;
const ED25519_SIGNATURE_BYTES = 64;
const JWT_ISSUER = "hookwheel";
// How far past its exp a JWT is still taken: the server's clock and the
// receiver's never agree to the second, and the token lives only as long as
// the timestamp's tolerance.
const JWT_CLOCK_SKEW_SECONDS = 60;

/**
 * Verifies a webhook from hookwheel and returns its body parsed as JSON
 * (undefined for an empty body). Throws WebhookVerificationError when any
 * check fails: see verifyWebhookSignature. A body that verifies but is not
 * JSON is refused with reason `invalid_json`; use verifyWebhookSignature for
 * webhooks whose body is not JSON.
 *
 * `secrets` is the tenant's signing secret (`whsec_...`) or Ed25519 public key
 * (`whpk_...`, as `GET /v1/signing-secrets` shows it), or several during a
 * rotation: a webhook signed with any of them is accepted.
 */
export async function verifyWebhook<T = unknown>(
  secrets: string | readonly string[],
  headers: WebhookHeaders,
  body: WebhookBody,
  options: VerifyOptions = {},
): Promise<T> {
  const verified = await verifyWebhookSignature(secrets, headers, body, options);
  if (verified.body === "") return undefined as T;
  try {
    return JSON.parse(verified.body) as T;
  } catch {
    throw new WebhookVerificationError("invalid_json", "the webhook's signature is valid but its body is not JSON");
  }
}

/**
 * Verifies a callback webhook (see `callback` on a task) as verifyWebhook does
 * any webhook, and returns its payload. A body that verifies but is not a
 * callback's (no `task_id`, a `status` other than delivered, dead or expired, no
 * attempt number, no `response`) is refused with reason `invalid_callback`.
 * Fields it does not know are kept, so that a receiver keeps working when
 * hookwheel adds some. The callback's webhook-id is the callback task's own
 * id, not the id of the task it reports on (`task_id`).
 */
export async function verifyCallback(
  secrets: string | readonly string[],
  headers: WebhookHeaders,
  body: WebhookBody,
  options: VerifyOptions = {},
): Promise<CallbackPayload> {
  const payload = await verifyWebhook<unknown>(secrets, headers, body, options);
  if (!isCallbackPayload(payload)) {
    throw new WebhookVerificationError(
      "invalid_callback",
      "the webhook's signature is valid but its body is not a callback's (task_id, status, attempt, response)",
    );
  }
  return payload;
}

/** The bytes of the response a callback reports (its first 64 KiB: `body_truncated` says whether there was more). */
export function callbackResponseBody(payload: CallbackPayload): Uint8Array {
  if (payload.response.body === "") return new Uint8Array(0);
  const bytes = decodeBase64(payload.response.body);
  if (bytes === undefined) throw new TypeError("callbackResponseBody: response.body is not standard base64");
  return bytes;
}

function isCallbackPayload(v: unknown): v is CallbackPayload {
  if (typeof v !== "object" || v === null) return false;
  const p = v as Record<string, unknown>;
  const r = p["response"];
  return (
    typeof p["task_id"] === "string" &&
    (p["status"] === "delivered" || p["status"] === "dead" || p["status"] === "expired") &&
    typeof p["attempt"] === "number" &&
    // An expiry before the first attempt reports attempt 0.
    (p["attempt"] >= 1 || (p["status"] === "expired" && p["attempt"] === 0)) &&
    typeof r === "object" &&
    r !== null &&
    typeof (r as Record<string, unknown>)["body"] === "string"
  );
}

/**
 * Verifies a webhook from hookwheel without interpreting its body:
 *
 * 1. webhook-id, webhook-timestamp and webhook-signature are present, and the
 *    timestamp is within `toleranceSeconds` of now (replays of old requests);
 * 2. one of webhook-signature's entries signs `<id>.<timestamp>.<body>` under
 *    one of `secrets` (Standard Webhooks): a `v1` entry is its HMAC-SHA256 under
 *    a `whsec_` secret, compared in constant time; a `v1a` entry its Ed25519
 *    signature, checked with a `whpk_` public key;
 * 3. when Hookwheel-Signature is present, or `options.url` is given: it is a
 *    JWT signed with one of `secrets` (HS256 with a secret, EdDSA with a public
 *    key), with `iss` "hookwheel", `jti` the webhook-id, `exp` not past
 *    (allowing a minute of clock skew), `body` the base64url SHA-256 of the
 *    body, and `sub` equal to `options.url` when given.
 *
 * The server signs the JWT with its current key only, and the Standard
 * Webhooks signature with every key still in its grace period. So during a
 * rotation a receiver not yet given the new key verifies the latter but
 * cannot verify the JWT: when the only keys that matched signed a later
 * entry of webhook-signature, not the first, a JWT none of `secrets` verifies
 * is not held against the webhook, unless `options.url` asks for the JWT.
 * This gives nothing away: the JWT was optional to begin with, and anyone
 * able to send the request could have dropped the header.
 *
 * `body` must be the raw body as received, not a re-serialized parse of it.
 * Throws a TypeError when a secret is not a valid signing secret or public
 * key, and an Error when a public key is given to a runtime whose WebCrypto
 * has no Ed25519 (Node before 18.4, older browsers).
 */
export async function verifyWebhookSignature(
  secrets: string | readonly string[],
  headers: WebhookHeaders,
  body: WebhookBody,
  options: VerifyOptions = {},
): Promise<VerifiedWebhook> {
  const subtle = (options.crypto ?? globalThis.crypto)?.subtle;
  if (!subtle) {
    throw new Error(
      "verifyWebhook needs WebCrypto: globalThis.crypto.subtle is missing (Node 18: pass options.crypto = (await import('node:crypto')).webcrypto)",
    );
  }
  const secretList = typeof secrets === "string" ? [secrets] : [...secrets];
  if (secretList.length === 0) throw new TypeError("verifyWebhook: no signing secret given");
  const decoded = secretList.map((s, i) => decodeKey(s, i));

  const id = header(headers, "webhook-id");
  const timestamp = header(headers, "webhook-timestamp");
  const signature = header(headers, "webhook-signature");
  if (!id || !timestamp || !signature) {
    const missing = [!id && "webhook-id", !timestamp && "webhook-timestamp", !signature && "webhook-signature"].filter(
      Boolean,
    );
    throw new WebhookVerificationError("missing_header", `missing header ${missing.join(", ")}`);
  }

  const nowMs =
    options.now === undefined ? Date.now() : options.now instanceof Date ? options.now.getTime() : options.now;
  const tolerance = options.toleranceSeconds ?? DEFAULT_TOLERANCE_SECONDS;
  // NaN (a tolerance read from an unset variable, an invalid Date) would make
  // every comparison below false and accept a webhook of any age.
  if (!Number.isFinite(nowMs)) throw new TypeError("verifyWebhook: options.now is not a valid time");
  if (!Number.isFinite(tolerance) || tolerance < 0) {
    throw new TypeError("verifyWebhook: options.toleranceSeconds must be a finite number of seconds, at least 0");
  }
  const nowSeconds = Math.floor(nowMs / 1000);
  if (!/^\d{1,15}$/.test(timestamp)) {
    throw new WebhookVerificationError(
      "invalid_timestamp",
      `webhook-timestamp ${JSON.stringify(timestamp)} is not Unix seconds`,
    );
  }
  const ts = Number(timestamp);
  if (ts < nowSeconds - tolerance) {
    throw new WebhookVerificationError(
      "timestamp_too_old",
      `webhook-timestamp is ${nowSeconds - ts}s old, more than the ${tolerance}s allowed`,
    );
  }
  if (ts > nowSeconds + tolerance) {
    throw new WebhookVerificationError(
      "timestamp_too_new",
      `webhook-timestamp is ${ts - nowSeconds}s ahead of now, more than the ${tolerance}s allowed`,
    );
  }

  const bodyBytes = toBytes(body);
  const keys = await importKeys(subtle, decoded);

  // Standard Webhooks. The entries are decoded once and every key checked
  // against each of its kind, so that which entry a key signed is known: the
  // JWT check below needs it.
  const signed = concat(utf8(`${id}.${timestamp}.`), bodyBytes);
  const entries = signature.split(" ").map(decodeEntry);
  let firstMatch = -1;
  const matched = (i: number) => {
    if (firstMatch < 0 || i < firstMatch) firstMatch = i;
  };
  for (const key of keys.hmac) {
    const mac = new Uint8Array(await subtle.sign("HMAC", key, signed));
    entries.forEach((entry, i) => {
      if (entry?.version === "v1" && timingSafeEqual(mac, entry.signature)) matched(i);
    });
  }
  for (const key of keys.ed25519) {
    for (const [i, entry] of entries.entries()) {
      if (entry?.version !== "v1a" || entry.signature.length !== ED25519_SIGNATURE_BYTES) continue;
      if (await subtle.verify("Ed25519", key, entry.signature, signed)) matched(i);
    }
  }
  if (firstMatch < 0) {
    throw new WebhookVerificationError(
      "no_matching_signature",
      "no webhook-signature entry matches the body under any of the secrets",
    );
  }

  const token = header(headers, "hookwheel-signature");
  if (!token) {
    if (options.url !== undefined) {
      throw new WebhookVerificationError("jwt_missing", "missing header Hookwheel-Signature, needed to check the URL");
    }
  } else {
    await verifyJWT(subtle, keys, token, { id, bodyBytes, nowSeconds, url: options.url, mayLackKey: firstMatch > 0 });
  }

  return { id, timestamp: new Date(ts * 1000), body: new TextDecoder().decode(bodyBytes) };
}

/** A receiver's keys, imported for WebCrypto: HMAC secrets and Ed25519 public keys. */
interface Keys {
  hmac: CryptoKey[];
  ed25519: CryptoKey[];
}

async function importKeys(subtle: SubtleCrypto, decoded: DecodedKey[]): Promise<Keys> {
  const keys: Keys = { hmac: [], ed25519: [] };
  for (const k of decoded) {
    if (k.kind === "hmac") {
      keys.hmac.push(await subtle.importKey("raw", k.bytes, { name: "HMAC", hash: "SHA-256" }, false, ["sign"]));
      continue;
    }
    try {
      keys.ed25519.push(await subtle.importKey("raw", k.bytes, { name: "Ed25519" }, false, ["verify"]));
    } catch (err) {
      throw new Error(
        `verifyWebhook: this runtime's WebCrypto cannot import an Ed25519 public key (Node 18.4 or later, Deno, Bun, Cloudflare Workers and current browsers can): ${String(err)}`,
      );
    }
  }
  return keys;
}

/** One entry of webhook-signature: its version and signature bytes, or undefined for one neither v1 nor v1a. */
function decodeEntry(entry: string): { version: "v1" | "v1a"; signature: Bytes } | undefined {
  const comma = entry.indexOf(",");
  const version = entry.slice(0, comma);
  if (comma < 0 || (version !== "v1" && version !== "v1a")) return undefined;
  const signature = decodeBase64(entry.slice(comma + 1));
  return signature ? { version: version === "v1" ? "v1" : "v1a", signature } : undefined;
}

async function verifyJWT(
  subtle: SubtleCrypto,
  keys: Keys,
  token: string,
  want: { id: string; bodyBytes: Bytes; nowSeconds: number; url: string | undefined; mayLackKey: boolean },
): Promise<void> {
  const parts = token.split(".");
  const [encHeader, encClaims, encSig] = parts;
  if (parts.length !== 3 || !encHeader || !encClaims || !encSig) {
    throw new WebhookVerificationError("jwt_malformed", "Hookwheel-Signature is not a JWT (three base64url parts)");
  }
  const jwtHeader = decodeJSON(encHeader);
  const claims = decodeJSON(encClaims);
  const sig = decodeBase64URL(encSig);
  if (!jwtHeader || !claims || !sig) {
    throw new WebhookVerificationError(
      "jwt_malformed",
      "Hookwheel-Signature is not a JWT (its parts are not base64url JSON)",
    );
  }
  // HS256, checked with the secrets only, or EdDSA, with the public keys
  // only: a token naming another algorithm ("none", or RS256) is refused
  // before anything else, and a public key is never taken for an HMAC key.
  if (jwtHeader.alg !== "HS256" && jwtHeader.alg !== "EdDSA") {
    throw new WebhookVerificationError(
      "jwt_algorithm",
      `Hookwheel-Signature alg is ${JSON.stringify(jwtHeader.alg)}, want "HS256" or "EdDSA"`,
    );
  }

  const signingInput = utf8(`${encHeader}.${encClaims}`);
  let verified = false;
  if (jwtHeader.alg === "HS256") {
    for (const key of keys.hmac) {
      const mac = new Uint8Array(await subtle.sign("HMAC", key, signingInput));
      if (timingSafeEqual(mac, sig)) verified = true;
    }
  } else if (sig.length === ED25519_SIGNATURE_BYTES) {
    for (const key of keys.ed25519) {
      if (await subtle.verify("Ed25519", key, sig, signingInput)) verified = true;
    }
  }
  if (!verified) {
    if (want.mayLackKey && want.url === undefined) return;
    throw new WebhookVerificationError("jwt_signature", "Hookwheel-Signature is not signed by any of the secrets");
  }

  if (claims.iss !== JWT_ISSUER) {
    throw new WebhookVerificationError(
      "jwt_issuer",
      `Hookwheel-Signature iss is ${JSON.stringify(claims.iss)}, want "${JWT_ISSUER}"`,
    );
  }
  if (claims.jti !== want.id) {
    throw new WebhookVerificationError("jwt_id", "Hookwheel-Signature jti is not the webhook-id");
  }
  if (typeof claims.exp !== "number" || claims.exp + JWT_CLOCK_SKEW_SECONDS <= want.nowSeconds) {
    throw new WebhookVerificationError("jwt_expired", "Hookwheel-Signature has expired");
  }
  const bodySum = encodeBase64URL(new Uint8Array(await subtle.digest("SHA-256", want.bodyBytes)));
  if (claims.body !== bodySum) {
    throw new WebhookVerificationError("jwt_body", "Hookwheel-Signature body hash does not match the body");
  }
  if (want.url !== undefined && claims.sub !== want.url) {
    throw new WebhookVerificationError(
      "jwt_subject",
      `Hookwheel-Signature sub is ${JSON.stringify(claims.sub)}, not the URL ${JSON.stringify(want.url)}`,
    );
  }
}

/** A receiver's key, decoded: an HMAC secret's bytes or an Ed25519 public key's. */
interface DecodedKey {
  kind: "hmac" | "ed25519";
  bytes: Bytes;
}

/**
 * Decodes a key: "whpk_" and the standard base64 of a 32-byte Ed25519 public
 * key, or a signing secret, "whsec_" and standard base64 (or the base64 alone).
 */
function decodeKey(secret: string, index: number): DecodedKey {
  if (secret.startsWith(PUBLIC_KEY_PREFIX)) {
    const key = decodeBase64(secret.slice(PUBLIC_KEY_PREFIX.length));
    if (!key || key.length !== ED25519_PUBLIC_KEY_BYTES) {
      // The index, never the key, says which one is wrong.
      throw new TypeError(
        `verifyWebhook: public key ${index} is not "whpk_" followed by the standard base64 of 32 bytes`,
      );
    }
    return { kind: "ed25519", bytes: key };
  }
  const encoded = secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret;
  const key = encoded.length > 0 ? decodeBase64(encoded) : undefined;
  if (!key || key.length === 0) {
    // The index, never the secret, says which one is wrong.
    throw new TypeError(`verifyWebhook: signing secret ${index} is not "whsec_" followed by standard base64`);
  }
  return { kind: "hmac", bytes: key };
}

function header(headers: WebhookHeaders, name: string): string | undefined {
  if (typeof headers.get === "function") {
    return (headers as { get(name: string): string | null }).get(name) ?? undefined;
  }
  const record = headers as Record<string, string | string[] | undefined | null>;
  for (const k of Object.keys(record)) {
    if (k.toLowerCase() !== name) continue;
    const v = record[k];
    if (Array.isArray(v)) return v.join(" ");
    return v ?? undefined;
  }
  return undefined;
}

function toBytes(body: WebhookBody): Bytes {
  if (typeof body === "string") return utf8(body);
  if (body instanceof Uint8Array) return body.buffer instanceof ArrayBuffer ? (body as Bytes) : new Uint8Array(body);
  if (body instanceof ArrayBuffer) return new Uint8Array(body);
  throw new TypeError("verifyWebhook: body must be the raw body, a string or a Uint8Array, not a parsed object");
}

function utf8(s: string): Bytes {
  return new TextEncoder().encode(s);
}

function concat(a: Bytes, b: Bytes): Bytes {
  const out = new Uint8Array(a.length + b.length);
  out.set(a, 0);
  out.set(b, a.length);
  return out;
}

/**
 * Compares two MACs in time that depends on their length only, so that how
 * long a refusal takes tells nothing of how much of a forged MAC was right.
 */
function timingSafeEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a[i]! ^ b[i]!;
  return diff === 0;
}

/** Standard, padded base64 as Go's base64.StdEncoding writes it; undefined when it is not that. */
function decodeBase64(s: string): Bytes | undefined {
  if (s.length % 4 !== 0 || !/^[A-Za-z0-9+/]*={0,2}$/.test(s)) return undefined;
  try {
    const bin = atob(s);
    const out = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
    return out;
  } catch {
    return undefined;
  }
}

/** Unpadded base64url, as JWTs are written; undefined when it is not that. */
function decodeBase64URL(s: string): Bytes | undefined {
  if (!/^[A-Za-z0-9_-]*$/.test(s) || s.length % 4 === 1) return undefined;
  const std = s.replace(/-/g, "+").replace(/_/g, "/");
  return decodeBase64(std + "=".repeat((4 - (std.length % 4)) % 4));
}

function encodeBase64URL(bytes: Uint8Array): string {
  let bin = "";
  for (const b of bytes) bin += String.fromCharCode(b);
  return btoa(bin).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

function decodeJSON(s: string): Record<string, unknown> | undefined {
  const bytes = decodeBase64URL(s);
  if (!bytes) return undefined;
  try {
    const v: unknown = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
    return v !== null && typeof v === "object" && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}
