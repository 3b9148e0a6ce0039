// Compiled by typecheck.test.js, never run: code a user would write, checked
// against the published declarations (dist/*.d.ts through package.json's
// exports), so that a type the API document changes breaks here first.
import { createClient, HookwheelError, verifyWebhook, WebhookVerificationError } from "@hookwheel/sdk";
import type { Attempt, FlowLimit, Page, Publish, Schedule, Task, TaskStatus, Topic, WebhookFailure } from "@hookwheel/sdk";
import { verifyWebhookSignature } from "@hookwheel/sdk/webhook";

export async function usage(): Promise<void> {
  const hw = createClient({ baseUrl: "http://localhost:8080", apiKey: "hw_a_b", retry: { maxTries: 2 } });

  // Only url is required; run_at takes a Date.
  const task: Task = await hw.tasks.create({ url: "https://example.com/hook" });
  await hw.tasks.create(
    { url: "https://example.com/hook", run_at: new Date(), retry: { max_attempts: 3 } },
    { idempotencyKey: "k" },
  );
  const status: TaskStatus = task.status;
  const code: number | null = task.last_status_code;

  for await (const t of hw.tasks.list({ status: "dead", url: "https://example.com/", pageSize: 10 })) {
    const id: string = t.id;
    void id;
  }
  const page: Page<Task> = await hw.tasks.listPage({ limit: 5 });
  const next: string | null | undefined = page.next_cursor;

  await hw.tasks.reschedule(task.id, { delay: "10m" });
  await hw.tasks.reschedule(task.id, { run_at: new Date() });
  // @ts-expect-error run_at and delay are exclusive
  await hw.tasks.reschedule(task.id, { delay: "10m", run_at: "2030-01-01T00:00:00Z" });
  await hw.tasks.replay(task.id, { method: "PUT", headers: { "X-A": "1" } });
  // @ts-expect-error not a method the API takes
  await hw.tasks.replay(task.id, { method: "HEAD" });
  const attempts: Attempt[] = await hw.tasks.attempts(task.id);
  const results = await hw.tasks.batch([{ url: "https://example.com/a", idempotency_key: "a" }]);
  const first: Task | undefined = results[0]?.task;
  const { matched, replayed } = await hw.tasks.replayDead({ dryRun: true });
  const moved = await hw.tasks.replayDead({
    edit: { url_prefix: { from: "https://old.example/", to: "https://new.example/" }, headers: { remove: ["X-Old"] } },
    dryRun: true,
  });
  const firstChange: string | undefined = moved.sample?.[0]?.url_after;
  // @ts-expect-error a URL prefix move needs both ends
  await hw.tasks.replayDead({ edit: { url_prefix: { from: "https://old.example/" } } });

  // @ts-expect-error a task needs a url
  await hw.tasks.create({ body: "x" });
  // @ts-expect-error a topic is published, not created
  await hw.tasks.create({ url: "https://example.com/hook", topic: "orders" });

  const topic: Topic = await hw.topics.put("orders", { endpoints: [{ url: "https://example.com/a", name: "a" }] });
  const published: Publish = await hw.topics.publish("orders", { body: "{}", run_at: new Date() }, { idempotencyKey: "k" });
  const deliveries: Task[] = published.tasks;
  const dead2: number = (await hw.topics.getPublish(published.id)).status_counts.dead;
  for await (const t of hw.topics.list()) void t.endpoints;
  const publishedBatch: Publish | undefined = (await hw.tasks.batch([{ topic: "orders" }]))[0]?.publish;

  const limit: FlowLimit = await hw.flowKeys.put("customer-1042", { rate: 100, period: "1s", parallelism: 5 });
  const period: string = (await hw.flowKeys.get("*")).period;
  for await (const l of hw.flowKeys.list({ pageSize: 10 })) void l.rate;
  await hw.flowKeys.delete("customer-1042");
  // @ts-expect-error a rate is a number
  await hw.flowKeys.put("customer-1042", { rate: "100" });
  const keyed: string | undefined = (await hw.tasks.create({ url: "https://example.com/hook", flow_key: "customer-1042" })).flow_key;

  const schedule: Schedule = await hw.schedules.create({ cron: "@hourly", url: "https://example.com/s", flow_key: "customer-1042" });
  await hw.schedules.update(schedule.id, { flow_key: null });
  const times = await hw.schedules.next(schedule.id, 3);
  const utc: string | undefined = times[0]?.utc;
  const me = await hw.me();
  const tenant: string = me.tenant.name;
  const stats = await hw.stats("1h");
  const dead: number = stats.tasks_by_status.dead;

  // The untyped rest of the API, typed.
  const { data } = await hw.raw.GET("/v1/limits");
  const pending: number | undefined = data?.pending_tasks;

  try {
    await hw.tasks.get("x");
  } catch (err) {
    if (err instanceof HookwheelError) {
      const fields: string[] = err.errors.map((e) => e.field);
      const wait: number | undefined = err.retryAfterMs;
      void [fields, wait, err.status, err.type, err.title, err.detail];
    }
  }

  const headers = new Headers();
  const payload = await verifyWebhook<{ order: number }>(["whsec_a"], headers, new Uint8Array(), { url: "https://x" });
  const order: number = payload.order;
  const plain = await verifyWebhook("whsec_a", { "webhook-id": "x", "x-many": ["a", "b"], absent: undefined }, "{}");
  const raw = await verifyWebhookSignature("whsec_a", headers, "{}");
  const when: Date = raw.timestamp;
  try {
    await verifyWebhook("whsec_a", headers, "");
  } catch (err) {
    if (err instanceof WebhookVerificationError) {
      const reason: WebhookFailure = err.reason;
      void reason;
    }
  }
  void [status, code, next, attempts, first, matched, replayed, firstChange, utc, tenant, dead, pending, order, plain, when];
  void [topic, deliveries, dead2, publishedBatch, limit, period, keyed];
}
