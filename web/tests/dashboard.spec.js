// The dashboard in a real browser, against a live hookwheel started by the Go
// test TestDashboardInBrowser, which passes:
//   HOOKWHEEL_URL     the node's base URL
//   ADMIN_TOKEN       its admin token
//   TENANT_KEY        an API key of tenant "acme"
//   OTHER_KEY         an API key of tenant "globex"
//   RECEIVER_URL      a receiver: /ok answers 200; /fail 500; /flaky/* and
//                     /bulk/* 503 until POST /fix/flaky or /fix/bulk; /gone/*
//                     410; /moved/* 200 with X-Moved: yes and no X-Old-Token
//   SCREENSHOT_DIR    where the screenshots go
import { test, expect } from '@playwright/test';
import fs from 'node:fs';
import path from 'node:path';

const base = process.env.HOOKWHEEL_URL;
const receiver = process.env.RECEIVER_URL;
const tenantKey = process.env.TENANT_KEY;
const otherKey = process.env.OTHER_KEY;
const adminToken = process.env.ADMIN_TOKEN;
const shots = process.env.SCREENSHOT_DIR || 'screenshots';

test.describe.configure({ mode: 'serial' });

// The API as a tenant's program calls it.
async function call(request, key, method, url, data) {
  const r = await request.fetch(`${base}${url}`, { method, data, headers: { Authorization: `Bearer ${key}` } });
  const text = await r.text();
  if (!r.ok()) throw new Error(`${method} ${url}: ${r.status()} ${text}`);
  return text ? JSON.parse(text) : null;
}

async function createTask(request, key, task) {
  return call(request, key, 'POST', '/v1/tasks', { delay: '0s', ...task });
}

async function waitStatus(request, key, id, status) {
  await expect.poll(async () => (await call(request, key, 'GET', `/v1/tasks/${id}`)).status, { timeout: 30_000 }).toBe(status);
}

// shoot saves the page at 1280 and at 390 pixels wide: all of it, or with
// fullPage false only what the window shows (the API reference is tens of
// thousands of pixels long), after settle has run at each width.
async function shoot(page, name, { fullPage = true, settle = async () => {} } = {}) {
  fs.mkdirSync(shots, { recursive: true });
  for (const [width, height] of [[1280, 860], [390, 844]]) {
    await page.setViewportSize({ width, height });
    await page.waitForTimeout(150); // let charts redraw at the new width
    await settle();
    await page.screenshot({ path: path.join(shots, `${name}-${width}.png`), fullPage });
  }
  await page.setViewportSize({ width: 1280, height: 860 });
}

// expectLabelled checks that every form control on the page has a label a
// screen reader can read.
async function expectLabelled(page) {
  const unlabelled = await page.evaluate(() => [...document.querySelectorAll('input, select, textarea')]
    .filter((el) => el.type !== 'hidden' && !(el.labels && el.labels.length) && !el.getAttribute('aria-label'))
    .map((el) => el.outerHTML));
  expect(unlabelled).toEqual([]);
}

// Every page is watched for errors in the console: a script error or a
// Content-Security-Policy refusal fails the test.
let consoleErrors = [];
test.beforeEach(async ({ page }) => {
  consoleErrors = [];
  page.on('console', (msg) => {
    // Refusals the tests provoke (a wrong key, an invalid edit) are 4xx lines
    // of the network log, not errors of the page.
    if (msg.type() === 'error' && !/status of 4[0-9][0-9]/.test(msg.text())) consoleErrors.push(msg.text());
  });
  page.on('pageerror', (err) => consoleErrors.push(String(err)));
});
test.afterEach(() => {
  expect(consoleErrors).toEqual([]);
});

// A plan with daily limits near what acme uses in a run, so that the usage
// chart draws them.
const starter = { tasks_per_day: 60, deliveries_per_day: 80 };

