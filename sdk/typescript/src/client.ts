import createFetchClient from "openapi-fetch";
import type { Client } from "openapi-fetch";

import { HookwheelError } from "./errors.js";
import type { operations, paths } from "./schema.js";
import type {
  Attempt,
  BatchResult,
  BatchTaskRequest,
  CancelFilter,
  CancelResult,
  Caller,
  FireTime,
  FlowLimit,
  FlowLimitRequest,
  Limits,
  Page,
  Plan,
  PortalLink,
  PortalLinkCreated,
  PortalLinkRequest,
  Publish,
  ReplayFilter,
  ReplayRequest,
  ReplayResult,
  Schedule,
  ScheduleRequest,
  ScheduleUpdateRequest,
  TargetPause,
  Task,
  TaskFilter,
  TaskRequest,
  TaskStats,
  TenantSettings,
  TenantSettingsUpdate,
  Topic,
  TopicRequest,
  Usage,
  UsageRange,
} from "./types.js";

/**
 * How calls are retried: on 429 whatever the call; on 503, or when no answer
 * came, only calls that cannot do anything twice (see the README).
 */
export interface RetryOptions {
  /** Tries in all, the first included (default 3). 1 never retries. */
  maxTries?: number;
  /**
   * The longest wait before a retry, in milliseconds (default 30,000). A server
   * that asks for a longer wait (`Retry-After`) gets no retry: its
   * HookwheelError comes back at once, carrying `retryAfterMs`.
   */
  maxDelayMs?: number;
}

export interface ClientOptions {
  /** Where the API is served, such as `http://localhost:8080`. */
  baseUrl: string;
  /** A tenant API key, `hw_<key id>_<secret>`. */
  apiKey: string;
  /**
   * The fetch to send requests with (default `globalThis.fetch`, looked up at
   * each call). Wrap it to add a timeout, tracing or a proxy.
   */
  fetch?: (input: Request) => Promise<Response>;
  /** Retries of 429 and 503 answers and of requests that got no answer; `false` turns them off. */
  retry?: RetryOptions | false;
}

/** The times a task request may give as a Date as well as RFC 3339 text. */
type DateFields = { run_at?: string | Date; expires_at?: string | Date };

/** A task to create: TaskRequest with a `url`, whose `run_at` and `expires_at` may also be Dates. */
export type TaskInput = Omit<TaskRequest, "run_at" | "expires_at" | "url" | "topic"> & { url: string } & DateFields;

/**
 * A webhook to publish to every endpoint of a topic: TaskRequest without
 * `url` or `topic` (the topic is `topics.publish`'s first argument), whose
 * `run_at` and `expires_at` may also be Dates.
 */
export type PublishInput = Omit<TaskRequest, "run_at" | "expires_at" | "url" | "topic"> & DateFields;

/** An item of a batch: BatchTaskRequest, whose `run_at` and `expires_at` may also be Dates. */
export type BatchTaskInput = Omit<BatchTaskRequest, "run_at" | "expires_at"> & DateFields;

/** A new time for a task: `run_at` (a Date or RFC 3339 text) or `delay` (a Go duration such as `10m`). */
export type RescheduleInput = { run_at: string | Date; delay?: never } | { delay: string; run_at?: never };

/**
 * The filter of a bulk replay of dead tasks, whether to only count them, and
 * `edit`: what to change in every matched task before replaying it (its URL's
 * prefix, `url_prefix: { from, to }`, and headers by name, `headers: { set,
 * remove }`).
 */
export type ReplayDeadInput = Omit<ReplayFilter, "dry_run"> & {
  /**
   * Count the matching dead tasks without replaying them; with `edit`, also
   * say what it would change (`changed`, `sample`) and refuse (`refused`,
   * `refusals`).
   */
  dryRun?: boolean;
};

export interface CreateOptions {
  /**
   * The `Idempotency-Key` of the call. When absent a random UUID is used, so
   * that the SDK's own retries never create the task twice; pass your own to
   * make retries across processes (a job re-run, say) safe as well. The key is
   * also sent as the `Idempotency-Key` header of every webhook attempt.
   */
  idempotencyKey?: string;
}

