import createFetchClient from "openapi-fetch";

import { HookwheelError } from "./errors.js";
import type { paths } from "./schema.js";
import type { SignupCreated, SignupMode } from "./types.js";

/**
 * Signing up, where the server allows it (`HOOKWHEEL_SIGNUP`): not a tenant's
 * call, since whoever signs up has no API key yet, so these are functions of
 * their own rather than methods of a client.
 */
export interface SignupOptions {
  /** Where the API is served, such as `http://localhost:8080`. */
  baseUrl: string;
  /** The fetch to send requests with (default `globalThis.fetch`, looked up at each call). */
  fetch?: (input: Request) => Promise<Response>;
}

function publicClient(fn: string, options: SignupOptions) {
  let base: URL | undefined;
  try {
    base = new URL(options.baseUrl);
  } catch {
    base = undefined;
  }
  if (!base || (base.protocol !== "http:" && base.protocol !== "https:")) {
    throw new TypeError(
      `${fn}: baseUrl ${JSON.stringify(options.baseUrl)}: want an http or https URL such as http://localhost:8080`,
    );
  }
  const userFetch = options.fetch;
  return createFetchClient<paths>({
    baseUrl: options.baseUrl,
    fetch: (request: Request) => (userFetch ?? globalThis.fetch)(request),
  });
}

/** Whether tenants may sign up on the server: `off`, `invite` (with an invite code) or `open`. */
export async function signupMode(options: SignupOptions): Promise<SignupMode> {
  const { data, error, response } = await publicClient("signupMode", options).GET("/v1/signup");
  if (!response.ok || !data) throw HookwheelError.fromResponse(response, error);
  return data.mode;
}

/**
 * Makes a tenant named `name`, with `inviteCode` where the server needs one
 * (ignored by an open server). The answer holds the only copy of its API key
 * and signing secret. A server with sign-up off answers 404
 * (`signup-disabled`); a missing, unknown, used or expired code 403
 * (`invite-required`, `invite-invalid`, `invite-used`, `invite-expired`); too
 * many sign-ups from one address 429 (`signup-limited`), each thrown as a
 * HookwheelError. Never retried: had a first try made the tenant, a repeat
 * would make a second, or find the code used.
 */
export async function signUp(options: SignupOptions, name: string, inviteCode?: string): Promise<SignupCreated> {
  const body = inviteCode ? { name, invite_code: inviteCode } : { name };
  const { data, error, response } = await publicClient("signUp", options).POST("/v1/signup", { body });
  if (!response.ok || !data) throw HookwheelError.fromResponse(response, error);
  return data;
}
