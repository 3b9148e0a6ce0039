// The client against a scripted fetch: what it sends, how it reads answers and
// errors, when it retries. The live tests run the same calls against a server.
import { describe, it } from "node:test";
import assert from "node:assert/strict";

import { createClient, HookwheelError, parseRetryAfter } from "../dist/index.js";

const TASK = {
  id: "01a2021f-503b-7651-aff3-c59e9afa4a43",
  status: "scheduled",
  url: "https://example.com/hook",
  method: "POST",
  run_at: "2026-11-22T10:00:00Z",
  created_at: "2026-11-22T09:00:00Z",
  updated_at: "2026-11-22T09:00:00Z",
  attempts: 0,
  max_attempts: 10,
  timeout: "30s",
  retry: { max_attempts: 10, min_backoff: "1s", max_backoff: "1h" },
  next_attempt_at: "2026-11-22T10:00:00Z",
  last_status_code: null,
  last_error: null,
  idempotency_key: null,
};

const json = (status, body, headers = {}) =>
  new Response(JSON.stringify(body), { status, headers: { "Content-Type": "application/json", ...headers } });
const problem = (status, title, detail, headers = {}, extra = {}) =>
  new Response(JSON.stringify({ type: "about:blank", title, status, detail, ...extra }), {
    status,
    headers: { "Content-Type": "application/problem+json", ...headers },
  });

/** A client whose fetch answers with `answers` in turn and records each request. */
function scripted(answers, options = {}) {
  const requests = [];
  const client = createClient({
    baseUrl: "http://hookwheel.test/",
    apiKey: "hw_key_secret",
    fetch: async (request) => {
      requests.push({
        method: request.method,
        url: new URL(request.url),
        headers: request.headers,
        body: await request.text(),
      });
      const next = answers.shift();
      assert.ok(next, `unexpected request ${request.method} ${request.url}`);
      return typeof next === "function" ? next() : next;
    },
    ...options,
  });
  return { client, requests };
}