/** Paging of a list call: how many items each request asks for (1 to 500; default the server's, 50). */
export interface ListOptions {
  pageSize?: number;
}

/** What a schedule list may include besides the schedules: `"body"`, their bodies. */
export type ScheduleListOptions = Pick<NonNullable<operations["listSchedules"]["parameters"]["query"]>, "include">;

export interface HookwheelClient {
  tasks: {
    /** Schedules a webhook (`POST /v1/tasks`). Always sent with an Idempotency-Key, so it is retried safely. */
    create(task: TaskInput, options?: CreateOptions): Promise<Task>;
    /** The task as it is now (`GET /v1/tasks/{id}`). */
    get(id: string): Promise<Task>;
    /**
     * Every task matching the filter, newest first, reading page after page
     * (`GET /v1/tasks`, following `next_cursor`) as the loop consumes them.
     * Tasks come without their bodies unless `include: "body"` asks for them;
     * the server then bounds the bodies of one page (8 MiB by default) and
     * ends a page early rather than pass the bound.
     */
    list(filter?: TaskFilter & ListOptions): AsyncGenerator<Task, void, undefined>;
    /** One page of `GET /v1/tasks`; pass the previous page's `next_cursor` as `cursor`. */
    listPage(filter?: TaskFilter & { limit?: number; cursor?: string }): Promise<Page<Task>>;
    /** Cancels a scheduled or retrying task (`DELETE /v1/tasks/{id}`); 409 once it is dispatching or finished. */
    cancel(id: string): Promise<Task>;
    /** Cancels every scheduled or retrying task matching the filter (`POST /v1/tasks/cancel`). */
    cancelMany(filter: CancelFilter): Promise<CancelResult>;
    /** Moves a scheduled or retrying task to a new time (`PATCH /v1/tasks/{id}`). */
    reschedule(id: string, when: RescheduleInput): Promise<Task>;
    /**
     * Sends a dead or delivered task again (`POST /v1/tasks/{id}/replay`),
     * first replacing any of its url, method, headers and body given in `edit`.
     */
    replay(id: string, edit?: ReplayRequest): Promise<Task>;
    /**
     * Every delivery attempt of the task, oldest first, read page after page
     * (`GET /v1/tasks/{id}/attempts`, following `next_cursor`): replays add
     * attempts without end, so a task can have more than one page of them.
     */
    attempts(id: string): Promise<Attempt[]>;
    /** The task's delivery attempts, oldest first, reading page after page as the loop consumes them. */
    listAttempts(id: string, options?: ListOptions): AsyncGenerator<Attempt, void, undefined>;
    /** One page of `GET /v1/tasks/{id}/attempts`; pass the previous page's `next_cursor` as `cursor`. */
    attemptsPage(id: string, options?: { limit?: number; cursor?: string }): Promise<Page<Attempt>>;
    /**
     * Schedules up to 1,000 webhooks in one call (`POST /v1/tasks/batch`): one
     * result per item, in order, each a task or a problem. Items without an
     * `idempotency_key` get a random one, so that the call is retried safely.
     */
    batch(items: BatchTaskInput[]): Promise<BatchResult[]>;
    /**
     * Replays every dead task matching the filter (`POST /v1/tasks/replay`), or
     * with `dryRun` only counts them; with `edit`, changes each first (a task
     * the edit would make invalid stays dead, counted in `refused`).
     */
    replayDead(filter?: ReplayDeadInput): Promise<ReplayResult>;
  };
  topics: {
    /**
     * Creates the topic, or replaces its endpoints and description whole
     * (`PUT /v1/topics/{name}`). Safe to repeat, so it is retried like a read.
     */
    put(name: string, topic: TopicRequest): Promise<Topic>;
    /** The topic and its endpoints (`GET /v1/topics/{name}`). */
    get(name: string): Promise<Topic>;
    /** Every topic, in name order, page after page (`GET /v1/topics`). */
    list(options?: ListOptions): AsyncGenerator<Topic, void, undefined>;
    /** One page of `GET /v1/topics`. */
    listPage(options?: { limit?: number; cursor?: string }): Promise<Page<Topic>>;
    /** Deletes the topic; the tasks already published to it are left alone (`DELETE /v1/topics/{name}`). */
    delete(name: string): Promise<Topic>;
    /**
     * Publishes a webhook to every endpoint of the topic (`POST /v1/tasks`
     * with `topic`): one task per endpoint, stored together, each delivered,
     * retried and dead-lettered on its own. Always sent with an
     * Idempotency-Key, so it is retried safely; a repeat with the same key
     * returns the same publish.
     */
    publish(topic: string, task?: PublishInput, options?: CreateOptions): Promise<Publish>;
    /** A publish with its tasks as they are now, counted by status (`GET /v1/publishes/{id}`). */
    getPublish(id: string): Promise<Publish>;
  };
  flowKeys: {
    /**
     * Sets the rate and parallelism of the tasks whose `flow_key` is `key`,
     * replacing what the key had (`PUT /v1/flow-keys/{key}`); the key `*` sets
     * them for every key without limits of its own. A task over its key's
     * limits waits without spending an attempt. Safe to repeat, so it is
     * retried like a read.
     */
    put(key: string, limits: FlowLimitRequest): Promise<FlowLimit>;
    /** The key's own limits (`GET /v1/flow-keys/{key}`); a 404 when it has none. */
    get(key: string): Promise<FlowLimit>;
    /** Every key's limits, in key order, page after page (`GET /v1/flow-keys`). */
    list(options?: ListOptions): AsyncGenerator<FlowLimit, void, undefined>;
    /** One page of `GET /v1/flow-keys`. */
    listPage(options?: { limit?: number; cursor?: string }): Promise<Page<FlowLimit>>;
    /** Lifts the key's limits and returns them as they were (`DELETE /v1/flow-keys/{key}`). */
    delete(key: string): Promise<FlowLimit>;
  };
  portalLinks: {
    /**
     * A link to a read-only page of the tasks carrying one label and their
     * attempts, for the customer the label stands for (`POST /v1/portal-links`).
     * Its `url` is in this answer only. Not retried on 503 or a lost answer:
     * a repeat would make a second link.
     */
    create(link: PortalLinkRequest): Promise<PortalLinkCreated>;
    /** The links that still open, newest first, page after page (`GET /v1/portal-links`). */
    list(options?: ListOptions): AsyncGenerator<PortalLink, void, undefined>;
    /** One page of `GET /v1/portal-links`. */
    listPage(options?: { limit?: number; cursor?: string }): Promise<Page<PortalLink>>;
    /** Ends a link at once, on every node (`DELETE /v1/portal-links/{id}`); safe to repeat. */
    revoke(id: string): Promise<PortalLink>;
  };
  targets: {
    /**
     * Holds the tenant's tasks to a target, `https://host:port` without a path
     * (`POST /v1/targets/pause`): they wait, not sent and not counted as
     * attempts, until it is resumed. A target paused already keeps its pause
     * as it was, which is returned; so it is safe to repeat, and retried like
     * a read.
     */
    pause(target: string, options?: { reason?: string }): Promise<TargetPause>;
    /**
     * Lifts the tenant's pause of a target, its own or hookwheel's, and returns
     * it as it was (`POST /v1/targets/resume`); a 404 when it was not paused.
     * The tasks that waited go out at the target's pace.
     */
    resume(target: string): Promise<TargetPause>;
    /**
     * The tenant's paused targets, by target (`GET /v1/targets/paused`), with
     * who paused each and why; hookwheel's pauses say since when every attempt
     * failed and the last error.
     */
    listPaused(): Promise<TargetPause[]>;
  };
  settings: {
    /**
     * The tenant's own settings (`GET /v1/settings`): `operations_url`, where
     * hookwheel sends its signed `target.paused` and `target.recovered`
     * events, `null` when nowhere. Any key may read them.
     */
    get(): Promise<TenantSettings>;
    /**
     * Changes the tenant's settings and returns them as they are now
     * (`PATCH /v1/settings`, a key with `secrets:manage`): a field given is
     * set, `null` clears it, an absent one is kept. `operations_url` is
     * checked as a task's URL is. Safe to repeat, so it is retried like a read.
     */
    update(patch: TenantSettingsUpdate): Promise<TenantSettings>;
  };
  /**
   * The operator's plans: named sets of limits tenants are put on. These are
   * admin calls: make the client with the installation's admin token
   * (`HOOKWHEEL_ADMIN_TOKEN`) as its `apiKey`.
   */
  plans: {
    /**
     * Creates the plan, or replaces its limits as a whole
     * (`PUT /v1/admin/plans/{name}`): an absent limit takes the node's
     * default, 0 lifts it. Safe to repeat, so it is retried like a read.
     */
    put(name: string, limits: Limits): Promise<Plan>;
    /** The plan (`GET /v1/admin/plans/{name}`); a 404 when there is none. */
    get(name: string): Promise<Plan>;
    /** Every plan, by name (`GET /v1/admin/plans`). */
    list(): Promise<Plan[]>;
    /** Deletes the plan (`DELETE /v1/admin/plans/{name}`); a 409 while tenants are on it. */
    delete(name: string): Promise<void>;
  };
  schedules: {
    /** Creates a recurring schedule (`POST /v1/schedules`). */
    create(schedule: ScheduleRequest): Promise<Schedule>;
    /** The schedule with its next occurrence (`GET /v1/schedules/{id}`). */
    get(id: string): Promise<Schedule>;
    /**
     * Every schedule, newest first, page after page (`GET /v1/schedules`),
     * without their bodies unless `include: "body"` asks for them (within the
     * server's bound on the bodies of one page, as for tasks).
     */
    list(options?: ListOptions & ScheduleListOptions): AsyncGenerator<Schedule, void, undefined>;
    /** One page of `GET /v1/schedules`. */
    listPage(options?: ScheduleListOptions & { limit?: number; cursor?: string }): Promise<Page<Schedule>>;
    /** Stops the schedule and cancels its pending occurrences (`POST /v1/schedules/{id}/pause`). */
    pause(id: string): Promise<Schedule>;
    /** Restarts a paused schedule from its next occurrence (`POST /v1/schedules/{id}/resume`). */
    resume(id: string): Promise<Schedule>;
    /**
     * Changes the schedule in place (`PATCH /v1/schedules/{id}`, a JSON merge
     * patch): each field given replaces the schedule's, `null` resets it to
     * its default, an absent field is kept; `headers`, `labels` and `retry`
     * merge field by field. A new `cron` or `timezone` recomputes
     * `next_run_at` from now; occurrences already made tasks keep their time
     * and request.
     */
    update(id: string, patch: ScheduleUpdateRequest): Promise<Schedule>;
    /** Deletes the schedule and cancels its pending occurrences (`DELETE /v1/schedules/{id}`). */
    delete(id: string): Promise<Schedule>;
    /** The next `count` (default 10, at most 100) fire times (`GET /v1/schedules/{id}/next`). */
    next(id: string, count?: number): Promise<FireTime[]>;
  };
  /** The calling tenant and API key (`GET /v1/me`). */
  me(): Promise<Caller>;
  /** Per-minute delivery statistics over `window` (a duration such as `1h`; default 1h) (`GET /v1/stats`). */
  stats(window?: string): Promise<TaskStats>;
  /**
   * What the tenant used on each UTC day from `from` to `to` (`YYYY-MM-DD`, or a
   * Date read as its UTC day; both included, at most 400 days; default the first of
   * the current month to today), every day listed, with totals, its plan and daily
   * limits (`GET /v1/usage`).
   */
  usage(range?: UsageRange): Promise<Usage>;
  /**
   * The typed openapi-fetch client underneath, authenticated with the key, for
   * the calls this wrapper has no method for (API keys, signing secrets,
   * limits, audit...). It does not retry and does not throw on error answers.
   */
  raw: Client<paths>;
}

