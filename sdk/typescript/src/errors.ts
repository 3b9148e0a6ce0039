import type { FieldError, Problem } from "./types.js";

/**
 * An error answer of the hookwheel API. Every 4xx and 5xx answer of the API is
 * `application/problem+json` (RFC 9457); its fields are copied here. An answer
 * that is not problem details (a proxy's HTML error page, say) still becomes a
 * HookwheelError, with `type` `about:blank`, the status text as `title` and the
 * start of the body as `detail`.
 */
export class HookwheelError extends Error {
  override readonly name = "HookwheelError";
  /** The HTTP status code. */
  readonly status: number;
  /** A URI naming the kind of problem; `about:blank` when there is nothing more specific than the status. */
  readonly type: string;
  /** A short summary of the kind of problem. */
  readonly title: string;
  /** What went wrong with this request, for a human. */
  readonly detail: string;
  /** A URI naming this occurrence of the problem, when the server gave one. */
  readonly instance: string | undefined;
  /** The invalid fields of a validation error; empty otherwise. */
  readonly errors: FieldError[];
  /**
   * How long the server asked the caller to wait (its `Retry-After` header, in
   * milliseconds), when it gave one.
   */
  readonly retryAfterMs: number | undefined;
  /** The problem details as the server sent them; undefined when the body was not problem details. */
  readonly problem: Problem | undefined;

  constructor(status: number, problem: Partial<Problem> & Record<string, unknown>, retryAfterMs?: number) {
    const title = str(problem.title) ?? `HTTP ${status}`;
    const detail = str(problem.detail) ?? "";
    const errors = Array.isArray(problem.errors) ? (problem.errors as FieldError[]) : [];
    let message = `${status} ${title}`;
    if (detail) message += `: ${detail}`;
    if (errors.length > 0) message += ` (${errors.map((e) => `${e.field}: ${e.message}`).join("; ")})`;
    super(message);
    this.status = status;
    this.type = str(problem.type) ?? "about:blank";
    this.title = title;
    this.detail = detail;
    this.instance = str(problem.instance);
    this.errors = errors;
    this.retryAfterMs = retryAfterMs;
    this.problem = isProblem(problem) ? problem : undefined;
  }

  /**
   * The HookwheelError for an unsuccessful response whose body openapi-fetch
   * has already read: parsed JSON when it was JSON, else its text.
   */
  static fromResponse(response: Response, body: unknown, now: number = Date.now()): HookwheelError {
    const retryAfterMs = parseRetryAfter(response.headers.get("Retry-After"), now);
    if (body !== null && typeof body === "object" && !Array.isArray(body)) {
      return new HookwheelError(response.status, body as Record<string, unknown>, retryAfterMs);
    }
    const text = typeof body === "string" ? body.trim() : "";
    return new HookwheelError(
      response.status,
      {
        title: response.statusText || `HTTP ${response.status}`,
        detail: text.length > 500 ? `${text.slice(0, 500)}...` : text,
      },
      retryAfterMs,
    );
  }
}

/**
 * Reads a `Retry-After` header, delay-seconds or an HTTP date (RFC 9110
 * 10.2.3), as milliseconds from now; undefined when absent or unreadable. A
 * date in the past is no wait at all.
 */
export function parseRetryAfter(value: string | null | undefined, now: number = Date.now()): number | undefined {
  if (value == null) return undefined;
  const v = value.trim();
  if (/^\d+$/.test(v)) return Number(v) * 1000;
  // Only dates, not other text Date.parse happens to accept such as "1.5".
  if (!/[a-z]/i.test(v)) return undefined;
  const at = Date.parse(v);
  if (Number.isNaN(at)) return undefined;
  return Math.max(0, at - now);
}

function str(v: unknown): string | undefined {
  return typeof v === "string" ? v : undefined;
}

function isProblem(p: Record<string, unknown>): p is Problem & Record<string, unknown> {
  return typeof p.type === "string" && typeof p.title === "string" && typeof p.status === "number";
}