describe("client", () => {
  it("creates a task with a key, the API key and a Date run_at written as RFC 3339", async () => {
    const { client, requests } = scripted([json(201, TASK)]);
    const task = await client.tasks.create({ url: TASK.url, body: "{}", run_at: new Date("2026-11-22T10:00:00Z") });
    assert.deepEqual(task, TASK);
    const [req] = requests;
    assert.equal(req.method, "POST");
    assert.equal(req.url.href, "http://hookwheel.test/v1/tasks");
    assert.equal(req.headers.get("Authorization"), "Bearer hw_key_secret");
    assert.equal(req.headers.get("Content-Type"), "application/json");
    assert.match(
      req.headers.get("Idempotency-Key"),
      /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/,
    );
    assert.deepEqual(JSON.parse(req.body), { url: TASK.url, body: "{}", run_at: "2026-11-22T10:00:00.000Z" });
  });

  it("writes a Date expires_at as RFC 3339, in a create and a batch item alike", async () => {
    const { client, requests } = scripted([json(201, TASK), json(200, { data: [{ task: TASK }] })]);
    await client.tasks.create({ url: TASK.url, expires_at: new Date("2026-11-22T10:10:00Z") });
    await client.tasks.batch([{ url: TASK.url, expires_at: new Date("2026-11-22T10:10:00Z"), idempotency_key: "k" }]);
    assert.deepEqual(JSON.parse(requests[0].body), { url: TASK.url, expires_at: "2026-11-22T10:10:00.000Z" });
    assert.deepEqual(JSON.parse(requests[1].body), {
      tasks: [{ url: TASK.url, expires_at: "2026-11-22T10:10:00.000Z", idempotency_key: "k" }],
    });
  });

  it("sends the idempotency key given, and a new one for each call without", async () => {
    const { client, requests } = scripted([
      json(201, TASK),
      json(201, TASK),
      json(200, TASK, { "Idempotent-Replayed": "true" }),
    ]);
    await client.tasks.create({ url: TASK.url });
    await client.tasks.create({ url: TASK.url });
    await client.tasks.create({ url: TASK.url }, { idempotencyKey: "order-42" });
    assert.notEqual(requests[0].headers.get("Idempotency-Key"), requests[1].headers.get("Idempotency-Key"));
    assert.equal(requests[2].headers.get("Idempotency-Key"), "order-42");
  });

  it("throws a HookwheelError carrying the problem details", async () => {
    const errors = [{ field: "retry.max_attempts", message: "must be at least 1" }];
    const { client } = scripted([
      problem(
        422,
        "Unprocessable Entity",
        "the request has invalid fields",
        {},
        { errors, type: "https://hookwheel.dev/problems/validation" },
      ),
    ]);
    const err = await client.tasks.create({ url: TASK.url, retry: { max_attempts: 0 } }).catch((e) => e);
    assert.ok(err instanceof HookwheelError);
    assert.ok(err instanceof Error);
    assert.equal(err.name, "HookwheelError");
    assert.equal(err.status, 422);
    assert.equal(err.type, "https://hookwheel.dev/problems/validation");
    assert.equal(err.title, "Unprocessable Entity");
    assert.equal(err.detail, "the request has invalid fields");
    assert.deepEqual(err.errors, errors);
    assert.equal(err.problem.status, 422);
    assert.match(
      err.message,
      /422 Unprocessable Entity: the request has invalid fields \(retry.max_attempts: must be at least 1\)/,
    );
  });

  it("turns an answer that is not problem details into a HookwheelError too", async () => {
    const { client } = scripted([new Response("<html>Bad Gateway</html>", { status: 502, statusText: "Bad Gateway" })]);
    const err = await client.tasks.get(TASK.id).catch((e) => e);
    assert.ok(err instanceof HookwheelError);
    assert.equal(err.status, 502);
    assert.equal(err.title, "Bad Gateway");
    assert.equal(err.type, "about:blank");
    assert.equal(err.detail, "<html>Bad Gateway</html>");
    assert.equal(err.problem, undefined);
  });

  it("retries a create on 429 and 503 as Retry-After says, with the same key", async () => {
    const { client, requests } = scripted([
      problem(429, "Too Many Requests", "over the rate limit", { "Retry-After": "0" }),
      problem(503, "Service Unavailable", "database unreachable", {
        "Retry-After": new Date(Date.now() - 1000).toUTCString(),
      }),
      json(201, TASK),
    ]);
    assert.deepEqual(await client.tasks.create({ url: TASK.url }), TASK);
    assert.equal(requests.length, 3);
    const keys = new Set(requests.map((r) => r.headers.get("Idempotency-Key")));
    assert.equal(keys.size, 1);
    assert.deepEqual(new Set(requests.map((r) => r.body)).size, 1);
  });

  it("gives up after maxTries, and at once when Retry-After is past maxDelayMs", async () => {
    const busy = () => problem(503, "Service Unavailable", "busy", { "Retry-After": "0" });
    const three = scripted([busy(), busy(), busy()]);
    await assert.rejects(three.client.tasks.get(TASK.id), (err) => err.status === 503);
    assert.equal(three.requests.length, 3);

    const long = scripted([problem(429, "Too Many Requests", "quota", { "Retry-After": "31" })]);
    const started = Date.now();
    const err = await long.client.tasks.get(TASK.id).catch((e) => e);
    assert.equal(err.status, 429);
    assert.equal(err.retryAfterMs, 31_000);
    assert.ok(Date.now() - started < 1000);

    const off = scripted([busy()], { retry: false });
    await assert.rejects(off.client.me(), (err) => err.status === 503);
  });

  it("waits for Retry-After before retrying", async () => {
    const { client, requests } = scripted([
      problem(429, "Too Many Requests", "slow down", { "Retry-After": "1" }),
      json(200, TASK),
    ]);
    const started = Date.now();
    await client.tasks.get(TASK.id);
    assert.ok(Date.now() - started >= 990, `retried after ${Date.now() - started}ms`);
    assert.equal(requests.length, 2);
  });

  it("does not retry on 503 what a repeat could do twice", async () => {
    const busy = () => problem(503, "Service Unavailable", "busy", { "Retry-After": "0" });
    const calls = [
      (c) => c.tasks.cancel(TASK.id),
      (c) => c.tasks.replay(TASK.id),
      (c) => c.tasks.reschedule(TASK.id, { delay: "1m" }),
      (c) => c.tasks.replayDead({ url: "https://example.com/" }),
      (c) => c.schedules.create({ url: TASK.url, cron: "@hourly" }),
      (c) => c.schedules.delete(TASK.id),
      (c) => c.flowKeys.delete("customer-1042"),
      (c) => c.targets.resume("https://api.partner.com:443"),
    ];
    for (const call of calls) {
      const { client, requests } = scripted([busy()]);
      await assert.rejects(call(client), (err) => err.status === 503);
      assert.equal(requests.length, 1, String(call));
    }
  });

  it("retries any call on 429, which the API answers before acting", async () => {
    const { client, requests } = scripted([
      problem(429, "Too Many Requests", "rate limited", { "Retry-After": "0" }),
      json(200, TASK),
    ]);
    assert.deepEqual(await client.tasks.cancel(TASK.id), TASK);
    assert.equal(requests.length, 2);
  });

  it("retries a request that got no answer only when it is repeatable, and never an abort", async () => {
    let calls = 0;
    const flaky = (fail) =>
      createClient({
        baseUrl: "http://hookwheel.test",
        apiKey: "k",
        fetch: async () => {
          calls++;
          if (calls === 1) throw fail;
          return json(200, TASK);
        },
      });
    assert.deepEqual(await flaky(new TypeError("fetch failed")).tasks.get(TASK.id), TASK);
    assert.equal(calls, 2);

    calls = 0;
    await assert.rejects(flaky(new TypeError("fetch failed")).tasks.cancel(TASK.id), /fetch failed/);
    assert.equal(calls, 1);

    calls = 0;
    await assert.rejects(
      flaky(new DOMException("timed out", "TimeoutError")).tasks.get(TASK.id),
      (err) => err.name === "TimeoutError",
    );
    assert.equal(calls, 1);
  });

  it("gives batch items without a key one of their own, so that the batch is retried", async () => {
    const busy = () => problem(503, "Service Unavailable", "busy", { "Retry-After": "0" });
    const { client, requests } = scripted([busy(), json(200, { data: [{ task: TASK }, { task: TASK }] })]);
    await client.tasks.batch([{ url: TASK.url }, { url: TASK.url, idempotency_key: "mine" }]);
    assert.equal(requests.length, 2);
    const [first, second] = requests.map((r) => JSON.parse(r.body).tasks);
    assert.deepEqual(first, second, "the retry sends the same keys");
    assert.match(first[0].idempotency_key, /^[0-9a-f-]{36}$/);
    assert.equal(first[1].idempotency_key, "mine");
  });

  it("lists every task across pages, passing the filter and the cursor", async () => {
    const page = (ids, next) =>
      json(200, { data: ids.map((id) => ({ ...TASK, id })), ...(next ? { next_cursor: next } : {}) });
    const { client, requests } = scripted([page(["a", "b"], "c1"), page(["c", "d"], "c2"), page(["e"])]);
    const ids = [];
    for await (const task of client.tasks.list({ status: "dead", url: "https://example.com/a b?", pageSize: 2 }))
      ids.push(task.id);
    assert.deepEqual(ids, ["a", "b", "c", "d", "e"]);
    assert.deepEqual(
      requests.map((r) => Object.fromEntries(r.url.searchParams)),
      [
        { status: "dead", url: "https://example.com/a b?", limit: "2" },
        { status: "dead", url: "https://example.com/a b?", limit: "2", cursor: "c1" },
        { status: "dead", url: "https://example.com/a b?", limit: "2", cursor: "c2" },
      ],
    );
  });

  it("asks for bodies with include, and reads on from a page cut short", async () => {
    const page = (ids, next) =>
      json(200, { data: ids.map((id) => ({ ...TASK, id, body: "<b>" })), ...(next ? { next_cursor: next } : {}) });
    const { client, requests } = scripted([
      page(["a"], "c1"),
      page(["b", "c"]),
      json(200, { data: [{ id: "s1", body: "<s>" }] }),
    ]);
    const bodies = [];
    for await (const task of client.tasks.list({ include: "body", pageSize: 100 })) bodies.push(task.body);
    assert.deepEqual(bodies, ["<b>", "<b>", "<b>"]);
    const schedules = [];
    for await (const s of client.schedules.list({ include: "body" })) schedules.push(s.body);
    assert.deepEqual(schedules, ["<s>"]);
    assert.deepEqual(
      requests.map((r) => `${r.url.pathname}?${new URLSearchParams([...r.url.searchParams].sort()).toString()}`),
      ["/v1/tasks?include=body&limit=100", "/v1/tasks?cursor=c1&include=body&limit=100", "/v1/schedules?include=body"],
    );
  });

  it("sends labels on a task and filters by them, one label parameter each", async () => {
    const labelled = { ...TASK, labels: { team: "payments", note: "a:b,c" } };
    const { client, requests } = scripted([
      json(201, labelled),
      json(200, { data: [labelled] }),
      json(200, { matched: 1, replayed: 1 }),
    ]);
    const task = await client.tasks.create({ url: TASK.url, labels: { team: "payments", note: "a:b,c" } });
    assert.deepEqual(task.labels, { team: "payments", note: "a:b,c" });
    const listed = [];
    for await (const t of client.tasks.list({ label: ["team:payments", "note:a:b,c"] })) listed.push(t.id);
    assert.deepEqual(listed, [TASK.id]);
    await client.tasks.replayDead({ labels: { team: "payments" } });
    assert.deepEqual(JSON.parse(requests[0].body).labels, { team: "payments", note: "a:b,c" });
    assert.deepEqual(requests[1].url.searchParams.getAll("label"), ["team:payments", "note:a:b,c"]);
    assert.deepEqual(JSON.parse(requests[2].body).labels, { team: "payments" });
  });

  it("sends a bulk replay's edit as given", async () => {
    const answer = { matched: 1, replayed: 0, changed: 1, refused: 0, refusals: [], sample: [] };
    const { client, requests } = scripted([json(200, answer)]);
    const edit = {
      url_prefix: { from: "https://old.example/", to: "https://new.example/" },
      headers: { set: { Authorization: "Bearer new" }, remove: ["X-Old"] },
    };
    assert.deepEqual(await client.tasks.replayDead({ edit, dryRun: true }), answer);
    assert.deepEqual(JSON.parse(requests[0].body), { edit, dry_run: true });
  });

  it("stops with an error when a page hands back its own cursor", async () => {
    const same = () => json(200, { data: [TASK], next_cursor: "same" });
    const { client, requests } = scripted([same(), same(), same()]);
    const seen = [];
    await assert.rejects(async () => {
      for await (const task of client.tasks.list()) seen.push(task.id);
    }, /cursor same/);
    assert.equal(seen.length, 2);
    assert.equal(requests.length, 2);
  });

  it("stops reading pages when the loop stops", async () => {
    const { client, requests } = scripted([json(200, { data: [TASK, TASK], next_cursor: "more" })]);
    for await (const _ of client.tasks.list()) break;
    assert.equal(requests.length, 1);
  });

  it("calls each endpoint with its method and path", async () => {
    const schedule = { id: "s1" };
    const { client, requests } = scripted([
      json(200, TASK),
      json(200, { data: [{ attempt: 1 }] }),
      json(200, { canceled: 2 }),
      json(200, TASK),
      json(200, TASK),
      json(200, { data: [{ local: "x", utc: "y" }] }),
      json(200, schedule),
      json(200, schedule),
      json(200, { data: [schedule] }),
      json(200, { tenant: { id: "t", name: "acme" }, key: {} }),
      json(200, { window: "2h", minutes: [] }),
      json(200, { days: [], totals: { deliveries: 3 } }),
    ]);
    await client.tasks.replay(TASK.id, { url: "https://example.com/moved", headers: { "X-A": "1" } });
    assert.deepEqual(await client.tasks.attempts(TASK.id), [{ attempt: 1 }]);
    assert.deepEqual(await client.tasks.cancelMany({ status: "retrying" }), { canceled: 2 });
    await client.tasks.reschedule(TASK.id, { run_at: new Date("2030-01-01T00:00:00Z") });
    await client.tasks.replay(TASK.id);
    assert.deepEqual(await client.schedules.next("s1", 3), [{ local: "x", utc: "y" }]);
    await client.schedules.pause("s1");
    await client.schedules.resume("s1");
    const all = [];
    for await (const s of client.schedules.list()) all.push(s);
    assert.deepEqual(all, [schedule]);
    assert.equal((await client.me()).tenant.name, "acme");
    assert.equal((await client.stats("2h")).window, "2h");
    assert.equal((await client.usage({ from: new Date("2026-11-01T23:30:00-02:00"), to: "2026-11-30" })).totals.deliveries, 3);
    assert.deepEqual(
      requests.map((r) => `${r.method} ${r.url.pathname}${r.url.search} ${r.body}`),
      [
        `POST /v1/tasks/${TASK.id}/replay {"url":"https://example.com/moved","headers":{"X-A":"1"}}`,
        `GET /v1/tasks/${TASK.id}/attempts `,
        `POST /v1/tasks/cancel {"status":"retrying"}`,
        `PATCH /v1/tasks/${TASK.id} {"run_at":"2030-01-01T00:00:00.000Z"}`,
        `POST /v1/tasks/${TASK.id}/replay `,
        "GET /v1/schedules/s1/next?count=3 ",
        "POST /v1/schedules/s1/pause ",
        "POST /v1/schedules/s1/resume ",
        "GET /v1/schedules ",
        "GET /v1/me ",
        "GET /v1/stats?window=2h ",
        "GET /v1/usage?from=2026-11-02&to=2026-11-30 ",
      ],
    );
  });

  it("pages through a task's attempts, oldest first", async () => {
    const { client, requests } = scripted([
      json(200, { data: [{ attempt: 1 }, { attempt: 2 }], next_cursor: "c2" }),
      json(200, { data: [{ attempt: 3 }] }),
      json(200, { data: [{ attempt: 1 }], next_cursor: "c1" }),
      json(200, { data: [{ attempt: 2 }] }),
      json(200, { data: [{ attempt: 1 }], next_cursor: "c1" }),
    ]);
    const seen = [];
    for await (const a of client.tasks.listAttempts(TASK.id, { pageSize: 2 })) seen.push(a.attempt);
    assert.deepEqual(seen, [1, 2, 3]);
    assert.deepEqual(await client.tasks.attempts(TASK.id), [{ attempt: 1 }, { attempt: 2 }], "every page");
    assert.deepEqual(await client.tasks.attemptsPage(TASK.id, { limit: 1 }), { data: [{ attempt: 1 }], next_cursor: "c1" });
    assert.deepEqual(
      requests.map((r) => `${r.method} ${r.url.pathname}${r.url.search}`),
      [
        `GET /v1/tasks/${TASK.id}/attempts?limit=2`,
        `GET /v1/tasks/${TASK.id}/attempts?limit=2&cursor=c2`,
        `GET /v1/tasks/${TASK.id}/attempts`,
        `GET /v1/tasks/${TASK.id}/attempts?cursor=c1`,
        `GET /v1/tasks/${TASK.id}/attempts?limit=1`,
      ],
    );
  });

  it("updates a schedule with a merge patch, nulls included, retried on 503", async () => {
    const schedule = { id: "s1", cron: "*/5 * * * *" };
    const { client, requests } = scripted([problem(503, "Service Unavailable", "restarting", { "Retry-After": "0" }), json(200, schedule)]);
    const patch = { cron: "*/5 * * * *", timezone: null, headers: { "X-Old": null, "X-New": "1" }, retry: { min_backoff: null } };
    assert.deepEqual(await client.schedules.update("s1", patch), schedule);
    assert.equal(requests.length, 2, "a merge patch is safe to send again");
    for (const r of requests) {
      assert.equal(`${r.method} ${r.url.pathname}`, "PATCH /v1/schedules/s1");
      assert.equal(r.headers.get("Content-Type"), "application/merge-patch+json");
      assert.deepEqual(JSON.parse(r.body), patch);
    }
  });

  it("publishes to a topic, with a key, and manages topics", async () => {
    const publish = { id: "p1", topic: "orders", tasks: [{ ...TASK, topic: "orders", publish_id: "p1" }] };
    const topic = { name: "orders", description: "", endpoints: [{ url: TASK.url }] };
    const { client, requests } = scripted([
      problem(503, "Service Unavailable", "restarting", { "Retry-After": "0" }),
      json(201, publish),
      json(200, publish),
      json(201, topic),
      json(200, topic),
      json(200, { data: [topic], next_cursor: "c1" }),
      json(200, { data: [] }),
      json(200, topic),
    ]);
    assert.deepEqual(await client.topics.publish("orders", { body: "{}", delay: "1m" }, { idempotencyKey: "k" }), publish);
    assert.deepEqual(await client.topics.getPublish("p1"), publish);
    assert.deepEqual(await client.topics.put("orders", { endpoints: [{ url: TASK.url, name: "a" }] }), topic);
    assert.deepEqual(await client.topics.get("orders"), topic);
    const all = [];
    for await (const t of client.topics.list({ pageSize: 1 })) all.push(t.name);
    assert.deepEqual(all, ["orders"]);
    assert.deepEqual(await client.topics.delete("orders"), topic);
    assert.equal(requests[0].headers.get("Idempotency-Key"), "k");
    assert.equal(requests[1].headers.get("Idempotency-Key"), "k", "a publish is retried with its key");
    assert.deepEqual(
      requests.map((r) => `${r.method} ${r.url.pathname}${r.url.search} ${r.body}`),
      [
        `POST /v1/tasks {"body":"{}","delay":"1m","topic":"orders"}`,
        `POST /v1/tasks {"body":"{}","delay":"1m","topic":"orders"}`,
        "GET /v1/publishes/p1 ",
        `PUT /v1/topics/orders {"endpoints":[{"url":"${TASK.url}","name":"a"}]}`,
        "GET /v1/topics/orders ",
        "GET /v1/topics?limit=1 ",
        "GET /v1/topics?limit=1&cursor=c1 ",
        "DELETE /v1/topics/orders ",
      ],
    );
  });

  it("pauses, resumes and lists targets", async () => {
    const pause = {
      target: "https://api.partner.com:443",
      paused_at: "2026-11-28T13:40:00Z",
      paused_by: "tenant",
      reason: "migration",
    };
    const { client, requests } = scripted([
      problem(503, "Service Unavailable", "restarting", { "Retry-After": "0" }),
      json(201, pause),
      json(200, { data: [pause] }),
      json(200, pause),
    ]);
    assert.deepEqual(await client.targets.pause("https://api.partner.com", { reason: "migration" }), pause);
    assert.deepEqual(await client.targets.listPaused(), [pause]);
    assert.deepEqual(await client.targets.resume("https://api.partner.com:443"), pause);
    assert.deepEqual(
      requests.map((r) => `${r.method} ${r.url.pathname} ${r.body}`),
      [
        `POST /v1/targets/pause {"target":"https://api.partner.com","reason":"migration"}`,
        `POST /v1/targets/pause {"target":"https://api.partner.com","reason":"migration"}`,
        "GET /v1/targets/paused ",
        `POST /v1/targets/resume {"target":"https://api.partner.com:443"}`,
      ],
    );
  });

  it("reads and changes the tenant's settings, null clearing the operations URL", async () => {
    const set = { operations_url: "https://ops.acme.example/hookwheel" };
    const { client, requests } = scripted([
      json(200, { operations_url: null }),
      problem(503, "Service Unavailable", "restarting", { "Retry-After": "0" }),
      json(200, set),
      json(200, { operations_url: null }),
    ]);
    assert.deepEqual(await client.settings.get(), { operations_url: null });
    assert.deepEqual(await client.settings.update(set), set);
    assert.deepEqual(await client.settings.update({ operations_url: null }), { operations_url: null });
    assert.deepEqual(
      requests.map((r) => `${r.method} ${r.url.pathname} ${r.body}`),
      [
        "GET /v1/settings ",
        `PATCH /v1/settings {"operations_url":"https://ops.acme.example/hookwheel"}`,
        `PATCH /v1/settings {"operations_url":"https://ops.acme.example/hookwheel"}`,
        `PATCH /v1/settings {"operations_url":null}`,
      ],
    );
  });

  it("manages flow keys, every character of a key in the path, and sends flow_key with a task", async () => {
    const limit = { key: "acme:eu@x+1=y", rate: 100, period: "1s", parallelism: 5 };
    const { client, requests } = scripted([
      problem(503, "Service Unavailable", "restarting", { "Retry-After": "0" }),
      json(201, limit),
      json(200, { ...limit, key: "*" }),
      json(200, limit),
      json(200, { data: [limit], next_cursor: "c1" }),
      json(200, { data: [] }),
      json(200, limit),
      json(201, { ...TASK, flow_key: "acme:eu@x+1=y" }),
    ]);
    assert.deepEqual(await client.flowKeys.put("acme:eu@x+1=y", { rate: 100, period: "1s", parallelism: 5 }), limit);
    assert.equal((await client.flowKeys.put("*", { parallelism: 2 })).key, "*");
    assert.deepEqual(await client.flowKeys.get("acme:eu@x+1=y"), limit);
    const all = [];
    for await (const l of client.flowKeys.list({ pageSize: 1 })) all.push(l.key);
    assert.deepEqual(all, ["acme:eu@x+1=y"]);
    assert.deepEqual(await client.flowKeys.delete("acme:eu@x+1=y"), limit);
    const task = await client.tasks.create({ url: TASK.url, flow_key: "acme:eu@x+1=y" });
    assert.equal(task.flow_key, "acme:eu@x+1=y");
    assert.deepEqual(
      requests.map((r) => `${r.method} ${decodeURIComponent(r.url.pathname)}${r.url.search} ${r.body}`),
      [
        `PUT /v1/flow-keys/acme:eu@x+1=y {"rate":100,"period":"1s","parallelism":5}`,
        `PUT /v1/flow-keys/acme:eu@x+1=y {"rate":100,"period":"1s","parallelism":5}`,
        `PUT /v1/flow-keys/* {"parallelism":2}`,
        "GET /v1/flow-keys/acme:eu@x+1=y ",
        "GET /v1/flow-keys?limit=1 ",
        "GET /v1/flow-keys?limit=1&cursor=c1 ",
        "DELETE /v1/flow-keys/acme:eu@x+1=y ",
        `POST /v1/tasks {"url":"${TASK.url}","flow_key":"acme:eu@x+1=y"}`,
      ],
    );
  });

  it("makes, lists and revokes portal links: a create never repeated, a revoke retried", async () => {
    const link = {
      id: "0193a2b4-7d4a-7c1e-9f00-5b2d1c3e4f51", label: "customer:42", name: "Acme", description: "",
      created_at: "2026-11-28T10:00:00Z", created_by: "key:k", expires_at: "2026-11-28T11:00:00Z",
    };
    const busy = () => problem(503, "Service Unavailable", "restarting", { "Retry-After": "0" });
    const { client, requests } = scripted([
      json(201, { ...link, url: "http://hookwheel.test/portal/#hwpl_a_b" }),
      busy(),
      json(200, { data: [link], next_cursor: "c1" }),
      json(200, { data: [] }),
      busy(),
      json(200, { ...link, revoked_at: "2026-11-28T10:20:00Z" }),
    ]);
    const created = await client.portalLinks.create({ label: "customer:42", expires_in: "24h", name: "Acme" });
    assert.equal(created.url, "http://hookwheel.test/portal/#hwpl_a_b");
    await assert.rejects(client.portalLinks.create({ label: "customer:42" }), (err) => err.status === 503);
    const all = [];
    for await (const l of client.portalLinks.list({ pageSize: 1 })) all.push(l.id);
    assert.deepEqual(all, [link.id]);
    assert.equal((await client.portalLinks.revoke(link.id)).revoked_at, "2026-11-28T10:20:00Z");
    assert.deepEqual(
      requests.map((r) => `${r.method} ${r.url.pathname}${r.url.search} ${r.body}`),
      [
        `POST /v1/portal-links {"label":"customer:42","expires_in":"24h","name":"Acme"}`,
        `POST /v1/portal-links {"label":"customer:42"}`,
        "GET /v1/portal-links?limit=1 ",
        "GET /v1/portal-links?limit=1&cursor=c1 ",
        `DELETE /v1/portal-links/${link.id} `,
        `DELETE /v1/portal-links/${link.id} `,
      ],
    );
  });

  it("manages plans with the admin token, a plan in use refused with a 409", async () => {
    const plan = { name: "free", limits: { tasks_per_day: 1000, api_rate: 0 }, created_at: TASK.created_at, updated_at: TASK.updated_at };
    const { client, requests } = scripted([
      problem(503, "Service Unavailable", "restarting", { "Retry-After": "0" }),
      json(201, plan),
      json(200, plan),
      json(200, { data: [plan] }),
      problem(409, "Plan in use", "plan free has tenants on it"),
      new Response(null, { status: 204 }),
    ]);
    assert.deepEqual(await client.plans.put("free", { tasks_per_day: 1000, api_rate: 0 }), plan);
    assert.deepEqual(await client.plans.get("free"), plan);
    assert.deepEqual(await client.plans.list(), [plan]);
    await assert.rejects(client.plans.delete("free"), (err) => err instanceof HookwheelError && err.status === 409);
    assert.equal(await client.plans.delete("free"), undefined);
    assert.deepEqual(
      requests.map((r) => `${r.method} ${r.url.pathname} ${r.body}`),
      [
        `PUT /v1/admin/plans/free {"tasks_per_day":1000,"api_rate":0}`,
        `PUT /v1/admin/plans/free {"tasks_per_day":1000,"api_rate":0}`,
        "GET /v1/admin/plans/free ",
        "GET /v1/admin/plans ",
        "DELETE /v1/admin/plans/free ",
        "DELETE /v1/admin/plans/free ",
      ],
    );
  });

  it("keeps tasks and publishes apart", async () => {
    const { client, requests } = scripted([]);
    await assert.rejects(client.tasks.create({ url: TASK.url, topic: "orders" }), TypeError);
    await assert.rejects(client.topics.publish("orders", { url: TASK.url }), TypeError);
    assert.equal(requests.length, 0);
  });

  it("refuses to start without an http(s) base URL or a key", () => {
    assert.throws(() => createClient({ baseUrl: "", apiKey: "k" }), TypeError);
    assert.throws(() => createClient({ baseUrl: "localhost:8080", apiKey: "k" }), TypeError);
    assert.throws(() => createClient({ baseUrl: "ftp://x", apiKey: "k" }), TypeError);
    assert.throws(() => createClient({ baseUrl: "http://x", apiKey: "" }), TypeError);
  });
});

describe("parseRetryAfter", () => {
  const now = Date.parse("2026-11-22T10:00:00Z");
  it("reads seconds and HTTP dates", () => {
    assert.equal(parseRetryAfter("0", now), 0);
    assert.equal(parseRetryAfter(" 12 ", now), 12_000);
    assert.equal(parseRetryAfter("Sun, 22 Nov 2026 10:00:05 GMT", now), 5_000);
    assert.equal(parseRetryAfter("Sun, 22 Nov 2026 09:59:00 GMT", now), 0);
  });
  it("ignores what is neither", () => {
    for (const v of [null, undefined, "", "-1", "1.5", "soon", "12abc"])
      assert.equal(parseRetryAfter(v, now), undefined, String(v));
  });
});