const DEFAULT_MAX_TRIES = 3;
const DEFAULT_MAX_DELAY_MS = 30_000;
// The first wait when a 429 or 503 carries no Retry-After, or no answer came;
// it doubles on each retry, with jitter so that many clients refused together
// do not come back together.
const BASE_BACKOFF_MS = 250;

/** Returns a client of the hookwheel API acting with one tenant API key. */
export function createClient(options: ClientOptions): HookwheelClient {
  let base: URL | undefined;
  try {
    base = new URL(options.baseUrl);
  } catch {
    base = undefined;
  }
  if (!base || (base.protocol !== "http:" && base.protocol !== "https:")) {
    throw new TypeError(
      `createClient: baseUrl ${JSON.stringify(options.baseUrl)}: want an http or https URL such as http://localhost:8080`,
    );
  }
  if (!options.apiKey) throw new TypeError("createClient: apiKey is required (hw_<key id>_<secret>)");
  const userFetch = options.fetch;
  // The errors fetch itself threw: no answer came (connection refused or
  // reset, DNS). Only those are retried, not an abort or a timeout the
  // caller's fetch chose, nor an error of building the request.
  const unanswered = new WeakSet<object>();
  const raw = createFetchClient<paths>({
    baseUrl: options.baseUrl,
    headers: { Authorization: `Bearer ${options.apiKey}` },
    // Looked up at each call rather than captured here, so that a fetch
    // replaced after the client was made (by a test, an instrumentation
    // library) is the one used.
    fetch: async (request: Request) => {
      try {
        return await (userFetch ?? globalThis.fetch)(request);
      } catch (err) {
        const name = (err as { name?: unknown } | null)?.name;
        if (err !== null && typeof err === "object" && name !== "AbortError" && name !== "TimeoutError")
          unanswered.add(err);
        throw err;
      }
    },
  });
  const maxTries = options.retry === false ? 1 : Math.max(1, options.retry?.maxTries ?? DEFAULT_MAX_TRIES);
  const maxDelayMs = options.retry === false ? 0 : (options.retry?.maxDelayMs ?? DEFAULT_MAX_DELAY_MS);

  /**
   * Makes one call, retrying it when that cannot do anything twice. A 429 is
   * retried whatever the call: the API answers 429 (rate limit, quota)
   * before acting. A 503, or a request that got no answer, only when
   * `repeatable` says a second request cannot do what the first may already
   * have done: reads, creations carrying an Idempotency-Key, and changes a
   * repeat leaves as the first left them (pause, resume, cancelMany).
   */
  async function send<R extends { data?: unknown; error?: unknown; response: Response }>(
    repeatable: boolean,
    call: () => Promise<R>,
  ): Promise<NonNullable<R["data"]>> {
    for (let tries = 1; ; tries++) {
      let result: R;
      try {
        result = await call();
      } catch (err) {
        if (!repeatable || tries >= maxTries || !unanswered.has(err as object)) throw err;
        // Our own backoff is capped; only a server asking for longer ends the tries.
        await sleep(Math.min(backoff(tries), maxDelayMs));
        continue;
      }
      if (result.response.ok) return result.data as NonNullable<R["data"]>;
      const err = HookwheelError.fromResponse(result.response, result.error);
      const retryable = err.status === 429 || (err.status === 503 && repeatable);
      if (!retryable || tries >= maxTries) throw err;
      // Coming back earlier than asked would only be refused again.
      if (err.retryAfterMs !== undefined && err.retryAfterMs > maxDelayMs) throw err;
      await sleep(err.retryAfterMs ?? Math.min(backoff(tries), maxDelayMs));
    }
  }

  async function* paginate<T>(
    fetchPage: (cursor: string | undefined) => Promise<Page<T>>,
  ): AsyncGenerator<T, void, undefined> {
    let cursor: string | undefined;
    do {
      const page = await fetchPage(cursor);
      yield* page.data;
      const next = page.next_cursor ?? undefined;
      // A page that hands back its own cursor would be read for ever.
      if (next !== undefined && next === cursor) throw new Error(`hookwheel: the server answered cursor ${next} with itself`);
      cursor = next;
    } while (cursor);
  }

  function listTasksPage(query: TaskFilter & { limit?: number; cursor?: string } = {}): Promise<Page<Task>> {
    return send(true, () => raw.GET("/v1/tasks", { params: { query } }));
  }

  function listSchedulesPage(
    query: ScheduleListOptions & { limit?: number; cursor?: string } = {},
  ): Promise<Page<Schedule>> {
    return send(true, () => raw.GET("/v1/schedules", { params: { query } }));
  }

  function listAttemptsPage(taskId: string, query: { limit?: number; cursor?: string } = {}): Promise<Page<Attempt>> {
    return send(true, () => raw.GET("/v1/tasks/{id}/attempts", { params: { path: { id: taskId }, query } }));
  }

  function listTopicsPage(query: { limit?: number; cursor?: string } = {}): Promise<Page<Topic>> {
    return send(true, () => raw.GET("/v1/topics", { params: { query } }));
  }

  function listFlowLimitsPage(query: { limit?: number; cursor?: string } = {}): Promise<Page<FlowLimit>> {
    return send(true, () => raw.GET("/v1/flow-keys", { params: { query } }));
  }

  const named = (v: string) => ({ params: { path: { name: v } } });

  const keyed = (v: string) => ({ params: { path: { key: v } } });

  function listPortalLinksPage(query: { limit?: number; cursor?: string } = {}): Promise<Page<PortalLink>> {
    return send(true, () => raw.GET("/v1/portal-links", { params: { query } }));
  }

  const id = (v: string) => ({ params: { path: { id: v } } });

  return {
    tasks: {
      async create(task, opts = {}) {
        if ((task as { topic?: unknown }).topic !== undefined)
          throw new TypeError("tasks.create: the task names a topic: publish it with topics.publish");
        const key = opts.idempotencyKey ?? newIdempotencyKey();
        const body = withRunAt(task) as TaskRequest;
        // Without a topic, the answer is a task.
        return (await send(true, () =>
          raw.POST("/v1/tasks", { params: { header: { "Idempotency-Key": key } }, body }),
        )) as Task;
      },
      get: (taskId) => send(true, () => raw.GET("/v1/tasks/{id}", id(taskId))),
      list(filter = {}) {
        const { pageSize, ...query } = filter;
        return paginate((cursor) =>
          listTasksPage({ ...query, ...(pageSize ? { limit: pageSize } : {}), ...(cursor ? { cursor } : {}) }),
        );
      },
      listPage: listTasksPage,
      cancel: (taskId) => send(false, () => raw.DELETE("/v1/tasks/{id}", id(taskId))),
      // A repeat cancels what is left, as the first would have.
      cancelMany: (filter) => send(true, () => raw.POST("/v1/tasks/cancel", { body: filter })),
      reschedule(taskId, when) {
        const body = withRunAt(when) as { run_at?: string; delay?: string };
        return send(false, () => raw.PATCH("/v1/tasks/{id}", { ...id(taskId), body }));
      },
      replay: (taskId, edit) =>
        send(false, () => raw.POST("/v1/tasks/{id}/replay", { ...id(taskId), ...(edit ? { body: edit } : {}) })),
      listAttempts(taskId, opts = {}) {
        return paginate((cursor) =>
          listAttemptsPage(taskId, { ...(opts.pageSize ? { limit: opts.pageSize } : {}), ...(cursor ? { cursor } : {}) }),
        );
      },
      attemptsPage: listAttemptsPage,
      async attempts(taskId) {
        const all: Attempt[] = [];
        for await (const attempt of paginate((cursor) => listAttemptsPage(taskId, cursor ? { cursor } : {}))) {
          all.push(attempt);
        }
        return all;
      },
      async batch(items) {
        // Each item is its own creation: with a key on every one, a repeat of
        // the whole call creates nothing new.
        const tasks = items.map(
          (item) =>
            ({ ...withRunAt(item), idempotency_key: item.idempotency_key || newIdempotencyKey() }) as BatchTaskRequest,
        );
        const result = await send(true, () => raw.POST("/v1/tasks/batch", { body: { tasks } }));
        return result.data;
      },
      replayDead(filter = {}) {
        const { dryRun, ...rest } = filter;
        const body: ReplayFilter = { ...rest, ...(dryRun ? { dry_run: true } : {}) };
        // A dry run changes nothing, so it is as safe to repeat as a read.
        return send(!!dryRun, () => raw.POST("/v1/tasks/replay", { body }));
      },
    },
    topics: {
      put: (name, topic) => send(true, () => raw.PUT("/v1/topics/{name}", { ...named(name), body: topic })),
      get: (name) => send(true, () => raw.GET("/v1/topics/{name}", named(name))),
      list(opts = {}) {
        return paginate((cursor) =>
          listTopicsPage({ ...(opts.pageSize ? { limit: opts.pageSize } : {}), ...(cursor ? { cursor } : {}) }),
        );
      },
      listPage: listTopicsPage,
      delete: (name) => send(false, () => raw.DELETE("/v1/topics/{name}", named(name))),
      async publish(topic, task = {}, opts = {}) {
        if ((task as { url?: unknown }).url !== undefined)
          throw new TypeError("topics.publish: the task names a url: create it with tasks.create");
        const key = opts.idempotencyKey ?? newIdempotencyKey();
        const body = { ...withRunAt(task), topic } as TaskRequest;
        // With a topic, the answer is a publish.
        return (await send(true, () =>
          raw.POST("/v1/tasks", { params: { header: { "Idempotency-Key": key } }, body }),
        )) as Publish;
      },
      getPublish: (publishId) => send(true, () => raw.GET("/v1/publishes/{id}", id(publishId))),
    },
    flowKeys: {
      // Setting the same limits twice leaves them as once does.
      put: (key, limits) => send(true, () => raw.PUT("/v1/flow-keys/{key}", { ...keyed(key), body: limits })),
      get: (key) => send(true, () => raw.GET("/v1/flow-keys/{key}", keyed(key))),
      list(opts = {}) {
        return paginate((cursor) =>
          listFlowLimitsPage({ ...(opts.pageSize ? { limit: opts.pageSize } : {}), ...(cursor ? { cursor } : {}) }),
        );
      },
      listPage: listFlowLimitsPage,
      delete: (key) => send(false, () => raw.DELETE("/v1/flow-keys/{key}", keyed(key))),
    },
    portalLinks: {
      create: (link) => send(false, () => raw.POST("/v1/portal-links", { body: link })),
      list(opts = {}) {
        return paginate((cursor) =>
          listPortalLinksPage({ ...(opts.pageSize ? { limit: opts.pageSize } : {}), ...(cursor ? { cursor } : {}) }),
        );
      },
      listPage: listPortalLinksPage,
      // Revoking a revoked link answers the same.
      revoke: (linkId) => send(true, () => raw.DELETE("/v1/portal-links/{id}", id(linkId))),
    },
    targets: {
      // Pausing a paused target leaves its pause as it was.
      pause: (target, opts = {}) =>
        send(true, () =>
          raw.POST("/v1/targets/pause", { body: { target, ...(opts.reason ? { reason: opts.reason } : {}) } }),
        ),
      resume: (target) => send(false, () => raw.POST("/v1/targets/resume", { body: { target } })),
      listPaused: async () => (await send(true, () => raw.GET("/v1/targets/paused"))).data,
    },
    settings: {
      get: () => send(true, () => raw.GET("/v1/settings")),
      // Setting the same settings twice leaves them as once does.
      update: (patch) => send(true, () => raw.PATCH("/v1/settings", { body: patch })),
    },
    plans: {
      // Setting the same limits twice leaves them as once does.
      put: (name, limits) => send(true, () => raw.PUT("/v1/admin/plans/{name}", { ...named(name), body: limits })),
      get: (name) => send(true, () => raw.GET("/v1/admin/plans/{name}", named(name))),
      list: async () => (await send(true, () => raw.GET("/v1/admin/plans"))).data,
      async delete(name) {
        await send(false, () => raw.DELETE("/v1/admin/plans/{name}", named(name)));
      },
    },
    schedules: {
      create: (schedule) => send(false, () => raw.POST("/v1/schedules", { body: schedule })),
      get: (scheduleId) => send(true, () => raw.GET("/v1/schedules/{id}", id(scheduleId))),
      list(opts = {}) {
        const { pageSize, ...query } = opts;
        return paginate((cursor) =>
          listSchedulesPage({ ...query, ...(pageSize ? { limit: pageSize } : {}), ...(cursor ? { cursor } : {}) }),
        );
      },
      listPage: listSchedulesPage,
      // Pausing a paused schedule, or resuming a running one, changes nothing.
      pause: (scheduleId) => send(true, () => raw.POST("/v1/schedules/{id}/pause", id(scheduleId))),
      resume: (scheduleId) => send(true, () => raw.POST("/v1/schedules/{id}/resume", id(scheduleId))),
      // A merge patch leaves the schedule the same however often it is applied.
      update: (scheduleId, patch) =>
        send(true, () =>
          raw.PATCH("/v1/schedules/{id}", {
            ...id(scheduleId),
            body: patch,
            headers: { "Content-Type": "application/merge-patch+json" },
          }),
        ),
      delete: (scheduleId) => send(false, () => raw.DELETE("/v1/schedules/{id}", id(scheduleId))),
      async next(scheduleId, count) {
        const query = count === undefined ? {} : { count };
        const list = await send(true, () =>
          raw.GET("/v1/schedules/{id}/next", { params: { path: { id: scheduleId }, query } }),
        );
        return list.data;
      },
    },
    me: () => send(true, () => raw.GET("/v1/me")),
    stats: (window) => send(true, () => raw.GET("/v1/stats", { params: { query: window ? { window } : {} } })),
    usage: (range = {}) => {
      const query: { from?: string; to?: string } = {};
      if (range.from !== undefined) query.from = utcDay(range.from);
      if (range.to !== undefined) query.to = utcDay(range.to);
      return send(true, () => raw.GET("/v1/usage", { params: { query } }));
    },
    raw,
  };
}