// The page's numbers are written as an en-US browser writes them.
const num = (n) => n.toLocaleString('en-US');
function bytes(n) {
  const units = ['B', 'KiB', 'MiB', 'GiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return `${n.toLocaleString('en-US', { maximumFractionDigits: i === 0 ? 0 : 1 })} ${units[i]}`;
}
function monthName(yyyymm) {
  return new Date(`${yyyymm}-01T00:00:00Z`).toLocaleDateString('en-US', { month: 'long', year: 'numeric', timeZone: 'UTC' });
}
function monthBefore(yyyymm) {
  const d = new Date(`${yyyymm}-01T00:00:00Z`);
  d.setUTCMonth(d.getUTCMonth() - 1);
  return d.toISOString().slice(0, 7);
}

function taskLink(page, id) {
  return page.getByRole('link', { name: `Task ${id}` });
}

async function signIn(page, key = tenantKey) {
  await page.goto('/ui/');
  await expect(page).toHaveURL(/\/ui\/sign-in/);
  await page.getByLabel('API key').fill(key);
  await page.getByRole('button', { name: 'Sign in', exact: true }).click();
  await expect(page.getByRole('heading', { level: 1, name: 'Overview' })).toBeVisible();
}

test('signs in with the keyboard, refuses a wrong key, and never keeps the key', async ({ page, context }) => {
  await page.goto('/ui/');
  await expect(page.getByRole('heading', { name: 'Sign in' })).toBeVisible();
  await expectLabelled(page);
  await shoot(page, 'sign-in');

  // Keyboard only: a page opens with its heading focused, and the key
  // field is the next stop.
  await expect(page.getByRole('heading', { name: 'Sign in' })).toBeFocused();
  await page.keyboard.press('Tab');
  await expect(page.getByLabel('API key')).toBeFocused();
  await page.keyboard.type('hw_notakey_atall');
  await page.keyboard.press('Enter');
  await expect(page.getByRole('alert')).toContainText('malformed, unknown, revoked or expired');

  await page.getByLabel('API key').fill(tenantKey);
  await page.keyboard.press('Enter');
  await expect(page.getByRole('heading', { level: 1, name: 'Overview' })).toBeVisible();

  const cookies = await context.cookies();
  const session = cookies.find((c) => c.name === 'hookwheel_session');
  expect(session.httpOnly).toBe(true);
  expect(session.sameSite).toBe('Strict');
  const stored = await page.evaluate(() => JSON.stringify({ ...localStorage }) + JSON.stringify({ ...sessionStorage }) + document.cookie);
  expect(stored).not.toContain(tenantKey.slice(3));
  for (const c of cookies) expect(c.value).not.toContain(tenantKey.slice(3));
});

test('signs up with an invite code and shows the API key and signing secret once', async ({ page, request }) => {
  const r = await request.fetch(`${base}/v1/admin/invites`, { method: 'POST', data: { note: 'browser test' },
    headers: { Authorization: `Bearer ${adminToken}` } });
  expect(r.status()).toBe(201);
  const invite = await r.json();

  // The sign-in page offers a sign-up, since the server allows one.
  await page.goto('/ui/');
  await page.getByRole('link', { name: 'Create an account' }).click();
  await expect(page).toHaveURL(/\/ui\/sign-up$/);
  await expect(page.getByRole('heading', { level: 1, name: 'Sign up' })).toBeFocused();
  await expectLabelled(page);
  await page.getByLabel('Account name').fill('initech');
  await shoot(page, 'sign-up');

  await page.getByLabel('Invite code').fill(`hwinv_${'a'.repeat(32)}`);
  await page.getByRole('button', { name: 'Create account' }).click();
  await expect(page.getByRole('alert')).toContainText('not one the operator made');

  await page.getByLabel('Invite code').fill(invite.invite_code);
  await page.getByRole('button', { name: 'Create account' }).click();
  await expect(page.getByRole('heading', { level: 1, name: 'Welcome, initech' })).toBeVisible();
  await expect(page.getByRole('alert')).toContainText('shown only this once');
  const apiKey = await page.getByLabel('API key', { exact: true }).inputValue();
  const secret = await page.getByLabel('Signing secret', { exact: true }).inputValue();
  expect(apiKey).toMatch(/^hw_[a-z2-7]+_[a-z2-7]+$/);
  expect(secret).toMatch(/^whsec_/);
  await expect(page.getByRole('button', { name: 'Copy the API key' })).toBeVisible();
  await expectLabelled(page);
  await shoot(page, 'sign-up-done');

  // The key is the new tenant's, with every scope; the code is spent.
  const me = await call(request, apiKey, 'GET', '/v1/me');
  expect(me.tenant.name).toBe('initech');
  const again = await request.fetch(`${base}/v1/signup`, { method: 'POST', data: { name: 'again', invite_code: invite.invite_code } });
  expect(again.status()).toBe(403);
  expect((await again.json()).type).toBe('urn:hookwheel:problem:invite-used');

  await page.getByRole('button', { name: 'Continue to the dashboard' }).click();
  await expect(page.getByRole('heading', { level: 1, name: 'Overview' })).toBeVisible();
  await expect(page.locator('.who')).toContainText('initech');
});

test('the API refuses the session cookie without its CSRF token', async ({ page }) => {
  await signIn(page);
  const status = await page.evaluate(async () => (await fetch('/v1/tasks', { credentials: 'same-origin' })).status);
  expect(status).toBe(403);
  const cancel = await page.evaluate(async () => (await fetch('/v1/tasks/cancel', {
    method: 'POST', credentials: 'same-origin', headers: { 'Content-Type': 'application/json' }, body: '{}',
  })).status);
  expect(cancel).toBe(403);
});

test('watches a task go delivered, and a failing one collect its attempts', async ({ page, request }) => {
  await signIn(page);
  const ok = await createTask(request, tenantKey, { url: `${receiver}/ok`, body: '{"order":42}', headers: { 'X-Order': '42' }, delay: '6s' });
  await page.goto(`/ui/tasks/${ok.id}`);
  await expect(page.getByRole('heading', { level: 1 })).toContainText(ok.id);
  await expect(page.locator('.statusline .badge')).toHaveText('scheduled');
  await expectLabelled(page);
  await shoot(page, 'task-scheduled');
  await expect(page.locator('.statusline .badge')).toHaveText('delivered', { timeout: 20_000 });
  await expect(page.locator('.timeline')).toContainText('HTTP 200');
  await expect(page.locator('.timeline')).toContainText('thanks');
  await shoot(page, 'task-delivered');

  const failing = await createTask(request, tenantKey, { url: `${receiver}/fail`, body: 'x', retry: { max_attempts: 3, min_backoff: '200ms', max_backoff: '400ms' } });
  await page.goto(`/ui/tasks/${failing.id}`);
  await expect(page.locator('.statusline .badge')).toHaveText('dead', { timeout: 30_000 });
  await expect(page.locator('.timeline li')).toHaveCount(3);
  await expect(page.locator('.timeline').first()).toContainText('HTTP 500');
  await expect(page.locator('.timeline').first()).toContainText('boom');
  const headers = page.locator('.timeline li').first().locator('details.headers');
  await expect(headers.locator('pre')).toBeHidden();
  await headers.locator('summary').click();
  await expect(headers.locator('pre')).toContainText('X-Request-Id: boom-1');
  // Shot with the last attempt's headers open, the others folded: both states.
  await shoot(page, 'task-dead');

  // A task with more attempts than a page (500) shows the first page and
  // loads the rest on demand: here the first page is made to hold two.
  const firstPage = `**/v1/tasks/${failing.id}/attempts`;
  await page.route(firstPage, async (route) =>
    route.fulfill({ response: await route.fetch({ url: `${route.request().url()}?limit=2` }) }));
  await page.reload();
  await expect(page.locator('.timeline li')).toHaveCount(2);
  await expect(page.locator('.more-attempts')).toContainText('The first 2 of 3 attempts');
  await shoot(page, 'task-more-attempts');
  await page.getByRole('button', { name: 'Load more' }).click();
  await expect(page.locator('.timeline li')).toHaveCount(3);
  await expect(page.locator('.more-attempts')).toHaveCount(0);
  await page.unroute(firstPage);

  // The list finds both, by status and by search.
  await page.goto('/ui/tasks');
  await expect(taskLink(page, ok.id)).toBeVisible();
  await page.getByLabel('Status').selectOption('dead');
  await page.getByRole('button', { name: 'Filter' }).click();
  await expect(page).toHaveURL(/status=dead/);
  await expect(taskLink(page, failing.id)).toBeVisible();
  await expect(taskLink(page, ok.id)).toHaveCount(0);
  await page.getByLabel('Find a task').fill(ok.id);
  await page.getByRole('button', { name: 'Find' }).click();
  await expect(page).toHaveURL(new RegExp(`/ui/tasks/${ok.id}$`));
  await page.goto('/ui/tasks');
  await expectLabelled(page);
  await shoot(page, 'tasks');
});

test('shows a task waiting for the one before it in its ordering key', async ({ page, request }) => {
  await signIn(page);
  // The first holds the key while it waits an hour for its retry; the second waits behind it.
  const first = await createTask(request, tenantKey, { url: `${receiver}/fail`, ordering_key: 'order-7',
    retry: { max_attempts: 5, min_backoff: '1h', max_backoff: '1h' } });
  // Its flow key has no limits: it shows, and holds nothing back.
  const second = await createTask(request, tenantKey, { url: `${receiver}/ok`, ordering_key: 'order-7', flow_key: 'customer-7' });
  await waitStatus(request, tenantKey, first.id, 'retrying');
  await expect.poll(async () => (await call(request, tenantKey, 'GET', `/v1/tasks/${second.id}`)).next_attempt_at,
    { timeout: 30_000 }).toBeNull();
  await page.goto(`/ui/tasks/${second.id}`);
  await expect(page.locator('.statusline .badge')).toHaveText('scheduled');
  await expect(page.locator('dl.fields')).toContainText('once the task before it in its ordering key is finished');
  await expect(page.locator('dl.fields')).toContainText('order-7');
  await expect(page.locator('dl.fields')).toContainText('Flow key');
  await expect(page.locator('dl.fields')).toContainText('customer-7');
  await shoot(page, 'task-ordering-waiting');
  // Canceling the first releases the second, which the page sees delivered.
  await call(request, tenantKey, 'DELETE', `/v1/tasks/${first.id}`);
  await expect(page.locator('.statusline .badge')).toHaveText('delivered', { timeout: 30_000 });
});

test('replays a dead task from its page, as it was and edited', async ({ page, request }) => {
  await signIn(page);
  const flaky = await createTask(request, tenantKey, { url: `${receiver}/flaky/1`, retry: { max_attempts: 1 } });
  await waitStatus(request, tenantKey, flaky.id, 'dead');
  await request.post(`${receiver}/fix/flaky`);
  await page.goto(`/ui/tasks/${flaky.id}`);
  await page.getByRole('button', { name: 'Replay', exact: true }).click();
  await expect(page.locator('.statusline .badge')).toHaveText('delivered', { timeout: 20_000 });
  await expect(page.locator('.timeline li')).toHaveCount(2);

  // Edit and replay: the dead webhook goes to a URL that works, with a new body.
  const dead = await createTask(request, tenantKey, { url: `${receiver}/fail`, body: 'old', retry: { max_attempts: 1 } });
  await waitStatus(request, tenantKey, dead.id, 'dead');
  await page.goto(`/ui/tasks/${dead.id}`);
  await page.getByText('Edit and replay').click();
  await page.getByLabel('URL', { exact: true }).fill(`${receiver}/ok`);
  await page.getByLabel('Body').fill('new body');
  await expectLabelled(page);
  await shoot(page, 'task-edit');
  await page.getByRole('button', { name: 'Replay with these changes' }).click();
  await expect(page.locator('.statusline .badge')).toHaveText('delivered', { timeout: 20_000 });
  const task = await call(request, tenantKey, 'GET', `/v1/tasks/${dead.id}`);
  expect(task.url).toBe(`${receiver}/ok`);
  expect(task.body).toBe('new body');

  // An invalid edit is refused with the field named, and changes nothing.
  const dead2 = await createTask(request, tenantKey, { url: `${receiver}/fail`, retry: { max_attempts: 1 } });
  await waitStatus(request, tenantKey, dead2.id, 'dead');
  await page.goto(`/ui/tasks/${dead2.id}`);
  await page.getByText('Edit and replay').click();
  await page.getByLabel('Headers').fill('Content-Length: 3');
  await page.getByRole('button', { name: 'Replay with these changes' }).click();
  await expect(page.getByRole('alert')).toContainText('headers');
  await expect(page.locator('.statusline .badge')).toHaveText('dead');
});

test('pauses and resumes a schedule', async ({ page, request }) => {
  const sc = await call(request, tenantKey, 'POST', '/v1/schedules', { cron: '0 9 * * *', timezone: 'Europe/Paris', url: `${receiver}/ok` });
  await signIn(page);
  await page.getByRole('link', { name: 'Schedules' }).click();
  await expect(page.getByRole('heading', { level: 1, name: 'Schedules' })).toBeVisible();
  const row = page.getByRole('row').filter({ hasText: sc.id.slice(-8) });
  await expect(row).toContainText('Europe/Paris');
  await expect(row.locator('ul.times li')).toHaveCount(3);
  await expectLabelled(page);
  await shoot(page, 'schedules');
  // With the keyboard: focus the button, press Enter.
  await row.getByRole('button', { name: /^Pause/ }).focus();
  await page.keyboard.press('Enter');
  await expect(row.getByRole('button', { name: /^Resume/ })).toBeVisible();
  expect((await call(request, tenantKey, 'GET', `/v1/schedules/${sc.id}`)).paused).toBe(true);
  await row.getByRole('button', { name: /^Resume/ }).click();
  await expect(row.getByRole('button', { name: /^Pause/ })).toBeVisible();
  expect((await call(request, tenantKey, 'GET', `/v1/schedules/${sc.id}`)).paused).toBe(false);
});

test('creates a topic, shows its endpoints, and follows a publish to each delivery', async ({ page, request }) => {
  await signIn(page);
  await page.getByRole('link', { name: 'Topics', exact: true }).click();
  await expect(page.getByRole('heading', { level: 1, name: 'Topics' })).toBeVisible();
  await page.getByText('Create or replace a topic').click();
  await page.getByLabel('Name').fill('orders');
  await page.getByLabel('Description').fill('Order events');
  await page.getByLabel('Endpoints').fill(`billing=${receiver}/ok?to=billing\n${receiver}/fail`);
  await expectLabelled(page);
  await page.getByRole('button', { name: 'Save topic' }).click();
  const row = page.getByRole('row').filter({ hasText: 'Order events' });
  await expect(row.locator('ul.endpoints li')).toHaveCount(2);
  await expect(row).toContainText(`billing ${receiver}/ok?to=billing`);
  const topic = await call(request, tenantKey, 'GET', '/v1/topics/orders');
  expect(topic.endpoints).toEqual([{ name: 'billing', url: `${receiver}/ok?to=billing` }, { url: `${receiver}/fail` }]);

  // A refused save says why, field by field, and changes nothing.
  await page.getByRole('button', { name: 'Edit topic orders' }).click();
  await expect(page.getByLabel('Endpoints')).toHaveValue(`billing=${receiver}/ok?to=billing\n${receiver}/fail`);
  await page.getByLabel('Endpoints').fill('ftp://example.com/x');
  await page.getByRole('button', { name: 'Save topic' }).click();
  await expect(page.getByRole('alert')).toContainText('endpoints[0].url');
  await shoot(page, 'topics');

  const pub = await call(request, tenantKey, 'POST', '/v1/tasks', { topic: 'orders', body: '{"order": 42}', retry: { max_attempts: 1 } });
  expect(pub.tasks).toHaveLength(2);
  await waitStatus(request, tenantKey, pub.tasks[0].id, 'delivered');
  await waitStatus(request, tenantKey, pub.tasks[1].id, 'dead');
  await page.goto(`/ui/tasks/${pub.tasks[1].id}`);
  await expect(page.locator('.statusline .badge')).toHaveText('dead');
  await page.getByRole('link', { name: 'every delivery of the publish' }).click();
  await expect(page.getByRole('heading', { level: 1, name: `Publish ${pub.id}` })).toBeVisible();
  const counts = page.locator('.statuslist li');
  await expect(counts.filter({ hasText: 'delivered' })).toContainText('1');
  await expect(counts.filter({ hasText: 'dead' })).toContainText('1');
  await expect(taskLink(page, pub.tasks[0].id)).toBeVisible();
  await expect(taskLink(page, pub.tasks[1].id)).toBeVisible();
  await shoot(page, 'publish');
  await page.getByRole('link', { name: 'Its dead letters →' }).click();
  await expect(page.getByText('Only the tasks of publish')).toBeVisible();
  await expect(taskLink(page, pub.tasks[1].id)).toBeVisible();
  await expect(taskLink(page, pub.tasks[0].id)).toHaveCount(0);

  await page.getByRole('link', { name: 'Topics', exact: true }).click();
  await row.getByRole('button', { name: 'Delete' }).click();
  await row.getByRole('button', { name: 'Click again to delete' }).click();
  await expect(page.getByText('No topics yet.')).toBeVisible();
});

test('bulk-replays dead letters by filter after showing the count', async ({ page, request }) => {
  const ids = [];
  for (let i = 0; i < 3; i++) ids.push((await createTask(request, tenantKey, { url: `${receiver}/bulk/${i}`, retry: { max_attempts: 1 } })).id);
  for (const id of ids) await waitStatus(request, tenantKey, id, 'dead');
  await request.post(`${receiver}/fix/bulk`);
  await signIn(page);
  await page.getByRole('link', { name: 'Dead letters' }).click();
  await page.getByLabel('URL starts with').fill(`${receiver}/bulk/`);
  await page.getByRole('button', { name: 'Count dead tasks to replay' }).click();
  await expect(page.getByText('3 dead tasks match')).toBeVisible();
  await expectLabelled(page);
  await shoot(page, 'dead-letters');
  await page.getByRole('button', { name: 'Replay 3 tasks' }).click();
  await expect(page.getByText('Replayed 3 tasks.')).toBeVisible();
  for (const id of ids) await waitStatus(request, tenantKey, id, 'delivered');
});

test('moves dead letters to another URL with new headers, after a preview', async ({ page, request }) => {
  const ids = [];
  for (let i = 0; i < 3; i++) {
    ids.push((await createTask(request, tenantKey, { url: `${receiver}/gone/${i}`, headers: { 'X-Old-Token': 'stale' }, body: `order ${i}`, retry: { max_attempts: 1 } })).id);
  }
  // Moved, this one's URL would pass the 4,096 characters a URL may have:
  // refused, and left dead.
  const long = `${receiver}/gone/`;
  const refused = (await createTask(request, tenantKey, { url: long + 'x'.repeat(4096 - long.length), retry: { max_attempts: 1 } })).id;
  for (const id of [...ids, refused]) await waitStatus(request, tenantKey, id, 'dead');
  await signIn(page);
  await page.getByRole('link', { name: 'Dead letters' }).click();
  await page.getByText('Move and replay').click();
  await page.getByLabel('Move URLs starting with').fill(`${receiver}/gone/`);
  await page.getByLabel('To', { exact: true }).fill(`${receiver}/moved/`);
  await page.getByLabel('Set headers').fill('X-Moved: yes');
  await page.getByLabel('Remove headers').fill('X-Old-Token');
  await page.getByRole('button', { name: 'Preview changes' }).click();
  await expect(page.getByText('4 dead tasks match: 3 would change, 1 refused. Nothing has changed yet.')).toBeVisible();
  await expect(page.locator('.refusals li')).toHaveText(/^1 task: url: must be at most 4096 characters \(…/);
  await expect(page.getByText(`→ ${receiver}/moved/2`)).toBeVisible();
  await expect(page.getByText('+ X-Moved: yes').first()).toBeVisible();
  await expectLabelled(page);
  await shoot(page, 'dead-letters-move');
  for (const id of ids) expect((await call(request, tenantKey, 'GET', `/v1/tasks/${id}`)).status).toBe('dead');

  // An invalid prefix is refused, naming the field.
  await page.getByLabel('To', { exact: true }).fill('https://user:secret@new.example/');
  await page.getByRole('button', { name: 'Preview changes' }).click();
  await expect(page.getByRole('alert')).toContainText('edit.url_prefix.to');
  await page.getByLabel('To', { exact: true }).fill(`${receiver}/moved/`);
  await page.getByRole('button', { name: 'Preview changes' }).click();

  await page.getByRole('button', { name: 'Apply to 3 tasks' }).click();
  await expect(page.getByText('Moved and replayed 3 tasks (3 changed); 1 task refused, left dead.')).toBeVisible();
  for (const id of ids) await waitStatus(request, tenantKey, id, 'delivered');
  expect((await call(request, tenantKey, 'GET', `/v1/tasks/${refused}`)).status).toBe('dead');
  const moved = await call(request, tenantKey, 'GET', `/v1/tasks/${ids[1]}`);
  expect(moved.url).toBe(`${receiver}/moved/1`);
  expect(moved.headers).toEqual({ 'X-Moved': 'yes' });
});

test('overview, targets, keys and secrets pages draw', async ({ page }) => {
  await signIn(page);
  await expect(page.locator('#chart-rate canvas')).toBeVisible();
  await expect(page.locator('.stat').first()).toContainText('Delivered');
  // Every delivered task made one successful attempt, counted by the
  // statistics within a flush and a refresh of the page.
  const deliveredTasks = Number(await page.locator('.statuslist li').filter({ hasText: 'delivered' }).locator('.num').textContent());
  expect(deliveredTasks).toBeGreaterThan(0);
  await expect.poll(async () => Number((await page.locator('.stat .value').first().textContent()).replace(/\D/g, '')), { timeout: 40_000 })
    .toBe(deliveredTasks);
  await expect(page.getByRole('heading', { name: 'Targets with the most failures' })).toBeVisible();
  await expectLabelled(page);
  await shoot(page, 'overview');

  await page.getByRole('link', { name: 'Targets' }).click();
  await expect(page.getByRole('heading', { level: 1, name: 'Targets' })).toBeVisible();
  await expect(page.getByRole('table')).toContainText('127.0.0.1');
  await expectLabelled(page);
  await shoot(page, 'targets');

  await page.getByRole('link', { name: 'API keys' }).click();
  await page.getByLabel('Name').fill('dashboard test');
  await page.getByLabel('tasks:read').check();
  await expectLabelled(page);
  await page.getByRole('button', { name: 'Create key' }).click();
  await expect(page.getByLabel('Copy it now')).toHaveValue(/^hw_/);
  await expect(page.getByRole('row').filter({ hasText: 'dashboard test' })).toContainText('active');
  await shoot(page, 'keys');

  await page.getByRole('link', { name: 'Signing secrets' }).click();
  await expect(page.getByRole('row').filter({ hasText: 'current' })).toHaveCount(1);
  await expectLabelled(page);
  await shoot(page, 'secrets');
});

test('targets page pauses a target, holds its tasks, and resumes it', async ({ page, request }) => {
  const target = new URL(receiver).origin;
  await signIn(page);
  await page.getByRole('link', { name: 'Targets' }).click();
  await expect(page.getByText('No paused target')).toBeVisible();
  await page.getByLabel('Target', { exact: true }).fill(target);
  await page.getByLabel('Reason').fill('receiver migration until 14:00');
  await page.getByRole('button', { name: 'Pause', exact: true }).click();
  const row = page.locator('section.paused').getByRole('row').filter({ hasText: target });
  await expect(row).toContainText('receiver migration until 14:00');
  await expect(row).toContainText('you');
  const task = await createTask(request, tenantKey, { url: `${receiver}/ok` });
  await expectLabelled(page);
  // The page, not the pause's passing notice over it.
  await expect(page.locator('#toast')).not.toHaveClass(/shown/, { timeout: 10_000 });
  await shoot(page, 'targets-paused');
  // Held: still waiting, no attempt made, while the page was drawn.
  const held = await call(request, tenantKey, 'GET', `/v1/tasks/${task.id}`);
  expect(held.status).toBe('scheduled');
  expect(held.attempts).toBe(0);
  await row.getByRole('button', { name: `Resume ${target}` }).click();
  await expect(page.getByText('No paused target')).toBeVisible();
  await waitStatus(request, tenantKey, task.id, 'delivered');

  // Where hookwheel's target.paused and target.recovered events go: set
  // through the card, as GET /v1/settings then answers, and cleared.
  const ops = `${receiver}/ops`;
  const card = page.locator('form.opsform');
  await expect(card.locator('dd')).toHaveText('nowhere: no URL is set');
  await card.getByLabel('Operations URL').fill('ftp://ops.example');
  await card.getByRole('button', { name: 'Set', exact: true }).click();
  await expect(card.getByRole('alert')).toContainText('operations_url');
  expect((await call(request, tenantKey, 'GET', '/v1/settings')).operations_url).toBeNull();
  await card.getByLabel('Operations URL').fill(ops);
  await card.getByRole('button', { name: 'Set', exact: true }).click();
  await expect(card.locator('dd')).toHaveText(ops);
  await expect(card.getByLabel('Operations URL')).toHaveValue(ops);
  expect((await call(request, tenantKey, 'GET', '/v1/settings')).operations_url).toBe(ops);
  await expectLabelled(page);
  await expect(page.locator('#toast')).not.toHaveClass(/shown/, { timeout: 10_000 });
  await shoot(page, 'targets-operations');
  await card.getByRole('button', { name: 'Clear', exact: true }).click();
  await expect(card.locator('dd')).toHaveText('nowhere: no URL is set');
  expect((await call(request, tenantKey, 'GET', '/v1/settings')).operations_url).toBeNull();
});
test('usage shows the month against the plan, day by day, and other months', async ({ page, request, context }) => {
  await call(request, adminToken, 'PUT', '/v1/admin/plans/starter', starter);
  const me = await call(request, tenantKey, 'GET', '/v1/me');
  await call(request, adminToken, 'PATCH', `/v1/admin/tenants/${me.tenant.id}`, { plan: 'starter' });
  const delivered = [];
  for (let i = 0; i < 3; i++) delivered.push(await createTask(request, tenantKey, { url: `${receiver}/ok`, body: `usage ${i}` }));
  const failing = await createTask(request, tenantKey, { url: `${receiver}/fail`, body: 'usage failing',
    retry: { max_attempts: 2, min_backoff: '100ms', max_backoff: '200ms' } });
  for (const t of delivered) await waitStatus(request, tenantKey, t.id, 'delivered');
  await waitStatus(request, tenantKey, failing.id, 'dead');

  await signIn(page);
  await page.getByRole('link', { name: 'Usage' }).click();
  await expect(page.getByRole('heading', { level: 1, name: 'Usage' })).toBeVisible();
  // The page shows what the API answers: read between two answers alike,
  // so that nothing was counted meanwhile.
  let usage;
  await expect(async () => {
    const before = await call(request, tenantKey, 'GET', '/v1/usage');
    await page.reload();
    await expect(page.locator('#chart-usage canvas')).toBeVisible();
    const cards = Object.fromEntries(await page.locator('.cards.six .stat').evaluateAll((els) =>
      els.map((el) => [el.querySelector('.label').textContent, el.querySelector('.value').textContent])));
    const today = before.days[before.days.length - 1];
    const row = await page.getByRole('row').filter({ has: page.locator(`time[datetime="${today.date}"]`) })
      .locator('td').allTextContents();
    const meters = await page.getByRole('meter').evaluateAll((els) => els.map((el) => el.getAttribute('aria-valuetext')));
    const after = await call(request, tenantKey, 'GET', '/v1/usage');
    expect(after).toEqual(before);
    const t = before.totals;
    expect(cards).toEqual({
      'Tasks created': num(t.tasks_created), Deliveries: num(t.deliveries), Attempts: num(t.attempts),
      'Failed attempts': num(t.failed_attempts), Sent: bytes(t.bytes_sent), Received: bytes(t.bytes_received),
    });
    expect(row.slice(1)).toEqual([num(today.tasks_created), num(today.deliveries), num(today.attempts), num(today.failed_attempts),
      bytes(today.bytes_sent), bytes(today.bytes_received)]);
    expect(meters).toEqual([`${num(today.tasks_created)} of ${starter.tasks_per_day} tasks today`,
      `${num(today.deliveries)} of ${starter.deliveries_per_day} deliveries today`]);
    usage = before;
  }).toPass({ timeout: 40_000 });
  // This test's own tasks are in today's counts: four created, three
  // delivered, the failing one's two attempts failed.
  const today = usage.days[usage.days.length - 1];
  expect(today.tasks_created).toBeGreaterThanOrEqual(4);
  expect(today.deliveries).toBeGreaterThanOrEqual(3);
  expect(today.failed_attempts).toBeGreaterThanOrEqual(2);
  expect(usage.plan).toBe('starter');
  await expect(page.locator('.today')).toContainText('Plan: starter');
  await expect(page.getByText(`${num(today.tasks_created)} of ${starter.tasks_per_day} tasks today`)).toBeVisible();
  await expect(page.locator('#chart-usage .u-legend')).toContainText(`limit, ${starter.tasks_per_day} tasks a day`);
  await expect(page.locator('#chart-usage .u-legend')).toContainText(`limit, ${starter.deliveries_per_day} deliveries a day`);
  await expect(page.locator('#chart-attempts canvas')).toBeVisible();
  const thisMonth = usage.from.slice(0, 7);
  await expect(page.locator('.monthnav h2')).toHaveText(monthName(thisMonth));
  await expect(page.locator('.monthnav .next')).toHaveCount(0);
  await expectLabelled(page);
  await shoot(page, 'usage');

  // The month before: nothing used then, said in words, no chart.
  const before = monthBefore(thisMonth);
  await page.getByRole('link', { name: `← ${monthName(before)}` }).click();
  await expect(page).toHaveURL(new RegExp(`/ui/usage\\?month=${before}$`));
  await expect(page.locator('.monthnav h2')).toHaveText(monthName(before));
  await expect(page.getByText(`No usage in ${monthName(before)}`)).toBeVisible();
  await expect(page.locator('canvas')).toHaveCount(0);
  // Today's use stays in view whatever the month.
  await expect(page.getByText(`${num(today.tasks_created)} of ${starter.tasks_per_day} tasks today`)).toBeVisible();
  await page.getByRole('link', { name: `${monthName(thisMonth)} →` }).click();
  await expect(page).toHaveURL(/\/ui\/usage$/);
  await expect(page.locator('#chart-usage canvas')).toBeVisible();
  // The picker goes to any month.
  await page.getByLabel('Month', { exact: true }).fill(before);
  await page.getByRole('button', { name: 'Show' }).click();
  await expect(page).toHaveURL(new RegExp(`/ui/usage\\?month=${before}$`));
  await expect(page.locator('.monthnav h2')).toHaveText(monthName(before));
  await page.goto('/ui/usage?month=2026-13');
  await expect(page.getByRole('alert')).toContainText('not a month');

  // A tenant that has used nothing yet reads so, with no chart.
  const fresh = await call(request, adminToken, 'POST', '/v1/admin/tenants', { name: 'fresh-usage' });
  await context.clearCookies();
  await signIn(page, fresh.api_key);
  await page.getByRole('link', { name: 'Usage' }).click();
  await expect(page.getByText(`No usage in ${monthName(thisMonth)}`)).toBeVisible();
  await expect(page.getByText('0 tasks today')).toBeVisible();
  await expect(page.locator('canvas')).toHaveCount(0);
  await shoot(page, 'usage-empty');

  await call(request, adminToken, 'PATCH', `/v1/admin/tenants/${me.tenant.id}`, { plan: null });
});

test('a tenant cannot reach another tenant\'s task', async ({ page, request }) => {
  const theirs = await createTask(request, otherKey, { url: `${receiver}/ok`, delay: '1h' });
  await signIn(page);
  await page.goto(`/ui/tasks/${theirs.id}`);
  await expect(page.getByRole('heading', { level: 1, name: 'Not found' })).toBeVisible();
  const status = await page.evaluate(async (id) => {
    const s = await (await fetch('/v1/session')).json();
    return (await fetch(`/v1/tasks/${id}`, { headers: { 'X-CSRF-Token': s.csrf_token } })).status;
  }, theirs.id);
  expect(status).toBe(404);
  await shoot(page, 'not-found');
});

test('signs out, and the pages ask to sign in again', async ({ page }) => {
  await signIn(page);
  await page.getByRole('button', { name: 'Sign out' }).click();
  await expect(page.getByRole('heading', { name: 'Sign in' })).toBeVisible();
  await page.goto('/ui/tasks');
  await expect(page).toHaveURL(/\/ui\/sign-in\?next=/);
  const status = await page.evaluate(async () => (await fetch('/v1/session')).status);
  expect(status).toBe(401);
});

async function signInOperator(page) {
  await page.goto('/ui/sign-in');
  await page.getByText('Operator? Sign in with the admin token').click();
  await page.getByLabel('Admin token').fill(adminToken);
  await page.getByRole('button', { name: 'Sign in as operator' }).click();
  await expect(page.getByRole('heading', { level: 1, name: 'Tenants' })).toBeVisible();
}

test('the operator sees every tenant, the nodes, breakers and health', async ({ page }) => {
  await signInOperator(page);
  await expect(page.getByRole('table')).toContainText('acme');
  await expect(page.getByRole('table')).toContainText('globex');
  await expectLabelled(page);
  await shoot(page, 'admin-tenants');

  await page.getByRole('link', { name: 'Nodes' }).click();
  await expect(page.getByText('0 of 256')).toBeVisible({ timeout: 20_000 });
  await expect(page.locator('.pgrid span')).toHaveCount(256);
  await shoot(page, 'admin-nodes');

  await page.getByRole('link', { name: 'Breakers' }).click();
  await expect(page.getByRole('heading', { level: 1, name: 'Circuit breakers' })).toBeVisible();
  await shoot(page, 'admin-breakers');

  await page.getByRole('link', { name: 'Health' }).click();
  await expect(page.getByText('ready', { exact: true })).toBeVisible();
  await expect(page.getByRole('table')).toContainText('postgres');
  await shoot(page, 'admin-health');

  // The operator's session does not reach tenant pages.
  await page.goto('/ui/tasks');
  await expect(page).toHaveURL(/\/ui\/admin\/tenants/);
});

test('the operator sees each tenant\'s plan, status and month, changes its plan, suspends, resumes and deletes it', async ({ page, request }) => {
  await call(request, adminToken, 'PUT', '/v1/admin/plans/starter', starter);
  await call(request, adminToken, 'PUT', '/v1/admin/plans/scale', { tasks_per_day: 100000 });
  // Throwaway tenants, so that acme and globex stay as they are.
  const held = await call(request, adminToken, 'POST', '/v1/admin/tenants', { name: 'throwaway-held', plan: 'starter' });
  const doomed = await call(request, adminToken, 'POST', '/v1/admin/tenants', { name: 'throwaway-doomed' });
  const doomedTasks = [];
  for (let i = 0; i < 2; i++) doomedTasks.push(await createTask(request, doomed.api_key, { url: `${receiver}/ok` }));
  for (const t of doomedTasks) await waitStatus(request, doomed.api_key, t.id, 'delivered');
  const tenantRow = (name) => page.getByRole('row').filter({ has: page.locator('strong', { hasText: new RegExp(`^${name}$`) }) });
  const cellsOf = async (name) => (await tenantRow(name).locator('td').allTextContents()).map((c) => c.trim());
  const me = await call(request, tenantKey, 'GET', '/v1/me');

  await signInOperator(page);
  // This month's counts are the API's: a tenant's own usage, read between
  // two answers alike.
  await expect(async () => {
    const before = await call(request, tenantKey, 'GET', '/v1/usage');
    await page.reload();
    const acme = await cellsOf('acme');
    const after = await call(request, tenantKey, 'GET', '/v1/usage');
    expect(after).toEqual(before);
    expect(acme.slice(3, 5)).toEqual([num(before.totals.tasks_created), num(before.totals.deliveries)]);
  }).toPass({ timeout: 30_000 });
  const acmeTenant = await call(request, adminToken, 'GET', `/v1/admin/tenants/${me.tenant.id}`);
  await expect(tenantRow('acme').locator('.planname')).toHaveText(acmeTenant.plan || 'none');
  await expect(tenantRow('acme').locator('.badge')).toHaveText('active');
  const doomedCells = await cellsOf('throwaway-doomed');
  expect(doomedCells.slice(2, 5)).toEqual(['active', '2', '2']);
  await expect(tenantRow('throwaway-held').locator('.planname')).toHaveText('starter');
  expect((await cellsOf('throwaway-held')).slice(2, 5)).toEqual(['active', '0', '0']);

  // A plan chosen in the row.
  const heldRow = tenantRow('throwaway-held');
  await heldRow.getByRole('button', { name: 'Change the plan of throwaway-held' }).click();
  await expectLabelled(page);
  await heldRow.getByLabel('Plan of throwaway-held').selectOption('scale');
  await heldRow.getByRole('button', { name: 'Save' }).click();
  await expect(heldRow.locator('.planname')).toHaveText('scale');
  expect((await call(request, adminToken, 'GET', `/v1/admin/tenants/${held.id}`)).plan).toBe('scale');

  // Suspended, its calls are refused; resumed, they are answered again.
  const heldCall = async () => {
    const r = await request.fetch(`${base}/v1/tasks`, { headers: { Authorization: `Bearer ${held.api_key}` } });
    return [r.status(), r.status() === 200 ? null : (await r.json()).type];
  };
  expect(await heldCall()).toEqual([200, null]);
  await heldRow.getByRole('button', { name: 'Suspend' }).click();
  await heldRow.getByRole('button', { name: 'Click again to suspend' }).click();
  await expect(heldRow.locator('.badge')).toHaveText('suspended');
  expect((await call(request, adminToken, 'GET', `/v1/admin/tenants/${held.id}`)).status).toBe('suspended');
  await expect.poll(heldCall).toEqual([403, 'urn:hookwheel:problem:tenant-suspended']);
  await expectLabelled(page);
  await shoot(page, 'admin-tenants-suspended');
  await heldRow.getByRole('button', { name: 'Resume throwaway-held' }).click();
  await expect(heldRow.locator('.badge')).toHaveText('active');
  expect((await call(request, adminToken, 'GET', `/v1/admin/tenants/${held.id}`)).status).toBe('active');
  await expect.poll(heldCall).toEqual([200, null]);

  // Deleting asks for the tenant's name. The page's reads of the tenant
  // wait until released, so that its deletion is seen under way first.
  let release;
  const released = new Promise((resolve) => { release = resolve; });
  await page.route(`**/v1/admin/tenants/${doomed.id}`, async (route) => {
    if (route.request().method() !== 'GET') return route.fallback();
    await released;
    return route.fallback();
  });
  const doomedRow = tenantRow('throwaway-doomed');
  await doomedRow.getByRole('button', { name: 'Delete throwaway-doomed' }).click();
  const dialog = page.getByRole('dialog', { name: 'Delete tenant throwaway-doomed?' });
  await expect(dialog).toBeVisible();
  const confirm = dialog.getByLabel('Type throwaway-doomed to confirm');
  await expect(confirm).toBeFocused();
  const go = dialog.getByRole('button', { name: 'Delete this tenant' });
  await confirm.fill('throwaway');
  await expect(go).toBeDisabled();
  await expectLabelled(page);
  await confirm.fill('throwaway-doomed');
  await expect(go).toBeEnabled();
  // The window as it shows: a page's full length would leave the
  // backdrop short of its foot.
  await shoot(page, 'admin-tenant-delete', { fullPage: false });
  await dialog.getByRole('button', { name: 'Cancel' }).click();
  await expect(dialog).toHaveCount(0);
  expect((await call(request, adminToken, 'GET', `/v1/admin/tenants/${doomed.id}`)).status).toBe('active');
  await doomedRow.getByRole('button', { name: 'Delete throwaway-doomed' }).click();
  await dialog.getByLabel('Type throwaway-doomed to confirm').fill('throwaway-doomed');
  await dialog.getByRole('button', { name: 'Delete this tenant' }).click();
  await expect(dialog).toHaveCount(0);
  await expect(doomedRow.locator('.badge')).toHaveText('deleting');
  await expect(doomedRow.locator('.deletion')).toContainText('Asked');
  await expect(doomedRow.getByRole('button')).toHaveCount(0);
  await shoot(page, 'admin-tenants-deleting');
  // Its keys stop working at once.
  const doomedStatus = async () => (await request.fetch(`${base}/v1/tasks`, { headers: { Authorization: `Bearer ${doomed.api_key}` } })).status();
  await expect.poll(doomedStatus).toBe(401);
  release();
  await expect(doomedRow.locator('.badge')).toHaveText('deleted', { timeout: 30_000 });
  const gone = await request.fetch(`${base}/v1/admin/tenants/${doomed.id}`, { headers: { Authorization: `Bearer ${adminToken}` } });
  expect(gone.status()).toBe(404);
  await page.unroute(`**/v1/admin/tenants/${doomed.id}`);
  expect(await heldCall()).toEqual([200, null]);
});

test('the API reference renders the served document, linked from the dashboard', async ({ page }) => {
  // Signed out, the dashboard's header links to it.
  await page.goto('/ui/');
  await expect(page.getByRole('heading', { name: 'Sign in' })).toBeVisible();
  await page.getByRole('link', { name: 'API reference' }).click();
  await expect(page).toHaveURL(/\/docs$/);

  await expect(page.getByRole('heading', { level: 1, name: /hookwheel/ })).toBeVisible({ timeout: 30_000 });
  const operation = page.getByRole('heading', { level: 2, name: 'Schedule a webhook' });
  await expect(operation).toBeVisible();
  // Its header leads back to the dashboard.
  await expect(page.getByRole('link', { name: 'hookwheel', exact: true })).toHaveAttribute('href', '/ui/');

  // The menu leads to the operation, shown with its examples.
  await page.getByRole('menuitem', { name: 'Tasks', exact: true }).click();
  await page.getByRole('menuitem', { name: /Schedule a webhook/ }).click();
  await expect(page).toHaveURL(/#tag\/tasks\/operation\/createTask$/);
  await expect(operation).toBeInViewport();
  // At each width, the operation at the top of the window, below the
  // page's 48px header (a narrower page is longer: the scroll moves).
  await shoot(page, 'docs', {
    fullPage: false,
    settle: () => operation.evaluate((el) => window.scrollTo(0, el.getBoundingClientRect().top + window.scrollY - 64)),
  });

  // Search runs in Redoc's worker, which the page's policy allows.
  const search = page.getByPlaceholder('Search...');
  await search.fill('replay');
  await expect(page.getByRole('menuitem').filter({ hasText: 'Replay a dead or delivered task' }).first()).toBeVisible();
});

// Portal links: a read-only page of one label's deliveries for a tenant's
// own customer, opened in a browser that holds no session.
test.describe('portal links', () => {
  test('a portal link shows its label\'s tasks only, one with its attempts, and ends when revoked', async ({ page, request, browser }) => {
    const customer = `portal-${Date.now()}`;
    const label = `customer:${customer}`;
    const delivered = await createTask(request, tenantKey, {
      url: `${receiver}/ok?token=query-secret`, body: '{"invoice":"in_42","amount":4200}',
      headers: { 'X-Receiver-Key': 'header-secret' }, labels: { customer, team: 'billing-internal' },
    });
    const failing = await createTask(request, tenantKey, {
      url: `${receiver}/fail`, body: '{"invoice":"in_43"}', labels: { customer },
      retry: { max_attempts: 3, min_backoff: '200ms', max_backoff: '400ms' },
    });
    const waiting = await createTask(request, tenantKey, { url: `${receiver}/ok`, delay: '1h', labels: { customer } });
    const elsewhere = await createTask(request, tenantKey, { url: `${receiver}/ok`, delay: '1h', labels: { customer: `${customer}-other` } });
    const theirs = await createTask(request, otherKey, { url: `${receiver}/ok`, delay: '1h', labels: { customer } });
    await waitStatus(request, tenantKey, delivered.id, 'delivered');
    await waitStatus(request, tenantKey, failing.id, 'dead');

    // The tenant makes the link in its dashboard.
    await signIn(page);
    await page.getByRole('link', { name: 'Portal links' }).click();
    await expect(page.getByRole('heading', { level: 1, name: 'Portal links' })).toBeVisible();
    await page.getByLabel('Label', { exact: true }).fill(label);
    await page.getByLabel('Expires in').selectOption('24h');
    await page.getByLabel('Name', { exact: true }).fill('Acme Corp');
    await page.getByLabel('Description', { exact: true }).fill('Webhooks we sent to your endpoint');
    await page.getByRole('button', { name: 'Create link' }).click();
    const field = page.getByLabel('Portal link', { exact: true });
    await expect(field).toBeVisible();
    const url = await field.inputValue();
    expect(url).toMatch(new RegExp(`^${base.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}/portal/#hwpl_[a-z2-7]+_[a-z2-7]+$`));
    const token = url.slice(url.indexOf('#') + 1);
    await expect(page.locator('table')).toContainText(label);
    await expectLabelled(page);
    await shoot(page, 'portal-links');

    // The token opens the portal's calls and nothing else.
    const refused = await request.fetch(`${base}/v1/tasks/${delivered.id}`, { headers: { Authorization: `Bearer ${token}` } });
    expect(refused.status()).toBe(401);

    // The customer's browser: no session, only the link.
    const customerContext = await browser.newContext({ baseURL: base });
    const portal = await customerContext.newPage();
    const portalErrors = [];
    portal.on('console', (msg) => { if (msg.type() === 'error' && !/status of 40[14]/.test(msg.text())) portalErrors.push(msg.text()); });
    portal.on('pageerror', (err) => portalErrors.push(String(err)));
    await portal.goto(url);
    await expect(portal.getByRole('heading', { level: 1, name: 'Acme Corp' })).toBeVisible();
    // The token left the address bar for the tab's session storage.
    expect(new URL(portal.url()).hash).toBe('');
    expect(await portal.evaluate(() => sessionStorage.getItem('hookwheel.portal-token'))).toBe(token);
    await expect(portal.getByText('Webhooks we sent to your endpoint')).toBeVisible();
    for (const t of [delivered, failing, waiting]) await expect(portal.getByRole('link', { name: `Delivery ${t.id}` })).toBeVisible();
    await expect(portal.getByRole('link', { name: /^Delivery / })).toHaveCount(3);
    const listed = await portal.locator('main').innerText();
    for (const leak of ['query-secret', 'header-secret', 'X-Receiver-Key', 'billing-internal', elsewhere.id, theirs.id]) expect(listed).not.toContain(leak);
    await expectLabelled(portal);
    await shoot(portal, 'portal-tasks');

    await portal.getByLabel('Show').selectOption('dead');
    await expect(portal).toHaveURL(/status=dead/);
    await expect(portal.getByRole('link', { name: /^Delivery / })).toHaveCount(1);
    await portal.getByRole('link', { name: `Delivery ${failing.id}` }).click();
    await expect(portal.getByRole('heading', { level: 1 })).toContainText(failing.id);
    await expect(portal.locator('.statusline .badge')).toHaveText('dead');
    await expect(portal.locator('.timeline li')).toHaveCount(3);
    await expect(portal.locator('.timeline')).toContainText('HTTP 500');
    await expect(portal.locator('.timeline')).toContainText('boom');
    await expect(portal.locator('pre.body')).toContainText('in_43');
    await expect(portal.locator('main')).not.toContainText('X-Request-Id');
    await shoot(portal, 'portal-task');

    await portal.goto(`/portal/tasks/${delivered.id}`);
    await expect(portal.locator('.statusline .badge')).toHaveText('delivered');
    await expect(portal.locator('.timeline')).toContainText('thanks');
    const detail = await portal.locator('main').innerText();
    for (const leak of ['query-secret', 'header-secret', 'billing-internal']) expect(detail).not.toContain(leak);

    // Another label's task and another tenant's look like no task at all.
    for (const id of [elsewhere.id, theirs.id]) {
      await portal.goto(`/portal/tasks/${id}`);
      await expect(portal.getByRole('heading', { level: 1, name: 'Not found' })).toBeVisible();
    }

    // Revoked in the dashboard, the link opens nothing from the next call.
    await page.reload();
    await page.getByRole('row').filter({ hasText: label }).getByRole('button', { name: 'Revoke' }).click();
    await page.getByRole('row').filter({ hasText: label }).getByRole('button', { name: 'Click again to revoke' }).click();
    await expect(page.getByRole('row').filter({ hasText: label })).toHaveCount(0);
    await portal.goto('/portal/');
    await expect(portal.getByRole('heading', { level: 1, name: 'This link has expired' })).toBeVisible();
    await expect(portal.locator('main')).not.toContainText('null');
    await shoot(portal, 'portal-revoked');
    expect(portalErrors).toEqual([]);
    await customerContext.close();
  });
});

test('signing secrets page rotates to an Ed25519 key pair, shows its public key, and rotates back', async ({ page, request }) => {
  await signIn(page);
  await page.getByRole('link', { name: 'Signing secrets' }).click();
  await expect(page.getByRole('heading', { level: 1, name: 'Signing secrets' })).toBeVisible();
  await page.getByLabel('Algorithm', { exact: true }).selectOption('ed25519');
  await page.getByLabel('Grace period', { exact: true }).fill('1h');
  await expectLabelled(page);
  await page.getByRole('button', { name: 'Rotate', exact: true }).click();

  const publicKey = page.getByLabel('Public key', { exact: true });
  await expect(publicKey).toHaveValue(/^whpk_[A-Za-z0-9+/]{43}=$/);
  const shown = await publicKey.inputValue();
  const listed = await call(request, tenantKey, 'GET', '/v1/signing-secrets');
  expect(listed.data[0]).toMatchObject({ algorithm: 'ed25519', public_key: shown, current: true });
  const current = page.getByRole('row').filter({ hasText: 'current' });
  await expect(current).toContainText('ed25519');
  await expect(current).toContainText(shown);
  await expect(page.getByRole('row').filter({ hasText: 'in grace' }).first()).toContainText('hmac-sha256');
  expect(await page.content()).not.toContain('whsk_');
  await shoot(page, 'secrets-ed25519');

  // Back to a shared secret, at once: it is shown once, and is the only one.
  await page.getByLabel('Algorithm', { exact: true }).selectOption('hmac-sha256');
  await page.getByLabel('Grace period', { exact: true }).fill('0s');
  await page.getByRole('button', { name: 'Rotate', exact: true }).click();
  await expect(page.getByLabel('Copy it now')).toHaveValue(/^whsec_/);
  await expect(page.getByRole('row').filter({ hasText: 'current' })).toContainText('hmac-sha256');
  await expect(page.getByRole('row').filter({ hasText: 'in grace' })).toHaveCount(0);
});
