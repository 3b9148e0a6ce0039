// The client and verifyWebhook against a running hookwheel server. They run
// when HOOKWHEEL_URL and HOOKWHEEL_API_KEY are set, and skip otherwise; the
// ones that need webhooks delivered also need a receiver the server can reach:
//
//   HOOKWHEEL_URL       the API, such as http://localhost:8080
//   HOOKWHEEL_API_KEY   a tenant's API key (every scope)
//   RECEIVER_URL        a receiver recording every request; paths containing
//                       /fail answer 400, all others 200
//   RECEIVED_URL        GET: {"data": [{"method", "path", "headers": {name: [values]},
//                       "body_base64"}]}, what RECEIVER_URL got, oldest first
//   SIGNING_SECRET      the tenant's signing secret
//
// `go test -run TypeScript ./cmd/hookwheel/internal/e2e/` starts a server and
// a receiver and runs these with HOOKWHEEL_LIVE_REQUIRED=1, under which a
// missing variable fails instead of skipping.
import { randomUUID } from "node:crypto";
import { describe, it, before } from "node:test";
import assert from "node:assert/strict";

import { createClient, HookwheelError, verifyWebhook, WebhookVerificationError } from "../dist/index.js";

const env = process.env;
const apiVars = ["HOOKWHEEL_URL", "HOOKWHEEL_API_KEY"];
const receiverVars = ["RECEIVER_URL", "RECEIVED_URL", "SIGNING_SECRET"];
const missing = (names) => names.filter((n) => !env[n]);
const required = env.HOOKWHEEL_LIVE_REQUIRED === "1";

if (required) {
  it("has every variable the live tests need", () => {
    assert.deepEqual(missing([...apiVars, ...receiverVars]), []);
  });
}

const skipAPI = missing(apiVars).length > 0 && `set ${apiVars.join(" and ")} to run`;
const skipDelivery = skipAPI || (missing(receiverVars).length > 0 && `set ${receiverVars.join(", ")} to run`);

// Every URL of this run starts with it, so that tasks of earlier runs on the
// same tenant are never counted.
const run = randomUUID();
const at = (path) => `${env.RECEIVER_URL ?? "http://127.0.0.1:9"}/${run}/${path}`;

const hw = skipAPI ? undefined : createClient({ baseUrl: env.HOOKWHEEL_URL, apiKey: env.HOOKWHEEL_API_KEY });