/** Copies v with a Date `run_at` or `expires_at` written as RFC 3339 text, as the API takes them. */
function withRunAt<T extends { run_at?: string | Date; expires_at?: string | Date }>(
  v: T,
): Omit<T, "run_at" | "expires_at"> & { run_at?: string; expires_at?: string } {
  const out = { ...v } as Omit<T, "run_at" | "expires_at"> & { run_at?: string; expires_at?: string };
  if (v.run_at instanceof Date) out.run_at = v.run_at.toISOString();
  if (v.expires_at instanceof Date) out.expires_at = v.expires_at.toISOString();
  return out;
}

function newIdempotencyKey(): string {
  const c = globalThis.crypto;
  if (typeof c?.randomUUID !== "function") {
    // Node 18 has no global crypto unless started with
    // --experimental-global-webcrypto; guessing a key from Math.random could
    // collide with another task's and return that task instead.
    throw new Error(
      "hookwheel: globalThis.crypto.randomUUID is missing (Node 18: run with --experimental-global-webcrypto, or pass options.idempotencyKey)",
    );
  }
  return c.randomUUID();
}

function backoff(tries: number): number {
  const ceiling = BASE_BACKOFF_MS * 2 ** (tries - 1);
  return Math.round(ceiling / 2 + Math.random() * (ceiling / 2));
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** A day as `GET /v1/usage` takes it: a Date's UTC day, or the string as given. */
function utcDay(d: Date | string): string {
  return typeof d === "string" ? d : d.toISOString().slice(0, 10);
}