async function waitStatus(id, status, withinMs = 20_000) {
  const deadline = Date.now() + withinMs;
  for (;;) {
    const task = await hw.tasks.get(id);
    if (task.status === status) return task;
    if (Date.now() > deadline) assert.fail(`task ${id} is ${task.status} after ${withinMs}ms, want ${status}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The requests the receiver got for one webhook-id, oldest first. */
async function received(webhookID) {
  const res = await fetch(env.RECEIVED_URL);
  assert.equal(res.status, 200);
  const { data } = await res.json();
  return data
    .map((r) => ({
      ...r,
      headers: new Headers(Object.entries(r.headers).flatMap(([k, vs]) => vs.map((v) => [k, v]))),
      body: new Uint8Array(Buffer.from(r.body_base64, "base64")),
    }))
    .filter((r) => r.headers.get("webhook-id") === webhookID);
}

async function cancelAll(tasks) {
  await Promise.all(tasks.map((t) => hw.tasks.cancel(t.id)));
}

describe("live: tasks", { skip: skipAPI }, () => {
  it("says who is calling", async () => {
    const me = await hw.me();
    assert.ok(me.tenant.id);
    assert.ok(me.key.id);
  });

  it("creates a task, gets it, and creates nothing more for the same key", async () => {
    const key = `sdk-ts-${run}`;
    const created = await hw.tasks.create({ url: at("later"), body: '{"n":1}', delay: "1h" }, { idempotencyKey: key });
    assert.equal(created.status, "scheduled");
    assert.equal(created.idempotency_key, key);
    const got = await hw.tasks.get(created.id);
    assert.equal(got.id, created.id);
    assert.equal(got.body, '{"n":1}');
    const again = await hw.tasks.create({ url: at("later"), body: '{"n":1}', delay: "1h" }, { idempotencyKey: key });
    assert.equal(again.id, created.id);
    await hw.tasks.cancel(created.id);
  });

  it("lists every task across small pages, then cancels them", async () => {
    const created = [];
    for (let i = 0; i < 5; i++) created.push(await hw.tasks.create({ url: at(`list/${i}`), delay: "1h" }));
    const prefix = at("list/");

    const first = await hw.tasks.listPage({ url: prefix, limit: 2 });
    assert.equal(first.data.length, 2);
    assert.ok(first.next_cursor, "a first page of 2 out of 5 has a next_cursor");

    const listed = [];
    for await (const task of hw.tasks.list({ url: prefix, pageSize: 2 })) listed.push(task.id);
    // Newest first.
    assert.deepEqual(listed, created.map((t) => t.id).reverse());

    await cancelAll(created);
    for (const t of created) assert.equal((await hw.tasks.get(t.id)).status, "canceled");
    const canceled = [];
    for await (const task of hw.tasks.list({ url: prefix, status: "canceled" })) canceled.push(task.id);
    assert.equal(canceled.length, 5);

    const err = await hw.tasks.cancel(created[0].id).catch((e) => e);
    assert.ok(err instanceof HookwheelError, String(err));
    assert.equal(err.status, 409);
  });

  it("reschedules a task", async () => {
    const task = await hw.tasks.create({ url: at("reschedule"), delay: "1h" });
    const runAt = new Date(Date.now() + 2 * 3600_000);
    const moved = await hw.tasks.reschedule(task.id, { run_at: runAt });
    assert.equal(Date.parse(moved.run_at), runAt.getTime());
    await hw.tasks.cancel(task.id);
  });

  it("creates a batch, item by item", async () => {
    const results = await hw.tasks.batch([
      { url: at("batch/0"), delay: "1h", idempotency_key: `${run}-b0` },
      { url: at("batch/1"), delay: "1h", idempotency_key: `${run}-b1` },
      { url: "not a url", idempotency_key: `${run}-b2` },
    ]);
    assert.equal(results.length, 3);
    assert.equal(results[0].task.url, at("batch/0"));
    assert.equal(results[1].task.url, at("batch/1"));
    assert.equal(results[2].error.status, 422);
    assert.ok(
      results[2].error.errors.some((e) => e.field === "url"),
      JSON.stringify(results[2].error),
    );

    const again = await hw.tasks.batch([{ url: at("batch/0"), delay: "1h", idempotency_key: `${run}-b0` }]);
    assert.equal(again[0].task.id, results[0].task.id);
    assert.equal(again[0].replayed, true);
    await cancelAll([results[0].task, results[1].task]);
  });

  it("answers an unknown task with problem details", async () => {
    const err = await hw.tasks.get(randomUUID()).catch((e) => e);
    assert.ok(err instanceof HookwheelError, String(err));
    assert.equal(err.status, 404);
    assert.ok(err.title);
    assert.ok(err.type);
    assert.ok(err.detail);
  });

  it("refuses an invalid task, naming the field", async () => {
    const err = await hw.tasks.create({ url: at("x"), retry: { max_attempts: 0 } }).catch((e) => e);
    assert.ok(err instanceof HookwheelError, String(err));
    assert.equal(err.status, 422);
    assert.ok(
      err.errors.some((e) => e.field === "retry.max_attempts"),
      JSON.stringify(err.errors),
    );
  });

  it("gives statistics", async () => {
    const stats = await hw.stats("5m");
    assert.equal(stats.minutes.length, 5);
    assert.equal(typeof stats.tasks_by_status.canceled, "number");
  });
});

describe("live: topics", { skip: skipAPI }, () => {
  it("puts a topic, publishes to it once per key, finds the publish's tasks, and deletes it", async () => {
    const name = `sdk-ts-${run}`;
    const topic = await hw.topics.put(name, { description: "from the TypeScript SDK", endpoints: [
      { url: at("topic/a"), name: "a" },
      { url: at("topic/b") },
    ] });
    assert.equal(topic.endpoints.length, 2);
    assert.equal((await hw.topics.get(name)).endpoints[0].name, "a");
    let found = false;
    for await (const t of hw.topics.list({ pageSize: 1 })) found ||= t.name === name;
    assert.ok(found, "the topic is listed");

    const key = `sdk-ts-publish-${run}`;
    const pub = await hw.topics.publish(name, { body: '{"n":1}', delay: "1h" }, { idempotencyKey: key });
    assert.deepEqual(pub.tasks.map((t) => t.url), [at("topic/a"), at("topic/b")]);
    assert.equal(pub.status_counts.scheduled, 2);
    const again = await hw.topics.publish(name, { body: '{"n":1}', delay: "1h" }, { idempotencyKey: key });
    assert.equal(again.id, pub.id);
    const read = await hw.topics.getPublish(pub.id);
    assert.deepEqual(read.tasks.map((t) => t.id), pub.tasks.map((t) => t.id));
    const listed = [];
    for await (const t of hw.tasks.list({ publish_id: pub.id })) listed.push(t.id);
    assert.equal(listed.length, 2);

    const err = await hw.topics.publish(`${name}-missing`).catch((e) => e);
    assert.ok(err instanceof HookwheelError, String(err));
    assert.equal(err.status, 422);
    assert.ok(err.errors.some((e) => e.field === "topic"), JSON.stringify(err.errors));

    await cancelAll(pub.tasks);
    assert.equal((await hw.topics.delete(name)).name, name);
    const gone = await hw.topics.get(name).catch((e) => e);
    assert.equal(gone.status, 404);
  });
});

describe("live: flow keys", { skip: skipAPI }, () => {
  it("puts a key's limits, replaces, lists, reads and deletes them, and tasks and schedules carry the key", async () => {
    // Every character a key may hold, so that the path carries them all.
    const prefix = `sdk-ts:${run}@eu+1=`;
    const keys = [`${prefix}a`, `${prefix}b`];
    const created = await hw.flowKeys.put(keys[0], { rate: 100, period: "1m", parallelism: 5 });
    assert.equal(created.key, keys[0]);
    assert.equal(created.rate, 100);
    assert.equal(created.parallelism, 5);
    const replaced = await hw.flowKeys.put(keys[0], { parallelism: 2 });
    assert.deepEqual(
      { rate: replaced.rate, period: replaced.period, parallelism: replaced.parallelism },
      { rate: 0, period: "1s", parallelism: 2 },
      "replaced whole: no rate, the default period",
    );
    assert.deepEqual(await hw.flowKeys.get(keys[0]), replaced);
    await hw.flowKeys.put(keys[1], { rate: 10 });
    const listed = [];
    for await (const l of hw.flowKeys.list({ pageSize: 1 })) if (l.key.startsWith(prefix)) listed.push(l.key);
    assert.deepEqual(listed, keys, "every page, in key order");

    const invalid = await hw.flowKeys.put(keys[1], {}).catch((e) => e);
    assert.ok(invalid instanceof HookwheelError, String(invalid));
    assert.equal(invalid.status, 422);

    const def = await hw.flowKeys.put("*", { parallelism: 1000 });
    assert.equal(def.key, "*");
    assert.equal((await hw.flowKeys.get("*")).parallelism, 1000);
    await hw.flowKeys.delete("*");

    const task = await hw.tasks.create({ url: at("flow"), delay: "1h", flow_key: keys[0] });
    assert.equal(task.flow_key, keys[0]);
    assert.equal((await hw.tasks.get(task.id)).flow_key, keys[0]);
    await hw.tasks.cancel(task.id);
    const schedule = await hw.schedules.create({ cron: "@daily", url: at("flow-daily"), paused: true, flow_key: keys[0] });
    assert.equal(schedule.flow_key, keys[0]);
    assert.equal((await hw.schedules.update(schedule.id, { flow_key: keys[1] })).flow_key, keys[1]);
    assert.equal((await hw.schedules.update(schedule.id, { flow_key: null })).flow_key, undefined, "null removes it");
    await hw.schedules.delete(schedule.id);

    assert.deepEqual(await hw.flowKeys.delete(keys[0]), replaced);
    await hw.flowKeys.delete(keys[1]);
    const gone = await hw.flowKeys.get(keys[0]).catch((e) => e);
    assert.ok(gone instanceof HookwheelError, String(gone));
    assert.equal(gone.status, 404);
    assert.equal((await hw.flowKeys.delete(keys[0]).catch((e) => e)).status, 404);
  });
});

describe("live: schedules", { skip: skipAPI }, () => {
  it("creates, lists, pauses, resumes, previews and deletes a schedule", async () => {
    const created = await hw.schedules.create({
      cron: "0 9 * * *",
      timezone: "Europe/Paris",
      url: at("schedule"),
      body: "{}",
    });
    assert.equal(created.paused, false);
    assert.ok(created.next_run_at);

    let found;
    for await (const s of hw.schedules.list({ pageSize: 1 })) {
      if (s.id === created.id) {
        found = s;
        break;
      }
    }
    assert.ok(found, "the new schedule is listed");

    const next = await hw.schedules.next(created.id, 3);
    assert.equal(next.length, 3);
    assert.ok(Date.parse(next[0].utc) < Date.parse(next[1].utc));
    assert.match(next[0].local, /T09:00:00\+0[12]:00$/);

    // A merge patch: what is given changes, null resets, the rest is kept.
    const updated = await hw.schedules.update(created.id, {
      cron: "30 8 * * 1-5",
      timezone: "America/New_York",
      body: null,
      headers: { "X-Version": "2" },
    });
    assert.equal(updated.cron, "30 8 * * 1-5");
    assert.equal(updated.timezone, "America/New_York");
    assert.equal(updated.body ?? "", "");
    assert.deepEqual(updated.headers, { "X-Version": "2" });
    assert.equal(updated.url, created.url);
    assert.match((await hw.schedules.next(created.id, 1))[0].local, /T08:30:00-0[45]:00$/);
    const invalid = await hw.schedules.update(created.id, { cron: null }).catch((e) => e);
    assert.ok(invalid instanceof HookwheelError, String(invalid));
    assert.equal(invalid.status, 422);
    assert.ok(invalid.errors.some((e) => e.field === "cron"), JSON.stringify(invalid.errors));

    const paused = await hw.schedules.pause(created.id);
    assert.equal(paused.paused, true);
    assert.equal(paused.next_run_at, null);
    assert.equal((await hw.schedules.resume(created.id)).paused, false);
    assert.equal((await hw.schedules.get(created.id)).paused, false);

    assert.equal((await hw.schedules.delete(created.id)).id, created.id);
    const err = await hw.schedules.get(created.id).catch((e) => e);
    assert.ok(err instanceof HookwheelError, String(err));
    assert.equal(err.status, 404);
  });
});

describe("live: delivered webhooks", { skip: skipDelivery }, () => {
  let delivered;
  const body = JSON.stringify({ order: 42, note: "café ☕" });

  before(async () => {
    delivered = await hw.tasks.create({
      url: at("deliver?kind=order"),
      body,
      headers: { "Content-Type": "application/json" },
    });
  });

  it("verifies the webhook the server sent", async () => {
    await waitStatus(delivered.id, "delivered");
    const [req] = await received(delivered.id);
    assert.ok(req, "the receiver got the webhook");
    assert.equal(req.method, "POST");
    const payload = await verifyWebhook(env.SIGNING_SECRET, req.headers, req.body, { url: delivered.url });
    assert.deepEqual(payload, { order: 42, note: "café ☕" });
    // The same, with the body as text and the headers as a plain object.
    const plain = Object.fromEntries(req.headers);
    assert.deepEqual(await verifyWebhook([env.SIGNING_SECRET], plain, new TextDecoder().decode(req.body)), payload);

    const tampered = new Uint8Array(req.body);
    tampered[tampered.length - 2] ^= 1;
    await assert.rejects(
      verifyWebhook(env.SIGNING_SECRET, req.headers, tampered),
      (e) => e instanceof WebhookVerificationError && e.reason === "no_matching_signature",
    );
    await assert.rejects(
      verifyWebhook(env.SIGNING_SECRET, req.headers, req.body, { url: at("elsewhere") }),
      (e) => e.reason === "jwt_subject",
    );
    const otherSecret = `whsec_${Buffer.from(randomUUID() + randomUUID()).toString("base64")}`;
    await assert.rejects(
      verifyWebhook(otherSecret, req.headers, req.body),
      (e) => e.reason === "no_matching_signature",
    );

    const attempts = await hw.tasks.attempts(delivered.id);
    assert.equal(attempts.length, 1);
    assert.equal(attempts[0].outcome, "success");
    assert.equal(attempts[0].status_code, 200);
  });

  it("replays it, then replays it edited", async () => {
    const replayed = await hw.tasks.replay(delivered.id);
    assert.equal(replayed.status, "scheduled");
    await waitStatus(delivered.id, "delivered");
    assert.equal((await received(delivered.id)).length, 2);

    const url = at("edited");
    const edited = await hw.tasks.replay(delivered.id, {
      url,
      method: "PUT",
      headers: { "X-Edited": "yes" },
      body: '{"edited":true}',
    });
    assert.equal(edited.url, url);
    await waitStatus(delivered.id, "delivered");
    const reqs = await received(delivered.id);
    assert.equal(reqs.length, 3);
    const last = reqs[2];
    assert.equal(last.method, "PUT");
    assert.equal(last.path, new URL(url).pathname);
    assert.equal(last.headers.get("x-edited"), "yes");
    assert.equal(last.headers.get("hookwheel-attempt"), "3");
    assert.deepEqual(await verifyWebhook(env.SIGNING_SECRET, last.headers, last.body, { url }), { edited: true });

    const attempts = await hw.tasks.attempts(delivered.id);
    assert.deepEqual(
      attempts.map((a) => a.attempt),
      [1, 2, 3],
    );
  });

  it("counts dead tasks for a bulk replay without replaying them", async () => {
    const dead = await hw.tasks.create({ url: at("fail/1"), retry: { max_attempts: 1 } });
    await waitStatus(dead.id, "dead");
    const result = await hw.tasks.replayDead({ url: at("fail/"), dryRun: true });
    assert.deepEqual(result, { matched: 1, replayed: 0 });
    assert.equal((await hw.tasks.get(dead.id)).status, "dead");

    const deadOnes = [];
    for await (const t of hw.tasks.list({ status: "dead", url: at("fail/") })) deadOnes.push(t.id);
    assert.deepEqual(deadOnes, [dead.id]);
  });
});
