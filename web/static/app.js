// The hookwheel dashboard: a page per route under /ui/, each drawn from the
// public API (/v1/...) with the session cookie and its CSRF token. No build
// step: this file is served as written (see web/README.md).

const main = document.getElementById('main');
const top = document.getElementById('top');
const toastEl = document.getElementById('toast');

const state = { session: null, timers: [] };

// ---------------------------------------------------------------------------
// DOM helpers

// h builds an element: h('a', {href: '/ui/'}, 'text', child, ...). Attributes
// named on* are listeners; false, null and undefined attributes are left out.
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === false || v === null || v === undefined) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else if (v === true) el.setAttribute(k, '');
    else el.setAttribute(k, v);
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

// fill replaces el's children, leaving out null and false ones.
function fill(el, ...children) {
  el.replaceChildren();
  return append(el, children);
}

// show adds children to the page, leaving out null and false ones.
function show(...children) {
  return append(main, children);
}

// pageShow is show for one page: a page calls it first, before any await,
// and what it shows after its person moved on to another page is dropped
// instead of landing there.
function pageShow() {
  const mine = generation;
  return (...children) => {
    if (mine === generation) append(main, children);
  };
}

function link(href, ...children) {
  return h('a', { href }, ...children);
}

let uid = 0;
// field is a labelled form control; control is built with the id it gets.
function field(label, control, hint) {
  const id = control.id || `f${++uid}`;
  control.id = id;
  const hintEl = hint ? h('span', { class: 'hint', id: `${id}-hint` }, hint) : null;
  if (hintEl) control.setAttribute('aria-describedby', hintEl.id);
  return h('div', { class: 'field' }, h('label', { for: id }, label), control, hintEl);
}

function toast(text) {
  toastEl.textContent = text;
  toastEl.classList.add('shown');
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => toastEl.classList.remove('shown'), 4000);
}

// confirmButton asks a second click before an action that cannot be undone.
function confirmButton(label, confirmLabel, action, cls = 'danger') {
  const b = h('button', { type: 'button', class: cls });
  let armed = false;
  const reset = () => { armed = false; b.textContent = label; b.removeAttribute('aria-live'); };
  reset();
  b.addEventListener('click', async () => {
    if (!armed) {
      armed = true;
      b.textContent = confirmLabel;
      b.setAttribute('aria-live', 'polite');
      setTimeout(() => { if (armed) reset(); }, 5000);
      return;
    }
    reset();
    b.disabled = true;
    try { await action(); } finally { b.disabled = false; }
  });
  return b;
}

// ---------------------------------------------------------------------------
// Formatting

function fmtTime(iso) {
  if (!iso) return '—';
  const d = new Date(iso);
  return d.toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'medium' });
}

function fmtZoned(iso, zone) {
  return new Date(iso).toLocaleString(undefined, {
    weekday: 'short', year: 'numeric', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', timeZone: zone, timeZoneName: 'short',
  });
}

function relTime(iso) {
  if (!iso) return '';
  const s = (new Date(iso).getTime() - Date.now()) / 1000;
  const a = Math.abs(s);
  const rtf = new Intl.RelativeTimeFormat(undefined, { numeric: 'auto' });
  if (a < 60) return rtf.format(Math.round(s), 'second');
  if (a < 3600) return rtf.format(Math.round(s / 60), 'minute');
  if (a < 86400) return rtf.format(Math.round(s / 3600), 'hour');
  return rtf.format(Math.round(s / 86400), 'day');
}

function timeCell(iso) {
  if (!iso) return h('span', { class: 'muted' }, '—');
  return h('time', { datetime: iso, title: fmtTime(iso) }, relTime(iso));
}

function fmtNum(n, digits = 0) {
  if (n === null || n === undefined) return '—';
  return Number(n).toLocaleString(undefined, { maximumFractionDigits: digits });
}

// fmtCompact writes an axis's count short: 1.2K, 3M.
function fmtCompact(n) {
  return Number(n).toLocaleString(undefined, { notation: 'compact', maximumFractionDigits: 1 });
}

// fmtBytes writes a count of bytes in binary units: 512 B, 1.5 KiB, 3.2 MiB.
function fmtBytes(n) {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
  let i = 0;
  let v = Number(n);
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  return `${fmtNum(v, i === 0 ? 0 : 1)} ${units[i]}`;
}

// fmtDay writes a UTC day, given as Unix seconds or YYYY-MM-DD: Nov 3.
function fmtDay(day, long = false) {
  const d = typeof day === 'number' ? new Date(day * 1000) : new Date(`${day}T00:00:00Z`);
  return d.toLocaleDateString(undefined, long ? { weekday: 'short', month: 'short', day: 'numeric', timeZone: 'UTC' }
    : { month: 'short', day: 'numeric', timeZone: 'UTC' });
}

// shortID is the end of an id: ids are UUIDv7, whose first digits are the
// time of creation and alike for tasks made together.
function shortID(id) { return id ? `…${id.slice(-8)}` : ''; }

function statusBadge(status) {
  return h('span', { class: `badge s-${status}` }, status);
}

// toLocalInput turns a Date into the value of a datetime-local input.
function toLocalInput(d) {
  const p = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}T${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

function fromLocalInput(v) { return v ? new Date(v).toISOString() : undefined; }

// ---------------------------------------------------------------------------
// The API

class APIError extends Error {
  constructor(status, problem) {
    super(problem && problem.detail ? problem.detail : `HTTP ${status}`);
    this.status = status;
    this.problem = problem || {};
  }
}

async function api(method, path, body) {
  const headers = { Accept: 'application/json' };
  if (state.session) headers['X-CSRF-Token'] = state.session.csrf_token;
  const opts = { method, headers, credentials: 'same-origin' };
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    opts.body = JSON.stringify(body);
  }
  const r = await fetch(path, opts);
  if (r.status === 204) return null;
  const type = r.headers.get('Content-Type') || '';
  const data = type.includes('json') ? await r.json() : await r.text();
  if (!r.ok) {
    if (r.status === 401 && state.session && path !== '/v1/session') {
      state.session = null;
      navigate('/ui/sign-in?expired=1', true);
    }
    throw new APIError(r.status, typeof data === 'object' ? data : { detail: String(data) });
  }
  return data;
}

function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== '') q.set(k, v);
  const s = q.toString();
  return s ? `?${s}` : '';
}

// problemBox shows an API error where the person acted, fields and all.
function problemBox(err) {
  const p = err instanceof APIError ? err.problem : { detail: String(err) };
  return h('div', { class: 'problem', role: 'alert' },
    h('strong', {}, p.title || 'Something went wrong'), ' ', p.detail || '',
    p.errors && p.errors.length ? h('ul', {}, p.errors.map((e) => h('li', {}, h('code', {}, e.field), ': ', e.message))) : null);
}

// run performs action for a form, showing its error in slot.
async function run(slot, action) {
  fill(slot);
  try {
    await action();
  } catch (err) {
    fill(slot, problemBox(err));
  }
}

// ---------------------------------------------------------------------------
// Routing

const tenantNav = [
  ['/ui/overview', 'Overview'],
  ['/ui/tasks', 'Tasks'],
  ['/ui/schedules', 'Schedules'],
  ['/ui/topics', 'Topics'],
  ['/ui/dead-letters', 'Dead letters'],
  ['/ui/targets', 'Targets'],
  ['/ui/usage', 'Usage'],
  ['/ui/keys', 'API keys'],
  ['/ui/secrets', 'Signing secrets'],
  ['/ui/portal-links', 'Portal links'],
];
const operatorNav = [
  ['/ui/admin/tenants', 'Tenants'],
  ['/ui/admin/nodes', 'Nodes'],
  ['/ui/admin/breakers', 'Breakers'],
  ['/ui/admin/health', 'Health'],
];

const routes = [
  [/^\/ui\/sign-in$/, signInPage, null],
  [/^\/ui\/sign-up$/, signUpPage, null],
  [/^\/ui\/overview$/, overviewPage, 'tenant'],
  [/^\/ui\/tasks$/, tasksPage, 'tenant'],
  [/^\/ui\/tasks\/([^/]+)$/, taskPage, 'tenant'],
  [/^\/ui\/schedules$/, schedulesPage, 'tenant'],
  [/^\/ui\/topics$/, topicsPage, 'tenant'],
  [/^\/ui\/publishes\/([^/]+)$/, publishPage, 'tenant'],
  [/^\/ui\/dead-letters$/, deadLettersPage, 'tenant'],
  [/^\/ui\/targets$/, targetsPage, 'tenant'],
  [/^\/ui\/usage$/, usagePage, 'tenant'],
  [/^\/ui\/keys$/, keysPage, 'tenant'],
  [/^\/ui\/secrets$/, secretsPage, 'tenant'],
  [/^\/ui\/portal-links$/, portalLinksPage, 'tenant'],
  [/^\/ui\/admin\/tenants$/, tenantsPage, 'operator'],
  [/^\/ui\/admin\/nodes$/, nodesPage, 'operator'],
  [/^\/ui\/admin\/breakers$/, breakersPage, 'operator'],
  [/^\/ui\/admin\/health$/, healthPage, 'operator'],
];

function home() {
  if (!state.session) return '/ui/sign-in';
  return state.session.role === 'operator' ? '/ui/admin/tenants' : '/ui/overview';
}

function navigate(url, replace = false) {
  if (replace) history.replaceState(null, '', url);
  else history.pushState(null, '', url);
  render();
}

document.addEventListener('click', (e) => {
  const a = e.target.closest('a');
  if (!a || a.target || e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
  const url = new URL(a.href, location.href);
  if (url.origin !== location.origin || !url.pathname.startsWith('/ui/') || url.pathname.startsWith('/ui/static/')) return;
  e.preventDefault();
  navigate(url.pathname + url.search);
});
window.addEventListener('popstate', render);

function stopTimers() {
  for (const t of state.timers) clearInterval(t);
  state.timers = [];
}

// every runs fn now, then every ms while the page stays and its tab is
// shown. A failure of the first run is the page's; a later one shows in a
// banner until a run succeeds, so that a page left open says when its
// numbers stopped moving.
async function every(ms, fn) {
  const banner = h('div', { class: 'problem stale', role: 'alert', hidden: true });
  // Registered before the first run, so that leaving the page while it
  // waits stops it too.
  state.timers.push(setInterval(async () => {
    if (document.hidden) return;
    try {
      await fn();
      banner.hidden = true;
    } catch (err) {
      fill(banner, `Not refreshed since ${new Date().toLocaleTimeString()}: ${err.message}`);
      banner.hidden = false;
    }
  }, ms));
  const mine = generation;
  await fn();
  if (mine === generation) main.prepend(banner);
}

// A page draws after its calls return; the generation tells a page whose
// person has moved on that it is no longer the one to draw.
let generation = 0;

async function render() {
  const mine = ++generation;
  stopTimers();
  let path = location.pathname.replace(/\/+$/, '') || '/ui';
  if (path === '/ui') {
    history.replaceState(null, '', home());
    path = location.pathname;
  }
  const route = routes.find(([re]) => re.test(path));
  if (route && route[2] && !state.session) {
    navigate(`/ui/sign-in${query({ next: location.pathname + location.search })}`, true);
    return;
  }
  if (route && route[2] && state.session.role !== route[2]) {
    navigate(home(), true);
    return;
  }
  drawHeader(path);
  fill(main);
  if (!route) {
    show(h('h1', {}, 'Not found'), h('p', {}, 'No page here. ', link(home(), 'Go to the start page.')));
  } else {
    const params = new URLSearchParams(location.search);
    try {
      await route[1](path.match(route[0]).slice(1), params);
    } catch (err) {
      if (mine !== generation) return;
      if (err instanceof APIError && err.status === 404) {
        fill(main, h('h1', {}, 'Not found'), problemBox(err));
      } else {
        // A fault of the page itself is a bug: said in the console too,
        // where the browser tests look.
        if (!(err instanceof APIError)) console.error(err);
        show(problemBox(err));
      }
    }
  }
  if (mine !== generation) return;
  const h1 = main.querySelector('h1');
  document.title = h1 ? `${h1.textContent} · hookwheel` : 'hookwheel';
  if (h1) { h1.tabIndex = -1; h1.focus({ preventScroll: true }); }
}

function drawHeader(path) {
  const s = state.session;
  const brand = h('a', { class: 'brand', href: home() }, h('img', { src: '/ui/static/favicon.svg', alt: '', width: 22, height: 22 }), 'hookwheel');
  // The API reference is a page of its own, outside the application, and
  // public: shown signed in or not.
  const docs = h('a', { class: 'docs', href: '/docs' }, 'API reference');
  if (!s) {
    fill(top, h('div', { class: 'bar' }, brand, docs));
    return;
  }
  const items = s.role === 'operator' ? operatorNav : tenantNav;
  // On a phone the bar has no room for the reference beside who is signed
  // in: it moves to the end of the navigation instead.
  const nav = h('nav', { 'aria-label': 'Main' }, h('ul', {}, items.map(([href, label]) =>
    h('li', {}, h('a', { href, 'aria-current': path === href || path.startsWith(`${href}/`) ? 'page' : false }, label))),
  h('li', { class: 'narrow' }, h('a', { href: '/docs' }, 'API reference'))));
  docs.classList.add('wide');
  const who = s.role === 'operator' ? 'Operator' : s.tenant.name;
  const signOut = h('button', { type: 'button', class: 'link', onclick: async () => {
    await api('DELETE', '/v1/session').catch(() => {});
    state.session = null;
    navigate('/ui/sign-in', true);
  } }, 'Sign out');
  fill(top, h('div', { class: 'bar' }, brand, h('span', { class: 'who' }, who, s.role === 'tenant' ? h('span', { class: 'muted' }, ` · key ${s.key.name || s.key.id}`) : null), docs, signOut), nav);
}

// ---------------------------------------------------------------------------
// Sign in

function signInPage(_, params) {
  const show = pageShow();
  const slot = h('div');
  const next = params.get('next');
  const after = () => navigate(next && next.startsWith('/ui/') ? next : home(), true);
  const keyInput = h('input', { type: 'password', name: 'api_key', autocomplete: 'off', required: true, spellcheck: 'false', placeholder: 'hw_…' });
  const tokenInput = h('input', { type: 'password', name: 'admin_token', autocomplete: 'off', required: true });
  const signUpSlot = h('div');
  const signIn = (body) => run(slot, async () => {
    state.session = await api('POST', '/v1/session', body);
    after();
  });
  show(h('section', { class: 'signin card' },
    h('h1', {}, 'Sign in'),
    params.get('expired') ? h('p', { class: 'note' }, 'Your session ended. Sign in again.') : null,
    h('form', { onsubmit: (e) => { e.preventDefault(); signIn({ api_key: keyInput.value.trim() }); } },
      field('API key', keyInput, 'A tenant API key. It is checked once and never kept in the browser.'),
      h('button', { type: 'submit', class: 'primary' }, 'Sign in')),
    signUpSlot,
    h('details', {},
      h('summary', {}, 'Operator? Sign in with the admin token'),
      h('form', { onsubmit: (e) => { e.preventDefault(); signIn({ admin_token: tokenInput.value }); } },
        field('Admin token', tokenInput, 'The server\u2019s HOOKWHEEL_ADMIN_TOKEN.'),
        h('button', { type: 'submit' }, 'Sign in as operator'))),
    slot));
  // Offered only where the server lets tenants sign up; the sign-in page
  // does not wait for the answer.
  api('GET', '/v1/signup').then((info) => {
    if (info.mode !== 'off') fill(signUpSlot, h('p', { class: 'signup-offer' }, 'No API key yet? ', link('/ui/sign-up', 'Create an account')));
  }).catch(() => {});
}

// ---------------------------------------------------------------------------
// Sign up

async function signUpPage() {
  const show = pageShow();
  const { mode } = await api('GET', '/v1/signup');
  const signInLink = h('p', { class: 'muted' }, 'Already have an API key? ', link('/ui/sign-in', 'Sign in'));
  if (mode === 'off') {
    show(h('section', { class: 'signin card' }, h('h1', {}, 'Sign up'),
      h('p', {}, 'This server does not let accounts be created here. Ask its operator for an API key.'), signInLink));
    return;
  }
  const slot = h('div');
  const box = h('section', { class: 'signin card' });
  const name = h('input', { type: 'text', name: 'name', required: true, maxlength: 100, autocomplete: 'organization', placeholder: 'acme' });
  const code = mode === 'invite'
    ? h('input', { type: 'text', name: 'invite_code', required: true, autocomplete: 'off', spellcheck: 'false', placeholder: 'hwinv_…' })
    : null;
  const form = h('form', { onsubmit: (e) => {
    e.preventDefault();
    run(slot, async () => {
      const body = { name: name.value.trim() };
      if (code) body.invite_code = code.value.trim();
      const created = await api('POST', '/v1/signup', body);
      fill(box, signedUp(created));
      box.querySelector('h1').focus();
    });
  } },
  field('Account name', name, 'Your organisation or project, as it will show to the operator. Up to 100 characters.'),
  code ? field('Invite code', code, 'The code the operator gave you. It works once.') : null,
  h('button', { type: 'submit', class: 'primary' }, 'Create account'));
  fill(box, h('h1', {}, 'Sign up'),
    h('p', { class: 'muted' }, mode === 'invite' ? 'Create an account with an invite code from this server\u2019s operator.' : 'Create an account on this server.'),
    form, slot, signInLink);
  show(box);
}

// signedUp shows the new account's credentials, which the API shows only
// in the sign-up's answer, and signs in with the key on request.
function signedUp(created) {
  const slot = h('div');
  const go = h('button', { type: 'button', class: 'primary', onclick: () => run(slot, async () => {
    go.disabled = true;
    try {
      state.session = await api('POST', '/v1/session', { api_key: created.api_key });
    } finally {
      go.disabled = false;
    }
    navigate(home(), true);
  }) }, 'Continue to the dashboard');
  return [
    h('h1', { tabindex: -1 }, `Welcome, ${created.tenant.name}`),
    h('div', { class: 'once', role: 'alert' },
      h('h2', {}, 'Copy your API key and signing secret now'),
      h('p', {}, 'They are shown only this once: hookwheel keeps no copy it could show again. Store them somewhere safe before you leave this page.'),
      copyField('API key', created.api_key,
        { note: 'Your programs call the API with it (Authorization: Bearer …). It has every scope.', what: 'API key', wrap: true }),
      copyField('Signing secret', created.signing_secret,
        { note: 'Your receivers verify the signature of every webhook with it.', what: 'signing secret', wrap: true })),
    h('div', { class: 'actions' }, go), slot,
  ];
}

// ---------------------------------------------------------------------------
// Overview

const chartColors = { a: '#4f46e5', b: '#0ea5e9', c: '#dc2626', d: '#f59e0b' };

function chartBox(title, id) {
  return h('figure', { class: 'chart card', id },
    h('figcaption', {}, title), h('div', { class: 'plot', role: 'img', 'aria-label': title }));
}

// drawChart (re)draws a uPlot chart in box: xs are Unix seconds, series
// [{label, values, color, bars, dash}]. With days, xs are UTC midnights: the
// axis names days, and bar series stand side by side on their day (bars: -1
// left of it, 1 right of it).
function drawChart(box, xs, series, yLabel, { days = false } = {}) {
  const plot = box.querySelector('.plot');
  const width = Math.max(260, plot.clientWidth || box.clientWidth - 24);
  const bars = (s) => {
    if (!s.bars || !uPlot.paths || !uPlot.paths.bars) return undefined;
    return uPlot.paths.bars(days ? { size: [0.4, 22], align: s.bars === true ? 0 : s.bars } : { size: [0.7, 8] });
  };
  const grid = { stroke: '#eef0f3' };
  const opts = {
    width, height: 180,
    legend: { show: true, live: false, markers: { dash: (u, i) => (u.series[i].dash ? 'dashed' : 'solid') } },
    cursor: { drag: { x: false, y: false } },
    scales: {
      x: days ? { time: false, range: (u) => [u.data[0][0] - 43200, u.data[0][u.data[0].length - 1] + 43200] } : { time: true },
      y: { range: (u, min, max) => [0, Math.max(1, max * 1.1)] },
    },
    axes: [
      days ? { stroke: '#6b7280', grid, splits: (u) => daySplits(u.data[0], u.width),
        values: (u, vs) => vs.map((v) => fmtDay(v)) } : { stroke: '#6b7280', grid },
      days ? { stroke: '#6b7280', grid, label: yLabel, size: 56, incrs: countSteps, values: (u, vs) => vs.map(fmtCompact) }
        : { stroke: '#6b7280', grid, label: yLabel, size: 56 }],
    series: [{}, ...series.map((s) => ({
      label: s.label, stroke: s.color, width: s.dash ? 1.5 : 2, dash: s.dash,
      fill: s.bars ? `${s.color}${days ? 'cc' : '55'}` : undefined,
      paths: bars(s),
      // Points where a line cannot show: a lone minute between empty ones.
      spanGaps: false, points: { show: !s.bars && !s.dash && isSparse(s.values), size: 6 },
      value: (u, v) => (v === null || v === undefined ? '—' : fmtNum(v, 2)),
    }))],
  };
  const data = [xs, ...series.map((s) => s.values)];
  const shape = `${width} ${days} ${series.map((s) => `${s.label}:${isSparse(s.values)}`).join()}`;
  if (box.uplot && box.shape === shape) {
    box.uplot.setData(data);
    return;
  }
  if (box.uplot) box.uplot.destroy();
  fill(plot);
  box.uplot = new uPlot(opts, data, plot);
  box.shape = shape;
  // A chart follows its box's width: a window turned or narrowed.
  if (!box.resizer && window.ResizeObserver) {
    box.resizer = new ResizeObserver(() => {
      const w = Math.max(260, plot.clientWidth);
      if (box.uplot && Math.abs(box.uplot.width - w) > 1) box.uplot.setSize({ width: w, height: box.uplot.height });
    });
    box.resizer.observe(plot);
  }
}

// countSteps are the distances between a count axis's lines: whole numbers.
const countSteps = [1, 2, 5].flatMap((m) => [1, 10, 100, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8].map((p) => m * p)).sort((a, b) => a - b);

// daySplits are the days a day axis names: every day where there is room,
// else every second, third, seventh or fourteenth day from the first.
function daySplits(xs, width) {
  const room = Math.max(2, Math.floor((width - 70) / 52));
  const step = [1, 2, 3, 7, 14].find((n) => xs.length / n <= room) || 28;
  return xs.filter((_, i) => i % step === 0);
}

function isSparse(values) {
  return values.filter((v) => v !== null && v !== undefined).length < 3;
}

async function overviewPage() {
  const show = pageShow();
  const cards = h('div', { class: 'cards' });
  const charts = [
    chartBox('Deliveries per second, by minute', 'chart-rate'),
    chartBox('Lateness, ms (p50 and p99), by minute', 'chart-lateness'),
    chartBox('Failed attempts, by minute', 'chart-failures'),
  ];
  const statuses = h('div', { class: 'card' });
  const failing = h('div', { class: 'card' });
  show(h('div', { class: 'pagehead' }, h('h1', {}, 'Overview'), h('p', { class: 'muted' }, 'The last hour, by minute; refreshed every 10 seconds.')),
    cards, h('div', { class: 'charts' }, charts), h('div', { class: 'two' }, statuses, failing));
  await every(10000, async () => {
    const [stats, targets] = await Promise.all([api('GET', '/v1/stats?window=1h'), api('GET', '/v1/targets')]);
    const m = stats.minutes;
    const xs = m.map((x) => new Date(x.start).getTime() / 1000);
    const sum = (k) => m.reduce((a, x) => a + x[k], 0);
    const last = [...m].reverse().find((x) => x.lateness_p99_ms !== null && x.lateness_p99_ms !== undefined);
    const waiting = ['scheduled', 'retrying', 'dispatching'].reduce((a, k) => a + stats.tasks_by_status[k], 0);
    fill(cards, 
      stat('Delivered', fmtNum(sum('delivered')), 'last hour'),
      stat('Failed attempts', fmtNum(sum('retried') + sum('dead')), `${fmtNum(sum('dead'))} left their task dead`),
      stat('Lateness p99', last ? `${fmtNum(last.lateness_p99_ms, 1)} ms` : '—', last ? `p50 ${fmtNum(last.lateness_p50_ms, 2)} ms, latest minute` : 'no attempts yet'),
      stat('Waiting', fmtNum(waiting), 'scheduled, retrying or dispatching'));
    drawChart(charts[0], xs, [
      { label: 'delivered/s', values: m.map((x) => x.delivered / 60), color: chartColors.a },
      { label: 'attempts/s', values: m.map((x) => x.attempts / 60), color: chartColors.b },
    ], '/s');
    drawChart(charts[1], xs, [
      { label: 'p50', values: m.map((x) => x.lateness_p50_ms ?? null), color: chartColors.b },
      { label: 'p99', values: m.map((x) => x.lateness_p99_ms ?? null), color: chartColors.a },
    ], 'ms');
    drawChart(charts[2], xs, [
      { label: 'retried', values: m.map((x) => x.retried), color: chartColors.d, bars: true },
      { label: 'dead', values: m.map((x) => x.dead), color: chartColors.c, bars: true },
    ], 'attempts');
    const limit = stats.status_count_limit;
    fill(statuses, h('h2', {}, 'Tasks by status'), h('ul', { class: 'statuslist' },
      taskStatuses.map((k) => [k, stats.tasks_by_status[k]]).map(([k, n]) => h('li', {},
        link(`/ui/tasks?status=${k}`, statusBadge(k)), h('span', { class: 'num' }, n >= limit ? `${fmtNum(limit)}+` : fmtNum(n))))));
    const top5 = [...targets.data].filter((t) => t.failures > 0).sort((a, b) => b.failures - a.failures).slice(0, 5);
    fill(failing, h('h2', {}, 'Targets with the most failures'), top5.length === 0
      ? h('p', { class: 'muted' }, 'No failures in the last ten minutes.')
      : table(['Target', 'Breaker', 'Failures', 'Attempts'], top5.map((t) => [
        h('code', {}, t.target), breakerBadge(t.state), fmtNum(t.failures), fmtNum(t.attempts)]), 'Targets with the most failures'));
  });
}

function stat(label, value, note) {
  return h('div', { class: 'stat card' }, h('div', { class: 'label' }, label), h('div', { class: 'value' }, value), h('div', { class: 'muted' }, note));
}

function breakerBadge(state) {
  return h('span', { class: `badge b-${state}` }, state);
}

// table renders rows (arrays of cells) under headings, with a caption for
// screen readers. Columns whose index is in wideOnly are left out on narrow
// screens; those in numeric are counts, set right to line up their digits.
// Each cell carries its heading, which a stacked table (class stacked on
// its wrapper) shows beside it on narrow screens.
function table(headings, rows, caption, empty = 'Nothing here yet.', wideOnly = [], numeric = []) {
  if (rows.length === 0) return h('p', { class: 'muted empty' }, empty);
  const cls = (i) => [wideOnly.includes(i) ? 'wide' : '', numeric.includes(i) ? 'n' : ''].join(' ').trim() || false;
  return h('div', { class: 'tablewrap' }, h('table', {},
    h('caption', { class: 'sr' }, caption),
    h('thead', {}, h('tr', {}, headings.map((t, i) => h('th', { scope: 'col', class: cls(i) }, t)))),
    h('tbody', {}, rows.map((r) => h('tr', {}, r.map((c, i) => h('td', { class: cls(i), 'data-label': headings[i] || false }, c)))))));
}

// ---------------------------------------------------------------------------
// Tasks

const taskStatuses = ['scheduled', 'dispatching', 'retrying', 'delivered', 'dead', 'canceled', 'expired'];
const uuidRe = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

function taskRows(tasks) {
  return tasks.map((t) => [
    h('a', { href: `/ui/tasks/${t.id}`, title: t.id, 'aria-label': `Task ${t.id}` }, h('code', {}, shortID(t.id))),
    statusBadge(t.status),
    h('span', { class: 'url' }, h('span', { class: 'method' }, t.method), ' ', t.url),
    timeCell(t.next_attempt_at || t.run_at),
    `${t.attempts}/${t.max_attempts}`,
    t.last_status_code ?? (t.last_error ? h('span', { class: 'err' }, 'error') : '—'),
    timeCell(t.created_at),
  ]);
}

// filterFields are the conditions the task list and the bulk replay share
// (URL prefix, schedule, creation time), filled from f; read gives those set,
// as the API names them.
function filterFields(f) {
  const url = h('input', { type: 'text', name: 'url', value: f.url, placeholder: 'https://api.example.com/' });
  const schedule = h('input', { type: 'text', name: 'schedule_id', value: f.schedule_id, placeholder: 'schedule id' });
  const localValue = (iso) => (iso ? toLocalInput(new Date(iso)) : '');
  const after = h('input', { type: 'datetime-local', step: 1, name: 'created_after', value: localValue(f.created_after) });
  const before = h('input', { type: 'datetime-local', step: 1, name: 'created_before', value: localValue(f.created_before) });
  const read = () => {
    const out = {};
    if (url.value.trim()) out.url = url.value.trim();
    if (schedule.value.trim()) out.schedule_id = schedule.value.trim();
    if (after.value) out.created_after = fromLocalInput(after.value);
    if (before.value) out.created_before = fromLocalInput(before.value);
    return out;
  };
  return {
    fields: [field('URL starts with', url), field('Schedule', schedule), field('Created from', after), field('Created before', before)],
    read,
  };
}

const taskHeadings = ['Task', 'Status', 'URL', 'Due', 'Attempts', 'Last status', 'Created'];
const taskWideOnly = [3, 4, 5, 6];

async function tasksPage(_, params) {
  const show = pageShow();
  const f = Object.fromEntries(['status', 'url', 'schedule_id', 'publish_id', 'topic', 'created_after', 'created_before', 'idempotency_key', 'cursor'].map((k) => [k, params.get(k) || '']));
  const slot = h('div');
  const search = h('input', { type: 'search', id: 'task-search', name: 'q', value: f.idempotency_key, placeholder: 'task id or idempotency key', 'aria-describedby': 'task-search-hint' });
  const status = h('select', { name: 'status' }, h('option', { value: '' }, 'any'), taskStatuses.map((s) => h('option', { value: s, selected: s === f.status }, s)));
  const conditions = filterFields(f);
  const searchForm = h('form', { class: 'search', role: 'search', onsubmit: async (e) => {
    e.preventDefault();
    const q = search.value.trim();
    if (uuidRe.test(q)) navigate(`/ui/tasks/${q.toLowerCase()}`);
    else navigate(`/ui/tasks${query({ idempotency_key: q })}`);
  } }, h('label', { for: 'task-search' }, 'Find a task'), h('div', { class: 'row' }, search, h('button', { type: 'submit' }, 'Find')),
  h('span', { class: 'hint', id: 'task-search-hint' }, 'By id, or by the idempotency key it was created with.'));
  const filters = h('form', { class: 'filters', onsubmit: (e) => {
    e.preventDefault();
    navigate(`/ui/tasks${query({ status: status.value, ...conditions.read() })}`);
  } }, field('Status', status), conditions.fields,
  h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary' }, 'Filter'), link('/ui/tasks', 'Clear')));
  // A publish's or a topic's tasks come from their pages' links; the filter
  // shows, and Clear drops it.
  const from = f.publish_id ? ['publish ', link(`/ui/publishes/${f.publish_id}`, h('code', {}, shortID(f.publish_id)))]
    : f.topic ? ['topic ', h('code', {}, f.topic)] : null;
  const fromNote = from ? h('p', { class: 'note' }, 'Only the tasks of ', from, '. ', link('/ui/tasks', 'Show every task')) : null;
  show(h('h1', {}, 'Tasks'), searchForm, filters, fromNote, slot);
  const list = await api('GET', `/v1/tasks${query({ ...f, limit: 50 })}`);
  const next = list.next_cursor ? link(`/ui/tasks${query({ ...f, cursor: list.next_cursor })}`, 'Next page →') : null;
  slot.append(table(taskHeadings, taskRows(list.data), 'Tasks', 'No task matches.', taskWideOnly),
    h('div', { class: 'pager' }, f.cursor ? link(`/ui/tasks${query({ ...f, cursor: '' })}`, '← First page') : null, next));
}

async function taskPage([id]) {
  const show = pageShow();
  if (!uuidRe.test(id)) throw new APIError(404, { title: 'Not found', detail: `no task ${id}` });
  // The task first, its attempts after: an attempt is written with the
  // task's outcome, so the later read holds every attempt the task counts.
  // Read together, the attempts could come from before the task's last one.
  const task = await api('GET', `/v1/tasks/${id}`);
  const attempts = await api('GET', `/v1/tasks/${id}/attempts`);
  const slot = h('div');
  const refresh = () => render();
  const actions = h('div', { class: 'actions' });
  const waiting = task.status === 'scheduled' || task.status === 'retrying';
  const finished = task.status === 'dead' || task.status === 'delivered';
  if (waiting) {
    actions.append(confirmButton('Cancel task', 'Click again to cancel', () => run(slot, async () => {
      await api('DELETE', `/v1/tasks/${id}`);
      toast('Task canceled');
      refresh();
    })));
  }
  if (finished) {
    actions.append(h('button', { type: 'button', class: 'primary', onclick: () => run(slot, async () => {
      await api('POST', `/v1/tasks/${id}/replay`);
      toast('Task replayed: due now');
      refresh();
    }) }, 'Replay'));
  }
  const when = h('input', { type: 'datetime-local', step: 1, required: true, value: toLocalInput(new Date(Date.now() + 5 * 60000)) });
  const reschedule = waiting ? h('form', { class: 'inline', onsubmit: (e) => {
    e.preventDefault();
    run(slot, async () => {
      await api('PATCH', `/v1/tasks/${id}`, { run_at: fromLocalInput(when.value) });
      toast('Task rescheduled');
      refresh();
    });
  } }, field('New time', when), h('button', { type: 'submit' }, 'Reschedule')) : null;

  const editUrl = h('input', { type: 'url', value: task.url, required: true });
  const editMethod = h('select', {}, ['POST', 'PUT', 'PATCH', 'DELETE', 'GET'].map((m) => h('option', { selected: m === task.method }, m)));
  const headerText = Object.entries(task.headers || {}).map(([k, v]) => `${k}: ${v}`).join('\n');
  const editHeaders = h('textarea', { rows: 3, spellcheck: 'false' }, headerText);
  const editBody = h('textarea', { rows: 6, spellcheck: 'false' }, task.body || '');
  const edit = finished ? h('details', { class: 'edit card' }, h('summary', {}, 'Edit and replay'),
    h('form', { onsubmit: (e) => {
      e.preventDefault();
      run(slot, async () => {
        const change = {};
        if (editUrl.value !== task.url) change.url = editUrl.value;
        if (editMethod.value !== task.method) change.method = editMethod.value;
        if (editHeaders.value !== headerText.replace(/\r\n?/g, '\n')) change.headers = parseHeaders(editHeaders.value);
        // A textarea reads every line break as LF: compare alike, and give a
        // body that used CRLF (multipart does) its CRLF back.
        const original = task.body || '';
        const lf = (text) => text.replace(/\r\n?/g, '\n');
        if (editBody.value !== lf(original)) {
          change.body = original.includes('\r\n') ? editBody.value.replace(/\n/g, '\r\n') : editBody.value;
        }
        await api('POST', `/v1/tasks/${id}/replay`, change);
        toast('Task changed and replayed');
        refresh();
      });
    } }, field('URL', editUrl), field('Method', editMethod), field('Headers', editHeaders, 'One “Name: value” per line; replaces every header of the task.'),
    field('Body', editBody), h('button', { type: 'submit', class: 'primary' }, 'Replay with these changes'))) : null;

  const live = !['delivered', 'dead', 'canceled', 'expired'].includes(task.status);
  append(main, [
    h('div', { class: 'pagehead' }, h('p', {}, link('/ui/tasks', '← Tasks')), h('h1', {}, 'Task ', h('code', {}, task.id)),
      h('p', { class: 'statusline' }, statusBadge(task.status), live ? h('span', { class: 'muted' }, ' refreshing every 2 seconds') : null)),
    actions, reschedule, slot,
    h('div', { class: 'two' },
      h('section', { class: 'card' }, h('h2', {}, 'Request'), h('dl', { class: 'fields' },
        dt('URL', h('code', { class: 'wrap' }, task.url)), dt('Method', task.method),
        dt('Run at', fmtTime(task.run_at)), task.expires_at ? dt('Expires at', fmtTime(task.expires_at)) : null, dt('Next attempt', task.next_attempt_at ? [fmtTime(task.next_attempt_at), ' (', relTime(task.next_attempt_at), ')']
          : (live && task.ordering_key ? 'once the task before it in its ordering key is finished' : '—')),
        dt('Attempts', `${task.attempts} of ${task.max_attempts}`), dt('Timeout', task.timeout),
        dt('Idempotency key', task.idempotency_key ? h('code', {}, task.idempotency_key) : '—'),
        dt('Schedule', task.schedule_id ? h('code', {}, task.schedule_id) : '—'),
        task.ordering_key ? dt('Ordering key', h('code', {}, task.ordering_key)) : null,
        task.flow_key ? dt('Flow key', h('code', {}, task.flow_key)) : null,
        task.callback ? dt('Callback', h('code', { class: 'wrap' }, task.callback)) : null,
        task.failure_callback ? dt('Failure callback', h('code', { class: 'wrap' }, task.failure_callback)) : null,
        task.callback_task_id ? dt('Callback task', link(`/ui/tasks/${task.callback_task_id}`, h('code', {}, task.callback_task_id))) : null,
        task.callback_of ? dt('Reports on', link(`/ui/tasks/${task.callback_of}`, h('code', {}, task.callback_of))) : null,
        task.publish_id ? dt('Published', 'to topic ', h('code', {}, task.topic), task.endpoint_name ? [', endpoint ', h('code', {}, task.endpoint_name)] : null,
          ' · ', link(`/ui/publishes/${task.publish_id}`, 'every delivery of the publish')) : null,
        dt('Created', fmtTime(task.created_at)),
        dt('Last error', task.last_error ? h('span', { class: 'err' }, task.last_error) : '—')),
      h('h3', {}, 'Headers'), table(['Name', 'Value'], Object.entries(task.headers || {}).map(([k, v]) => [h('code', {}, k), h('code', { class: 'wrap' }, v)]), 'Headers', 'No headers of its own.'),
      h('h3', {}, 'Body'), h('pre', { class: 'body', tabindex: 0 }, task.body || '(empty)')),
      h('section', { class: 'card' }, h('h2', {}, 'Attempts'), attemptList(id, task, attempts))),
    edit]);
  if (live) {
    state.timers.push(setInterval(async () => {
      if (document.hidden || location.pathname !== `/ui/tasks/${id}`) return;
      const t = await api('GET', `/v1/tasks/${id}`).catch(() => null);
      if (t && (t.status !== task.status || t.attempts !== task.attempts)) render();
    }, 2000));
  }
}

function dt(term, ...desc) {
  return [h('dt', {}, term), h('dd', {}, ...desc)];
}

function parseHeaders(text) {
  const out = {};
  for (const line of text.split('\n')) {
    if (!line.trim()) continue;
    const i = line.indexOf(':');
    if (i < 1) throw new APIError(422, { title: 'Invalid headers', detail: `“${line}” is not “Name: value”` });
    out[line.slice(0, i).trim()] = line.slice(i + 1).trim();
  }
  return out;
}

const outcomeText = { success: 'delivered', retry: 'failed, retried', fail: 'failed for good' };

// attemptList is the timeline of a task's attempts from their first page
// (the API's largest, 500): a task replayed many times can have more, which
// "Load more" reads a page at a time.
function attemptList(id, task, first) {
  const shown = [...first.data];
  let cursor = first.next_cursor;
  const box = h('div');
  const more = h('button', { type: 'button', onclick: async () => {
    more.disabled = true;
    try {
      const page = await api('GET', `/v1/tasks/${id}/attempts?cursor=${encodeURIComponent(cursor)}`);
      shown.push(...page.data);
      cursor = page.next_cursor;
    } finally {
      more.disabled = false;
    }
    draw();
  } }, 'Load more');
  const draw = () => fill(box,
    cursor ? h('p', { class: 'muted more-attempts' },
      `The first ${fmtNum(shown.length)} of ${fmtNum(Math.max(task.attempts, shown.length))} attempts are shown, newest of them first. `, more) : null,
    attemptTimeline(shown));
  draw();
  return box;
}

function attemptTimeline(attempts) {
  if (attempts.length === 0) return h('p', { class: 'muted' }, 'No attempt yet.');
  return h('ol', { class: 'timeline' }, [...attempts].reverse().map((a) => h('li', { class: `o-${a.outcome}` },
    h('div', { class: 'row' }, h('strong', {}, `Attempt ${a.attempt}`), ' ', h('span', { class: `badge a-${a.outcome}` }, outcomeText[a.outcome] || a.outcome),
      a.status_code ? h('span', { class: 'code' }, `HTTP ${a.status_code}`) : null,
      h('span', { class: 'muted' }, `${fmtNum(a.duration_ms)} ms`), h('time', { datetime: a.started_at, class: 'muted' }, fmtTime(a.started_at))),
    a.error ? h('div', { class: 'err' }, a.error) : null,
    responseHeaders(a.response_headers),
    a.response_body ? h('pre', { class: 'snippet', tabindex: 0 }, a.response_body) : null)));
}

// responseHeaders shows the headers an attempt kept, folded: now and then
// they explain an answer (a request id to quote, a Retry-After), but open
// they would crowd the timeline.
function responseHeaders(headers) {
  const names = Object.keys(headers || {}).sort();
  if (names.length === 0) return null;
  return h('details', { class: 'headers' }, h('summary', {}, `Response headers (${names.length})`),
    h('pre', { class: 'snippet', tabindex: 0 }, names.map((n) => `${n}: ${headers[n]}`).join('\n')));
}

// ---------------------------------------------------------------------------
// Schedules

async function schedulesPage() {
  const show = pageShow();
  const slot = h('div');
  show(h('h1', {}, 'Schedules'), slot);
  const list = await api('GET', '/v1/schedules?limit=100');
  const nexts = await Promise.all(list.data.map((s) => api('GET', `/v1/schedules/${s.id}/next?count=3`).catch(() => null)));
  const errSlot = h('div');
  const act = (fn, msg) => run(errSlot, async () => { await fn(); toast(msg); render(); });
  slot.append(errSlot, table(['Schedule', 'When', 'URL', 'Next fire times', 'State', 'Actions'], list.data.map((s, i) => {
    const times = nexts[i] ? nexts[i].data : [];
    return [
      h('code', { title: s.id }, shortID(s.id)),
      h('span', {}, h('code', {}, s.cron), h('br'), h('span', { class: 'muted' }, s.timezone)),
      h('span', { class: 'url' }, h('span', { class: 'method' }, s.method), ' ', s.url),
      s.paused ? h('span', { class: 'muted' }, 'paused') : h('ul', { class: 'times' }, times.map((t) => h('li', {}, fmtZoned(t.utc, s.timezone)))),
      s.paused ? h('span', { class: 'badge s-canceled' }, 'paused') : h('span', { class: 'badge s-delivered' }, 'active'),
      h('div', { class: 'actions' },
        s.paused
          ? h('button', { type: 'button', 'aria-label': `Resume schedule ${shortID(s.id)}`, onclick: () => act(() => api('POST', `/v1/schedules/${s.id}/resume`), 'Schedule resumed') }, 'Resume')
          : h('button', { type: 'button', 'aria-label': `Pause schedule ${shortID(s.id)}`, onclick: () => act(() => api('POST', `/v1/schedules/${s.id}/pause`), 'Schedule paused') }, 'Pause'),
        confirmButton('Delete', 'Click again to delete', () => act(() => api('DELETE', `/v1/schedules/${s.id}`), 'Schedule deleted')),
        link(`/ui/tasks?schedule_id=${s.id}`, 'Tasks')),
    ];
  }), 'Schedules', 'No schedules yet. Create one with POST /v1/schedules.', [0, 2, 3]));
}

// ---------------------------------------------------------------------------
// Topics

// endpointLines spells a topic's endpoints for its textarea, one a line:
// the URL, or name=URL.
function endpointLines(endpoints) {
  return endpoints.map((e) => (e.name ? `${e.name}=${e.url}` : e.url)).join('\n');
}

// parseEndpoints reads endpointLines back. A URL's query may hold '=', but
// what comes before it then holds ':' or '/', which no endpoint name does.
function parseEndpoints(text) {
  return text.split('\n').map((l) => l.trim()).filter(Boolean).map((line) => {
    const i = line.indexOf('=');
    const name = i > 0 ? line.slice(0, i) : '';
    const url = i > 0 ? line.slice(i + 1) : line;
    return name && !/[:/?#]/.test(name) && /^https?:\/\//.test(url) ? { name, url } : { url: line };
  });
}

async function topicsPage(_, params) {
  const show = pageShow();
  const cursor = params.get('cursor') || '';
  const slot = h('div');
  const formSlot = h('div');
  const name = h('input', { type: 'text', name: 'name', required: true, spellcheck: 'false', placeholder: 'orders' });
  const description = h('input', { type: 'text', name: 'description', placeholder: 'Order events, for every service that follows them' });
  const endpoints = h('textarea', { rows: 4, spellcheck: 'false', name: 'endpoints', placeholder: 'billing=https://billing.example.com/hooks\nhttps://shipping.example.com/hooks' });
  const form = h('details', { class: 'edit card', id: 'topic-form' }, h('summary', {}, 'Create or replace a topic'),
    h('form', { onsubmit: (e) => {
      e.preventDefault();
      run(formSlot, async () => {
        const topic = name.value.trim();
        await api('PUT', `/v1/topics/${encodeURIComponent(topic)}`, { description: description.value, endpoints: parseEndpoints(endpoints.value) });
        toast(`Topic ${topic} saved`);
        render();
      });
    } }, field('Name', name, 'Letters, digits and . _ -; saving a name that exists replaces that topic whole.'),
    field('Description', description),
    field('Endpoints', endpoints, 'One URL a line, or name=URL to name it; at most 100. A publish makes one task per endpoint.'),
    h('button', { type: 'submit', class: 'primary' }, 'Save topic'), formSlot));
  show(h('div', { class: 'pagehead' }, h('h1', {}, 'Topics'),
    h('p', { class: 'muted' }, 'Named sets of endpoint URLs. A webhook published to a topic (POST /v1/tasks with "topic") becomes one task per endpoint, each delivered, retried and dead-lettered on its own.')),
  form, slot);
  const list = await api('GET', `/v1/topics${query({ limit: 50, cursor })}`);
  const errSlot = h('div');
  const edit = (t) => {
    name.value = t.name;
    description.value = t.description;
    endpoints.value = endpointLines(t.endpoints);
    form.open = true;
    endpoints.focus();
  };
  slot.append(errSlot, table(['Topic', 'Endpoints', 'Updated', 'Actions'], list.data.map((t) => [
    h('span', {}, h('strong', {}, t.name), t.description ? [h('br'), h('span', { class: 'muted' }, t.description)] : null),
    t.endpoints.length === 0 ? h('span', { class: 'muted' }, 'none: publishing is refused')
      : h('ul', { class: 'endpoints' }, t.endpoints.map((e) => h('li', {}, e.name ? [h('code', {}, e.name), ' '] : null, h('span', { class: 'url' }, e.url)))),
    timeCell(t.updated_at),
    h('div', { class: 'actions' },
      h('button', { type: 'button', 'aria-label': `Edit topic ${t.name}`, onclick: () => edit(t) }, 'Edit'),
      confirmButton('Delete', 'Click again to delete', () => run(errSlot, async () => {
        await api('DELETE', `/v1/topics/${encodeURIComponent(t.name)}`);
        toast(`Topic ${t.name} deleted`);
        render();
      })),
      link(`/ui/tasks${query({ topic: t.name })}`, 'Tasks')),
  ]), 'Topics', 'No topics yet. Create one above, or with PUT /v1/topics/{name}.', [2]),
  h('div', { class: 'pager' }, cursor ? link('/ui/topics', '← First page') : null,
    list.next_cursor ? link(`/ui/topics${query({ cursor: list.next_cursor })}`, 'Next page →') : null));
}

async function publishPage([id]) {
  const show = pageShow();
  if (!uuidRe.test(id)) throw new APIError(404, { title: 'Not found', detail: `no publish ${id}` });
  const p = await api('GET', `/v1/publishes/${id}`);
  const counts = taskStatuses.filter((s) => p.status_counts[s] > 0);
  const purged = p.task_count - p.tasks.length;
  show([
    h('div', { class: 'pagehead' }, h('p', {}, link('/ui/topics', '← Topics')), h('h1', {}, 'Publish ', h('code', {}, p.id)),
      h('p', { class: 'muted' }, `To topic ${p.topic}: ${p.task_count} task${p.task_count === 1 ? '' : 's'}, one per endpoint.`)),
    h('section', { class: 'card' }, h('h2', {}, 'Deliveries'), h('ul', { class: 'statuslist' },
      counts.map((s) => h('li', {}, statusBadge(s), h('span', { class: 'num' }, fmtNum(p.status_counts[s]))))),
    purged > 0 ? h('p', { class: 'muted' }, `${purged} finished task${purged === 1 ? '' : 's'} deleted by retention.`) : null,
    h('dl', { class: 'fields' }, dt('Created', fmtTime(p.created_at)), dt('Idempotency key', p.idempotency_key ? h('code', {}, p.idempotency_key) : '—'))),
    h('h2', {}, 'Tasks'),
    table(taskHeadings, taskRows(p.tasks), 'Tasks of the publish', 'Retention has deleted every task of this publish.', taskWideOnly),
    p.status_counts.dead > 0 ? h('p', {}, link(`/ui/tasks${query({ publish_id: p.id, status: 'dead' })}`, 'Its dead letters →')) : null,
  ]);
}

// ---------------------------------------------------------------------------
// Dead letters

async function deadLettersPage(_, params) {
  const show = pageShow();
  const conditions = filterFields(Object.fromEntries(['url', 'schedule_id', 'created_after', 'created_before'].map((k) => [k, params.get(k) || ''])));
  const slot = h('div');
  const confirmSlot = h('div', { 'aria-live': 'polite' });
  const filter = conditions.read;
  const form = h('form', { class: 'filters', onsubmit: (e) => {
    e.preventDefault();
    run(slot, async () => {
      const chosen = filter();
      const [counted] = await Promise.all([api('POST', '/v1/tasks/replay', { ...chosen, dry_run: true }), listDead()]);
      if (counted.matched === 0) {
        fill(confirmSlot, h('p', { class: 'note' }, 'No dead task matches these conditions.'));
        return;
      }
      const go = h('button', { type: 'button', class: 'primary', onclick: () => run(slot, async () => {
        go.disabled = true;
        const done = await api('POST', '/v1/tasks/replay', chosen);
        fill(confirmSlot, h('p', { class: 'note ok' }, `Replayed ${fmtNum(done.replayed)} task${done.replayed === 1 ? '' : 's'}.`));
        toast(`Replayed ${done.replayed}`);
        await listDead();
      }) }, `Replay ${fmtNum(counted.matched)} task${counted.matched === 1 ? '' : 's'}`);
      fill(confirmSlot, h('div', { class: 'confirm card' },
        h('p', {}, h('strong', {}, `${fmtNum(counted.matched)} dead task${counted.matched === 1 ? '' : 's'}`), ' match. Each is sent again now, with its id and attempt count.'),
        go, ' ', h('button', { type: 'button', onclick: () => fill(confirmSlot) }, 'Cancel')));
      go.focus();
    });
  } }, conditions.fields,
  h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary' }, 'Count dead tasks to replay')));
  const listSlot = h('div');
  const listDead = async () => {
    const list = await api('GET', `/v1/tasks${query({ status: 'dead', limit: 50, ...filter() })}`);
    fill(listSlot, h('h2', {}, 'Dead tasks'), table(taskHeadings, taskRows(list.data), 'Dead tasks', 'No dead tasks. Everything was delivered or is still being tried.', taskWideOnly),
      list.next_cursor ? h('p', { class: 'muted' }, 'Showing the 50 newest. ', link('/ui/tasks?status=dead', 'All dead tasks →')) : null);
  };
  show(h('h1', {}, 'Dead letters'), h('p', { class: 'muted' }, 'Tasks whose last attempt failed. Replay them once the receiver is fixed.'), form, confirmSlot, slot,
    moveAndReplay(filter, listDead), listSlot);
  await listDead();
}

// moveAndReplay is the Dead letters page's form that moves the dead tasks
// matching the page's conditions to another URL prefix, sets or removes
// headers, and replays them: a preview (a dry run) of the first changes and
// of the tasks refused first, then Apply.
function moveAndReplay(conditions, listDead) {
  const from = h('input', { type: 'text', placeholder: 'https://old.example.com/hooks/', spellcheck: 'false', autocomplete: 'off' });
  const to = h('input', { type: 'text', placeholder: 'https://new.example.com/hooks/', spellcheck: 'false', autocomplete: 'off' });
  const set = h('textarea', { rows: 2, spellcheck: 'false', placeholder: 'Authorization: Bearer …' });
  const remove = h('input', { type: 'text', placeholder: 'X-Old-Token, X-Legacy', spellcheck: 'false', autocomplete: 'off' });
  const slot = h('div');
  const preview = h('div', { 'aria-live': 'polite' });
  const edit = () => {
    const e = {};
    if (from.value.trim() || to.value.trim()) e.url_prefix = { from: from.value.trim(), to: to.value.trim() };
    const setHeaders = parseHeaders(set.value);
    const removeHeaders = remove.value.split(',').map((n) => n.trim()).filter(Boolean);
    if (Object.keys(setHeaders).length || removeHeaders.length) {
      e.headers = {};
      if (Object.keys(setHeaders).length) e.headers.set = setHeaders;
      if (removeHeaders.length) e.headers.remove = removeHeaders;
    }
    return e;
  };
  const plural = (n, one) => `${fmtNum(n)} ${one}${n === 1 ? '' : 's'}`;
  const form = h('form', { onsubmit: (e) => {
    e.preventDefault();
    fill(preview);
    run(slot, async () => {
      const chosen = { ...conditions(), edit: edit() };
      const dry = await api('POST', '/v1/tasks/replay', { ...chosen, dry_run: true });
      if (dry.matched === 0) {
        fill(preview, h('p', { class: 'note' }, 'No dead task matches these conditions and this URL prefix.'));
        return;
      }
      // Absent when empty.
      const sample = dry.sample || [];
      const refusals = dry.refusals || [];
      const replayable = dry.matched - dry.refused;
      const apply = h('button', { type: 'button', class: 'primary', disabled: replayable === 0, onclick: () => run(slot, async () => {
        apply.disabled = true;
        const done = await api('POST', '/v1/tasks/replay', chosen);
        fill(preview, h('p', { class: 'note ok' }, `Moved and replayed ${plural(done.replayed, 'task')} (${fmtNum(done.changed)} changed)`,
          done.refused ? `; ${plural(done.refused, 'task')} refused, left dead.` : '.'));
        toast(`Replayed ${done.replayed}`);
        await listDead();
      }) }, `Apply to ${plural(replayable, 'task')}`);
      fill(preview, h('div', { class: 'confirm card' },
        h('p', {}, h('strong', {}, `${plural(dry.matched, 'dead task')}`), ' match: ',
          `${fmtNum(dry.changed)} would change`, replayable > dry.changed ? `, ${fmtNum(replayable - dry.changed)} replayed as they are` : '',
          dry.refused ? `, ${fmtNum(dry.refused)} refused` : '', '. Nothing has changed yet.'),
        sample.length ? [h('h3', {}, dry.changed > sample.length ? `The first ${sample.length} changes` : 'Changes'),
          h('ul', { class: 'changes', 'aria-label': 'Changes the edit would make' }, sample.map(changeItem))] : null,
        refusals.length ? [h('h3', {}, 'Refused: left dead and unchanged'),
          h('ul', { class: 'refusals' }, refusals.map((r) => h('li', {}, h('strong', {}, plural(r.count, 'task')), ': ', h('code', { class: 'wrap' }, r.reason),
            ' (', r.task_ids.map((id, i) => [i ? ', ' : '', link(`/ui/tasks/${id}`, h('code', {}, shortID(id)))]), ')')))] : null,
        h('div', { class: 'actions' }, apply, h('button', { type: 'button', onclick: () => fill(preview) }, 'Cancel'))));
      if (!apply.disabled) apply.focus();
    });
  } },
  h('p', { class: 'muted' }, 'Moves the dead tasks matching the conditions above to another URL prefix, with headers set or removed, then replays them. Their bodies stay as they are.'),
  h('div', { class: 'movegrid' }, field('Move URLs starting with', from), field('To', to, 'The rest of each URL is kept.')),
  h('div', { class: 'movegrid' }, field('Set headers', set, 'One “Name: value” per line; the other headers stay.'),
    field('Remove headers', remove, 'Names, separated by commas.')),
  h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary' }, 'Preview changes')));
  return h('details', { class: 'edit card move' }, h('summary', {}, 'Move and replay'), form, slot, preview);
}

// changeItem is one change of a bulk edit's preview: the task, its URL
// before and after, the headers set and removed. A list rather than a
// table, so that long URLs wrap on a phone instead of hiding the headers.
function changeItem(c) {
  const headers = [
    ...Object.entries(c.headers_set).map(([k, v]) => h('code', { class: 'wrap' }, `+ ${k}: ${v}`)),
    ...c.headers_removed.map((k) => h('code', { class: 'wrap' }, `− ${k}`)),
  ];
  return h('li', {},
    h('a', { href: `/ui/tasks/${c.id}`, title: c.id, 'aria-label': `Task ${c.id}` }, h('code', {}, shortID(c.id))),
    c.url_before === c.url_after ? h('div', { class: 'urlchange' }, h('code', { class: 'wrap' }, c.url_before))
      : h('div', { class: 'urlchange' }, h('code', { class: 'wrap before' }, c.url_before), h('code', { class: 'wrap' }, `→ ${c.url_after}`)),
    h('div', { class: 'headerchange' }, headers.length ? headers : h('span', { class: 'muted' }, 'headers unchanged')));
}

// ---------------------------------------------------------------------------
// Targets

// stacked makes a table a card a row on a narrow screen, each cell under
// its column's name, rather than wider than the screen.
function stacked(el) {
  el.classList.add('stacked');
  return el;
}

async function targetsPage() {
  const show = pageShow();
  const [targets, limits, paused, settings] = await Promise.all([api('GET', '/v1/targets'), api('GET', '/v1/limits'),
    api('GET', '/v1/targets/paused'), api('GET', '/v1/settings')]);
  const perTarget = (limits.limits && limits.limits.targets) || {};
  const l = limits.limits || {};
  const pausedBy = new Map(paused.data.map((p) => [p.target, p]));
  const errSlot = h('div');
  const act = (fn, msg) => run(errSlot, async () => { await fn(); toast(msg); render(); });
  const pause = (target, reason) => act(() => api('POST', '/v1/targets/pause', reason ? { target, reason } : { target }), `Paused ${target}`);
  const resume = (target) => act(() => api('POST', '/v1/targets/resume', { target }), `Resumed ${target}: its waiting tasks go out at its pace`);
  const target = h('input', { type: 'url', name: 'target', required: true, spellcheck: 'false', placeholder: 'https://api.example.com:443' });
  const reason = h('input', { type: 'text', name: 'reason', maxlength: 500, placeholder: 'Database migration until 14:00' });
  const form = h('form', { class: 'card pauseform', onsubmit: (e) => { e.preventDefault(); pause(target.value.trim(), reason.value.trim()); } },
    h('h2', {}, 'Pause a target'),
    h('p', { class: 'muted' }, 'Its tasks wait, not sent and not counted as attempts, until you resume it; then they go out at the target\u2019s pace.'),
    h('div', { class: 'two' },
      field('Target', target, 'Scheme, host and port, without a path.'),
      field('Reason', reason, 'Optional, for whoever looks later.')),
    h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary' }, 'Pause')));
  show(h('h1', {}, 'Targets'), errSlot,
    h('section', { class: 'paused' }, h('h2', {}, 'Paused targets'),
      stacked(table(['Target', 'Paused', 'By', 'Why', 'Failing since', 'Last error', ''], paused.data.map((p) => [
        h('code', {}, p.target),
        timeCell(p.paused_at),
        p.paused_by === 'hookwheel' ? h('span', { class: 'badge s-dead', title: 'Every attempt failed for too long' }, 'hookwheel') : h('span', { class: 'badge s-canceled' }, 'you'),
        p.reason || h('span', { class: 'muted' }, '\u2014'),
        p.since ? timeCell(p.since) : h('span', { class: 'muted' }, '\u2014'),
        p.last_error ? h('span', { class: 'error' }, p.last_error) : h('span', { class: 'muted' }, '\u2014'),
        h('button', { type: 'button', class: 'small', 'aria-label': `Resume ${p.target}`, onclick: () => resume(p.target) }, 'Resume'),
      ]), 'Paused targets', 'No paused target: every target\u2019s tasks go out when due.'))),
    h('h2', {}, 'Recent targets'),
    h('p', { class: 'muted' }, 'The hosts your webhooks went to in the last ten minutes, as this node saw them. The circuit breaker of a target is shared by every tenant sending there.'),
    stacked(table(['Target', 'Breaker', 'In flight', 'Waiting', 'Attempts', 'Failures', 'Failure ratio', 'Limit', ''], targets.data.map((t) => {
      const tl = perTarget[t.target];
      return [h('code', {}, t.target), breakerBadge(t.state), fmtNum(t.in_flight), fmtNum(t.waiting), fmtNum(t.attempts), fmtNum(t.failures),
        t.attempts ? `${fmtNum((100 * t.failures) / t.attempts, 1)} %` : '—',
        tl ? [tl.rate ? `${fmtNum(tl.rate, 2)}/s` : '', tl.concurrency ? ` ≤ ${tl.concurrency} at once` : ''] : h('span', { class: 'muted' }, 'none'),
        pausedBy.has(t.target)
          ? h('button', { type: 'button', class: 'small', 'aria-label': `Resume ${t.target}`, onclick: () => resume(t.target) }, 'Resume')
          : h('button', { type: 'button', class: 'small', 'aria-label': `Pause ${t.target}`, onclick: () => pause(t.target, '') }, 'Pause')];
    }), 'Targets', 'No webhook was sent in the last ten minutes.', [2, 3, 4, 7])),
    form,
    operationsCard(settings),
    h('section', { class: 'card' }, h('h2', {}, 'Your limits'), h('dl', { class: 'fields' },
      dt('Waiting tasks', `${fmtNum(limits.pending_tasks)}${l.max_pending_tasks ? ` of at most ${fmtNum(l.max_pending_tasks)}` : ''}`),
      dt('Dispatch rate', l.dispatch_rate ? `${fmtNum(l.dispatch_rate, 2)}/s` : 'unlimited'),
      dt('Dispatch concurrency', l.dispatch_concurrency ? fmtNum(l.dispatch_concurrency) : 'unlimited'),
      dt('API rate', l.api_rate ? `${fmtNum(l.api_rate, 2)}/s, burst ${fmtNum(l.api_burst)}` : 'unlimited'),
      dt('Schedules', l.max_schedules ? `at most ${fmtNum(l.max_schedules)}` : 'unlimited'),
      dt('Longest timeout', l.max_timeout || 'the server’s'))));
}

// operationsCard shows where hookwheel tells the tenant of the targets it
// paused and that recovered, and sets or clears it (PATCH /v1/settings).
function operationsCard(settings) {
  const current = settings.operations_url;
  const slot = h('div');
  const save = (value) => run(slot, async () => {
    await api('PATCH', '/v1/settings', { operations_url: value });
    toast(value ? 'Operations events go to the new URL' : 'Operations events are no longer sent');
    render();
  });
  const url = h('input', { type: 'url', name: 'operations_url', required: true, spellcheck: 'false',
    placeholder: 'https://ops.example.com/hookwheel', value: current || '' });
  return h('form', { class: 'card opsform', 'aria-labelledby': 'ops-events',
    onsubmit: (e) => { e.preventDefault(); save(url.value.trim()); } },
  h('h2', { id: 'ops-events' }, 'Operations events'),
  h('p', { class: 'muted' }, 'When every attempt to a target fails for too long, hookwheel pauses it and sends a signed ',
    h('code', {}, 'target.paused'), ' event here, as one of your tasks; ', h('code', {}, 'target.recovered'),
    ' when it delivers again after you resume it.'),
  h('dl', { class: 'fields' }, dt('Sent to', current ? h('code', {}, current) : h('span', { class: 'muted' }, 'nowhere: no URL is set'))),
  slot,
  field('Operations URL', url, 'An http or https URL, checked as a task’s URL is. Changing it needs a key that manages signing secrets.'),
  h('div', { class: 'actions' },
    h('button', { type: 'submit', class: 'primary' }, current ? 'Change' : 'Set'),
    current ? h('button', { type: 'button', onclick: () => save(null) }, 'Clear') : null));
}

// ---------------------------------------------------------------------------
// Usage

// A month is {y, m}, m from 1; ?month= writes it YYYY-MM.
function parseMonth(text) {
  const m = /^(\d{4})-(0[1-9]|1[0-2])$/.exec(text || '');
  return m ? { y: Number(m[1]), m: Number(m[2]) } : null;
}

function monthKey({ y, m }) { return `${y}-${String(m).padStart(2, '0')}`; }

function addMonths({ y, m }, n) {
  const d = new Date(Date.UTC(y, m - 1 + n, 1));
  return { y: d.getUTCFullYear(), m: d.getUTCMonth() + 1 };
}

function monthName({ y, m }) {
  return new Date(Date.UTC(y, m - 1, 1)).toLocaleDateString(undefined, { month: 'long', year: 'numeric', timeZone: 'UTC' });
}

// usageKeepDays is how long the API keeps usage: a month older has none.
const usageKeepDays = 400;

async function usagePage(_, params) {
  const show = pageShow();
  const asked = params.get('month');
  show(h('div', { class: 'pagehead' }, h('h1', {}, 'Usage'),
    h('p', { class: 'muted' }, 'What this account used, per UTC day, and its plan\u2019s daily limits.')));
  if (asked && !parseMonth(asked)) throw new APIError(400, { title: 'Not a month', detail: `\u201c${asked}\u201d is not a month written YYYY-MM, such as 2026-11.` });
  // Without a range the API answers the server's current month up to its
  // today (UTC): which month is the current one, and today's use, are its.
  const current = await api('GET', '/v1/usage');
  const thisMonth = parseMonth(current.from.slice(0, 7));
  const month = parseMonth(asked) || thisMonth;
  const ahead = monthKey(month).localeCompare(monthKey(thisMonth));
  const next = addMonths(month, 1);
  const lastDay = new Date(Date.UTC(next.y, next.m - 1, 0)).toISOString().slice(0, 10);
  const usage = ahead === 0 ? current
    : ahead < 0 ? await api('GET', `/v1/usage${query({ from: `${monthKey(month)}-01`, to: lastDay })}`) : null;
  const view = usageMonth(month, usage, current.limits);
  show(usageToday(current), usageMonthNav(month, thisMonth, current.to), view.nodes);
  view.draw();
}

// usageToday is today's use against each daily limit of the plan.
function usageToday(current) {
  const today = current.days[current.days.length - 1];
  return h('section', { class: 'card today' },
    h('h2', {}, 'Today', h('span', { class: 'muted' }, ` \u00b7 ${fmtDay(today.date, true)} (UTC)`)),
    h('p', { class: 'plan' }, 'Plan: ', current.plan ? h('strong', {}, current.plan) : h('span', { class: 'muted' }, 'none')),
    h('div', { class: 'meters' },
      meter('Tasks created', today.tasks_created, current.limits.tasks_per_day, 'tasks',
        'Past the limit, creates are refused (429) until midnight UTC.'),
      meter('Deliveries', today.deliveries, current.limits.deliveries_per_day, 'deliveries',
        'Past the limit, due tasks wait for midnight UTC.')));
}

// meter shows used of a daily limit (null: none) in words and as a bar.
function meter(label, used, limit, unit, past) {
  const id = `m${++uid}`;
  const words = limit ? `${fmtNum(used)} of ${fmtNum(limit)} ${unit} today` : `${fmtNum(used)} ${unit} today`;
  if (!limit) {
    return h('div', { class: 'meter' }, h('div', { class: 'label' }, label),
      h('div', { class: 'words' }, h('strong', {}, words)), h('div', { class: 'muted' }, 'No daily limit.'));
  }
  const share = used / limit;
  const bar = h('span');
  bar.style.width = `${Math.min(100, share * 100)}%`;
  return h('div', { class: `meter ${share >= 1 ? 'full' : share >= 0.8 ? 'high' : ''}` },
    h('div', { class: 'label', id }, label),
    h('div', { class: 'words' }, h('strong', {}, words), h('span', { class: 'muted' }, ` \u00b7 ${fmtNum(share * 100, share < 0.1 && share > 0 ? 1 : 0)} %`)),
    h('div', { class: 'bar', role: 'meter', 'aria-labelledby': id, 'aria-valuemin': 0, 'aria-valuemax': limit,
      'aria-valuenow': Math.min(used, limit), 'aria-valuetext': words }, bar),
    h('div', { class: 'muted' }, share >= 1 ? past : `${fmtNum(Math.max(0, limit - used))} left today.`));
}

// usageMonthNav leads to the month before and after (not past the current
// one, nor back past what the API keeps), and to any month by its picker.
function usageMonthNav(month, thisMonth, today) {
  const prev = addMonths(month, -1);
  const next = addMonths(month, 1);
  const oldest = new Date(Date.parse(`${today}T00:00:00Z`) - usageKeepDays * 86400000);
  const oldestMonth = { y: oldest.getUTCFullYear(), m: oldest.getUTCMonth() + 1 };
  const url = (m) => `/ui/usage${query({ month: monthKey(m) === monthKey(thisMonth) ? '' : monthKey(m) })}`;
  const picker = h('input', { type: 'month', name: 'month', value: monthKey(month), min: monthKey(oldestMonth), max: monthKey(thisMonth),
    required: true, pattern: '[0-9]{4}-[0-9]{2}', placeholder: 'YYYY-MM' });
  return h('nav', { class: 'monthnav', 'aria-label': 'Months' },
    monthKey(prev) >= monthKey(oldestMonth) ? link(url(prev), `\u2190 ${monthName(prev)}`) : h('span'),
    h('h2', { 'aria-live': 'polite' }, monthName(month)),
    monthKey(next) <= monthKey(thisMonth) ? h('a', { class: 'next', href: url(next) }, `${monthName(next)} \u2192`) : h('span'),
    h('form', { class: 'inline', onsubmit: (e) => {
      e.preventDefault();
      const m = parseMonth(picker.value.trim());
      if (m) navigate(url(m));
    } }, field('Month', picker), h('button', { type: 'submit' }, 'Show')));
}

const usageKinds = [
  ['tasks_created', 'Tasks created'], ['deliveries', 'Deliveries'], ['attempts', 'Attempts'],
  ['failed_attempts', 'Failed attempts'], ['bytes_sent', 'Sent'], ['bytes_received', 'Received'],
];

// usageMonth is a month's totals, its charts and its table of days (usage
// null: a month not begun); draw draws the charts once they are shown.
function usageMonth(month, usage, limits) {
  const name = monthName(month);
  if (!usage) return { nodes: [h('p', { class: 'muted empty' }, `${name} has not begun.`)], draw: () => {} };
  const t = usage.totals;
  if (usageKinds.every(([k]) => t[k] === 0)) {
    return { nodes: [h('p', { class: 'muted empty' }, `No usage in ${name}: no task was created and no webhook was sent.`)], draw: () => {} };
  }
  const days = usage.days;
  const peak = (k) => Math.max(...days.map((d) => d[k]));
  const ofAttempts = (n) => (t.attempts ? `${fmtNum((100 * n) / t.attempts, 1)} % of attempts` : 'no attempts');
  const busiest = (k, limit) => `busiest day ${fmtNum(peak(k))}${limit ? `; limit ${fmtNum(limit)} a day` : ''}`;
  const cards = h('div', { class: 'cards six' },
    stat('Tasks created', fmtNum(t.tasks_created), busiest('tasks_created', limits.tasks_per_day)),
    stat('Deliveries', fmtNum(t.deliveries), busiest('deliveries', limits.deliveries_per_day)),
    stat('Attempts', fmtNum(t.attempts), 'each try of a webhook'),
    stat('Failed attempts', fmtNum(t.failed_attempts), ofAttempts(t.failed_attempts)),
    stat('Sent', fmtBytes(t.bytes_sent), 'request bodies'),
    stat('Received', fmtBytes(t.bytes_received), 'answer bodies read'));
  const volume = chartBox(`Tasks created and deliveries per day, ${name}`, 'chart-usage');
  const tries = chartBox(`Attempts per day, ${name}`, 'chart-attempts');
  // The charts span the whole month, the days to come empty; a day without
  // use has no bar rather than a sliver.
  const first = Date.UTC(month.y, month.m - 1, 1) / 1000;
  const xs = Array.from({ length: new Date(Date.UTC(month.y, month.m, 0)).getUTCDate() }, (_, i) => first + i * 86400);
  const byDay = new Map(days.map((d) => [Date.parse(`${d.date}T00:00:00Z`) / 1000, d]));
  const bars = (k) => xs.map((x) => (byDay.has(x) && byDay.get(x)[k] ? byDay.get(x)[k] : null));
  // A limit is drawn where it does not flatten the month's bars to nothing;
  // one far above them is said instead.
  const limitLines = [];
  const farAbove = [];
  for (const [k, limit, label, color] of [['tasks_created', limits.tasks_per_day, 'tasks', chartColors.a], ['deliveries', limits.deliveries_per_day, 'deliveries', chartColors.b]]) {
    if (!limit) continue;
    if (limit <= 10 * Math.max(1, peak('tasks_created'), peak('deliveries'))) {
      limitLines.push({ label: `limit, ${fmtNum(limit)} ${label} a day`, values: xs.map(() => limit), color, dash: [6, 4] });
    } else farAbove.push(`${fmtNum(limit)} ${label}`);
  }
  if (farAbove.length) volume.append(h('p', { class: 'muted chartnote' }, `Daily limit${farAbove.length > 1 ? 's' : ''} far above: ${farAbove.join(', ')} a day.`));
  // The days used, newest first; the others are counted, not listed.
  const used = days.filter((d) => usageKinds.some(([k]) => d[k] > 0)).reverse();
  const rows = used.map((d) => [h('time', { datetime: d.date }, fmtDay(d.date, true)),
    ...usageKinds.map(([k]) => (k.startsWith('bytes') ? fmtBytes(d[k]) : fmtNum(d[k])))]);
  const idle = days.length - used.length;
  return {
    nodes: [cards, h('div', { class: 'charts two' }, volume, tries), h('h2', {}, 'Day by day'),
      table(['Day (UTC)', ...usageKinds.map(([, label]) => label)], rows, `Usage per day, ${name}, newest first`, undefined, [3, 5, 6], [1, 2, 3, 4, 5, 6]),
      idle ? h('p', { class: 'muted' }, `${idle === 1 ? 'One other day' : `${idle} other days`} of ${name}${days.length < xs.length ? ' so far' : ''} used nothing.`) : null],
    draw: () => {
      drawChart(volume, xs, [
        { label: 'tasks created', values: bars('tasks_created'), color: chartColors.a, bars: -1 },
        { label: 'deliveries', values: bars('deliveries'), color: chartColors.b, bars: 1 },
        ...limitLines], undefined, { days: true });
      drawChart(tries, xs, [
        { label: 'attempts', values: bars('attempts'), color: chartColors.b, bars: -1 },
        { label: 'failed attempts', values: bars('failed_attempts'), color: chartColors.c, bars: 1 }], undefined, { days: true });
    },
  };
}

// ---------------------------------------------------------------------------
// Keys and secrets

const scopes = ['*', 'tasks:read', 'tasks:write', 'schedules:read', 'schedules:write', 'topics:read', 'topics:write', 'flow-keys:read', 'flow-keys:write', 'keys:manage', 'secrets:manage', 'audit:read'];

// secretOnce shows a credential that the API shows only once.
function secretOnce(title, value, note) {
  return h('div', { class: 'once card', role: 'alert' }, h('h2', {}, title), copyField('Copy it now', value, { note }));
}

// copyField is a read-only field holding value, with a button copying it.
// what names the value on the button for a screen reader, where a page
// holds several; wrap shows all of a value too long for one line of a
// narrow card.
function copyField(label, value, { note, what, wrap, rows = 2 } = {}) {
  const input = wrap
    ? h('textarea', { readonly: true, rows, class: 'secret', spellcheck: 'false' }, value)
    : h('input', { type: 'text', readonly: true, value, class: 'secret', spellcheck: 'false' });
  return h('div', { class: 'copy' }, field(label, input, note),
    h('button', { type: 'button', 'aria-label': what ? `Copy the ${what}` : null, onclick: async () => {
      input.select();
      try { await navigator.clipboard.writeText(value); toast('Copied'); } catch { document.execCommand('copy'); }
    } }, 'Copy'));
}

async function keysPage() {
  const show = pageShow();
  const slot = h('div');
  const shown = h('div');
  const name = h('input', { type: 'text', required: true, maxlength: 100, placeholder: 'deploy bot' });
  const expires = h('input', { type: 'datetime-local', step: 1 });
  const boxes = scopes.map((s) => h('input', { type: 'checkbox', value: s, id: `scope-${s.replace(/[^a-z]/g, '-')}` }));
  const form = h('form', { class: 'card', onsubmit: (e) => {
    e.preventDefault();
    run(slot, async () => {
      const body = { name: name.value, scopes: boxes.filter((b) => b.checked).map((b) => b.value) };
      if (expires.value) body.expires_at = fromLocalInput(expires.value);
      const created = await api('POST', '/v1/keys', body);
      await draw();
      fill(shown, secretOnce(`Key “${created.name}” created`, created.api_key, 'This is the only time the key is shown.'));
      shown.querySelector('input').focus();
    });
  } }, h('h2', {}, 'Create a key'), field('Name', name),
  h('fieldset', {}, h('legend', {}, 'Scopes'), h('div', { class: 'checks' }, boxes.map((b) => h('label', { for: b.id }, b, ' ', b.value)))),
  field('Expires', expires, 'Optional. A key never outlives the key that creates it.'),
  h('button', { type: 'submit', class: 'primary' }, 'Create key'));
  const listSlot = h('div');
  const draw = async () => {
    const keys = await api('GET', '/v1/keys');
    fill(listSlot, table(['Key', 'Name', 'Scopes', 'Created', 'Expires', 'Last used', 'State', ''], keys.data.map((k) => [
      h('code', {}, k.id), k.name, k.scopes.join(', '), timeCell(k.created_at), timeCell(k.expires_at), timeCell(k.last_used_at),
      k.revoked_at ? h('span', { class: 'badge s-dead' }, 'revoked') : h('span', { class: 'badge s-delivered' }, 'active'),
      k.revoked_at || (state.session.key && k.id === state.session.key.id) ? (k.revoked_at ? '' : h('span', { class: 'muted' }, 'this session')) : confirmButton('Revoke', 'Click again to revoke', () => run(slot, async () => {
        await api('DELETE', `/v1/keys/${k.id}`);
        toast('Key revoked');
        await draw();
      })),
    ]), 'API keys', undefined, [2, 3, 4, 5]));
  };
  show(h('h1', {}, 'API keys'), shown, slot, listSlot, form);
  await draw();
}

// portalLinksPage makes, lists and revokes the links to read-only pages of
// one label's tasks (/portal/), for a tenant's own customers.
async function portalLinksPage(_, params) {
  const show = pageShow();
  const slot = h('div');
  const shown = h('div');
  const label = h('input', { type: 'text', name: 'label', required: true, maxlength: 320, placeholder: 'customer:42', value: params.get('label') || '', spellcheck: 'false' });
  const expires = h('select', { name: 'expires_in' }, [['1h', '1 hour'], ['24h', '1 day'], ['168h', '7 days'], ['720h', '30 days']].map(([v, t]) => h('option', { value: v }, t)));
  const name = h('input', { type: 'text', name: 'name', maxlength: 100, placeholder: 'Acme Corp' });
  const description = h('input', { type: 'text', name: 'description', maxlength: 500 });
  const form = h('form', { class: 'card linkform', onsubmit: (e) => {
    e.preventDefault();
    run(slot, async () => {
      const body = { label: label.value.trim(), expires_in: expires.value };
      if (name.value.trim()) body.name = name.value.trim();
      if (description.value.trim()) body.description = description.value.trim();
      const created = await api('POST', '/v1/portal-links', body);
      await draw();
      fill(shown, h('div', { class: 'once card', role: 'alert' }, h('h2', {}, `Link to ${created.label} created`),
        copyField('Portal link', created.url, { note: 'Shown only now. Whoever holds it sees this label’s tasks until it expires or is revoked.', wrap: true, rows: 4, what: 'portal link' }),
        h('p', {}, h('a', { href: created.url, target: '_blank', rel: 'noopener noreferrer' }, 'Open the page'))));
      shown.querySelector('textarea').focus();
    });
  } }, h('h2', {}, 'Create a link'),
  field('Label', label, 'key:value, as tasks carry it. The page shows the tasks with this label and their attempts, nothing else.'),
  field('Expires in', expires), field('Name', name, 'Optional: the page’s heading.'), field('Description', description, 'Optional: a line under the heading.'),
  h('button', { type: 'submit', class: 'primary' }, 'Create link'));
  const listSlot = h('div');
  const draw = async () => {
    const links = await api('GET', '/v1/portal-links?limit=500');
    fill(listSlot, h('h2', {}, 'Live links'), h('div', { class: 'stacked' }, table(['Label', 'Name', 'Created', 'Expires', 'Created by', ''], links.data.map((l) => [
      h('code', {}, l.label), l.name || h('span', { class: 'muted' }, '—'), timeCell(l.created_at), timeCell(l.expires_at), h('code', {}, l.created_by),
      confirmButton('Revoke', 'Click again to revoke', () => run(slot, async () => {
        await api('DELETE', `/v1/portal-links/${l.id}`);
        toast('Link revoked');
        await draw();
      })),
    ]), 'Live portal links', 'No live link.', [2, 4])),
    links.next_cursor ? h('p', { class: 'muted' }, 'The 500 newest links are shown.') : null);
  };
  show(h('h1', {}, 'Portal links'),
    h('p', { class: 'note' }, 'A portal link opens a read-only page of one label’s webhooks and their attempts, for your own customer: send it, or show it in a frame of your application. It carries no headers, keys or other labels’ tasks.'),
    shown, slot, listSlot, form);
  await draw();
}

async function secretsPage() {
  const show = pageShow();
  const slot = h('div');
  const shown = h('div');
  const grace = h('input', { type: 'text', value: '24h', required: true, pattern: '[0-9hms.]+' });
  const algorithm = h('select', { name: 'algorithm' }, [
    ['', 'The current secret’s'], ['hmac-sha256', 'HMAC-SHA256: a shared secret (v1)'], ['ed25519', 'Ed25519: a key pair (v1a)'],
  ].map(([v, t]) => h('option', { value: v }, t)));
  const listSlot = h('div');
  const draw = async () => {
    const list = await api('GET', '/v1/signing-secrets');
    // Stacked on a phone: a public key is too long for a column there.
    fill(listSlot, h('div', { class: 'stacked' }, table(['Secret', 'Algorithm', 'Public key', 'Created', 'Signs until', ''], list.data.map((s) => [
      h('code', {}, s.id), s.algorithm,
      s.public_key ? h('code', { class: 'pubkey' }, s.public_key) : h('span', { class: 'muted' }, 'none: a shared secret'),
      timeCell(s.created_at), s.expires_at ? timeCell(s.expires_at) : 'replaced by a rotation',
      s.current ? h('span', { class: 'badge s-delivered' }, 'current') : h('span', { class: 'badge s-retrying' }, 'in grace'),
    ]), 'Signing secrets')));
  };
  const form = h('form', { class: 'card', onsubmit: (e) => {
    e.preventDefault();
    run(slot, async () => {
      const body = { grace: grace.value.trim() };
      if (algorithm.value) body.algorithm = algorithm.value;
      const rotated = await api('POST', '/v1/signing-secrets/rotate', body);
      await draw();
      const until = `Until ${fmtTime(rotated.grace_ends_at)} webhooks carry signatures by both the new and the old secrets.`;
      if (rotated.public_key) {
        fill(shown, h('div', { class: 'once card', role: 'alert' }, h('h2', {}, 'New Ed25519 key pair'),
          copyField('Public key', rotated.public_key, { note: `Receivers verify its v1a signatures with it. It is not a secret, and stays listed below; the private key never leaves the server. ${until}`, what: 'public key', wrap: true })));
        shown.querySelector('textarea').focus();
      } else {
        fill(shown, secretOnce('New signing secret', rotated.signing_secret, `Shown once. ${until}`));
        shown.querySelector('input').focus();
      }
    });
  } }, h('h2', {}, 'Rotate the signing secret'),
  field('Algorithm', algorithm, 'Ed25519: receivers verify with a public key, which cannot sign a webhook. HMAC: the Standard Webhooks default, a secret both sides hold.'),
  field('Grace period', grace, 'How long the old secret keeps signing too, e.g. 24h (at most 168h; 0s for none).'),
  h('button', { type: 'submit', class: 'primary' }, 'Rotate'));
  show(h('h1', {}, 'Signing secrets'), h('p', { class: 'muted' }, 'Webhooks are signed with every secret listed here. A shared secret is shown once, when it is made; an Ed25519 key’s public key whenever you need it, its private key never.'), shown, slot, listSlot, form);
  await draw();
}

// ---------------------------------------------------------------------------
// Operator pages

async function tenantsPage(_, params) {
  const show = pageShow();
  const cursor = params.get('cursor') || '';
  const slot = h('div');
  show(h('div', { class: 'pagehead' }, h('h1', {}, 'Tenants'),
    h('p', { class: 'muted' }, 'Every tenant with its plan, its status and what it used this month (UTC).')), slot);
  const [list, plans] = await Promise.all([
    api('GET', `/v1/admin/tenants${query({ cursor, limit: 100 })}`), api('GET', '/v1/admin/plans')]);
  const used = await monthUsage(list.data);
  const rows = list.data.map((t) => tenantRow(t, used.get(t.id), plans.data, slot));
  const tenants = table(['Tenant', 'Plan', 'Status', 'Tasks this month', 'Deliveries this month', 'Waiting', 'Limits', 'Created', 'Actions'],
    rows.map((r) => r.cells), 'Tenants', 'No tenants yet.', [7], [3, 4, 5]);
  tenants.classList.add('stacked');
  show(tenants,
  h('div', { class: 'pager' }, cursor ? link('/ui/admin/tenants', '\u2190 First page') : null,
    list.next_cursor ? link(`/ui/admin/tenants${query({ cursor: list.next_cursor })}`, 'Next page \u2192') : null));
  // A tenant being deleted shows how far its deletion has gone, until the
  // API no longer knows it.
  let busy = false;
  state.timers.push(setInterval(async () => {
    const deleting = rows.filter((r) => r.t.status === 'deleting');
    if (busy || document.hidden || deleting.length === 0) return;
    busy = true;
    try {
      await Promise.all(deleting.map((r) => api('GET', `/v1/admin/tenants/${r.t.id}`).then((t) => r.update(t), (err) => {
        if (!(err instanceof APIError) || err.status !== 404) throw err;
        r.update({ ...r.t, status: 'deleted', deletion: undefined });
        toast(`Tenant ${r.t.name} deleted`);
      })));
    } catch (err) {
      fill(slot, problemBox(err));
    } finally {
      busy = false;
    }
  }, 1500));
}

// monthUsage sums each tenant's usage of this month (UTC), by tenant id:
// from one page of every tenant's rows when the month fits in it, else from
// each listed tenant's own rows, so that the calls stay bounded by the
// tenants listed however many there are.
async function monthUsage(tenants) {
  const sums = new Map();
  const add = (rows) => rows.forEach((r) => {
    const s = sums.get(r.tenant_id) || { tasks_created: 0, deliveries: 0 };
    s.tasks_created += r.tasks_created;
    s.deliveries += r.deliveries;
    sums.set(r.tenant_id, s);
  });
  const all = await api('GET', '/v1/admin/usage?limit=10000');
  if (!all.next_cursor) {
    add(all.data);
    return sums;
  }
  // A month is at most 31 rows a tenant; eight calls at a time.
  const queue = [...tenants];
  await Promise.all(Array.from({ length: 8 }, async () => {
    for (let t = queue.shift(); t; t = queue.shift()) add((await api('GET', `/v1/admin/usage${query({ tenant_id: t.id, limit: 100 })}`)).data);
  }));
  return sums;
}

const tenantBadge = (status) => h('span', { class: `badge t-${status}` }, status);

// tenantRow is a tenant's cells, which its actions redraw in place with the
// tenant the API answers.
function tenantRow(tenant, used, plans, slot) {
  const cells = { plan: h('div'), status: h('div'), limits: h('span'), actions: h('div', { class: 'actions nowrap' }) };
  const row = { t: tenant };
  // What applies: the tenant's own limits over its plan's, else the node's
  // defaults; those set, one a line, and its own retention.
  const limitsText = (t) => {
    const l = t.effective_limits || t.limits;
    const set = [
      l.tasks_per_day && `${fmtNum(l.tasks_per_day)} tasks a day`, l.deliveries_per_day && `${fmtNum(l.deliveries_per_day)} deliveries a day`,
      l.dispatch_rate && `${fmtNum(l.dispatch_rate, 2)}/s`, l.dispatch_concurrency && `${fmtNum(l.dispatch_concurrency)} at once`,
      l.max_pending_tasks && `${fmtNum(l.max_pending_tasks)} waiting`, t.retention && `kept ${t.retention}`].filter(Boolean);
    return set.length ? h('ul', { class: 'limits' }, set.map((x) => h('li', {}, x))) : h('span', { class: 'muted' }, 'unlimited');
  };
  const act = (action) => run(slot, async () => row.update(await action()));
  row.update = (t) => {
    row.t = { ...t, waiting_tasks: row.t.waiting_tasks };
    const gone = t.status === 'deleting' || t.status === 'deleted';
    fill(cells.plan, t.plan ? h('strong', { class: 'planname' }, t.plan) : h('span', { class: 'planname muted' }, 'none'),
      plans.length && !gone ? [' ', h('button', { type: 'button', class: 'small', 'aria-label': `Change the plan of ${t.name}`,
        onclick: () => planForm(t, plans, cells.plan, act, () => row.update(row.t)) }, 'Change')] : null);
    fill(cells.status, tenantBadge(t.status), t.deletion ? h('div', { class: 'muted deletion' }, deletionText(t.deletion))
      : t.status === 'deleted' ? h('div', { class: 'muted' }, 'Its data is deleted; its usage and audit log stay.') : null);
    fill(cells.limits, limitsText(t));
    fill(cells.actions, gone ? h('span', { class: 'muted' }, '\u2014') : [
      t.status === 'suspended'
        ? h('button', { type: 'button', class: 'small', 'aria-label': `Resume ${t.name}`, onclick: () => act(async () => {
          const resumed = await api('POST', `/v1/admin/tenants/${t.id}/resume`);
          toast(`${t.name} resumed`);
          return resumed;
        }) }, 'Resume')
        : confirmButton('Suspend', 'Click again to suspend', () => act(async () => {
          const suspended = await api('POST', `/v1/admin/tenants/${t.id}/suspend`);
          toast(`${t.name} suspended: its calls are refused`);
          return suspended;
        }), 'small'),
      h('button', { type: 'button', class: 'danger small', 'aria-label': `Delete ${t.name}`, onclick: (e) => deleteTenantDialog(t, e.currentTarget, row.update) }, 'Delete\u2026')]);
  };
  row.update(tenant);
  row.cells = [
    h('span', {}, h('strong', {}, tenant.name), h('br'), h('code', { class: 'muted id' }, tenant.id)),
    cells.plan, cells.status, fmtNum(used ? used.tasks_created : 0), fmtNum(used ? used.deliveries : 0),
    fmtNum(tenant.waiting_tasks), cells.limits, timeCell(tenant.created_at), cells.actions];
  return row;
}

// deletionText says how far a tenant's deletion has gone: when it was
// asked, and the rows of each kind deleted so far.
function deletionText(d) {
  const kinds = Object.entries(d.deleted || {}).filter(([, n]) => n > 0);
  return ['Asked ', h('time', { datetime: d.requested_at, title: fmtTime(d.requested_at) }, relTime(d.requested_at)), '; ',
    kinds.length ? `deleted so far: ${kinds.map(([k, n]) => `${fmtNum(n)} ${k.replace(/_/g, ' ')}`).join(', ')}.` : 'nothing deleted yet.'];
}

// planForm puts a tenant's plan to choose in cell; save is act, given the
// change, and cancel draws the cell as it was.
function planForm(t, plans, cell, act, cancel) {
  const select = h('select', { 'aria-label': `Plan of ${t.name}` }, h('option', { value: '' }, 'none'),
    plans.map((p) => h('option', { value: p.name, selected: p.name === t.plan }, p.name)));
  fill(cell, h('form', { class: 'planform', onsubmit: (e) => {
    e.preventDefault();
    act(async () => {
      const changed = await api('PATCH', `/v1/admin/tenants/${t.id}`, { plan: select.value || null });
      toast(`${t.name} is on ${changed.plan ? `plan ${changed.plan}` : 'no plan'}`);
      return changed;
    });
  } }, select, h('button', { type: 'submit', class: 'small primary' }, 'Save'), h('button', { type: 'button', class: 'small', onclick: cancel }, 'Cancel')));
  select.focus();
}

// deleteTenantDialog asks for the tenant's name before deleting it: there
// is no undo, and a name typed is a choice no stray click makes. deleted is
// given the tenant as the deletion's answer shows it.
function deleteTenantDialog(t, opener, deleted) {
  const name = h('input', { type: 'text', autocomplete: 'off', spellcheck: 'false', required: true });
  const go = h('button', { type: 'submit', class: 'danger', disabled: true }, 'Delete this tenant');
  const slot = h('div');
  name.addEventListener('input', () => { go.disabled = name.value !== t.name; });
  const dialog = h('dialog', { class: 'dialog', 'aria-labelledby': 'delete-title' },
    h('form', { onsubmit: (e) => {
      e.preventDefault();
      if (name.value !== t.name) return;
      run(slot, async () => {
        go.disabled = true;
        try {
          deleted(await api('DELETE', `/v1/admin/tenants/${t.id}`));
        } finally {
          go.disabled = false;
        }
        toast(`Deleting ${t.name}`);
        dialog.close();
      });
    } },
    h('h2', { id: 'delete-title' }, 'Delete tenant ', h('strong', {}, t.name), '?'),
    h('p', {}, 'Its API keys and sessions stop working at once, and its tasks are no longer sent. Then all of its data is deleted: tasks and attempts, schedules, topics, keys and secrets. Its usage records and audit log stay.'),
    h('p', {}, h('strong', {}, 'There is no undo.')),
    field(['Type ', h('code', {}, t.name), ' to confirm'], name, 'Its name exactly as shown.'),
    slot,
    h('div', { class: 'actions' }, go, h('button', { type: 'button', onclick: () => dialog.close() }, 'Cancel'))));
  dialog.addEventListener('close', () => { dialog.remove(); if (opener.isConnected) opener.focus(); });
  document.body.append(dialog);
  dialog.showModal();
  name.focus();
}

// ranges writes ascending partition numbers as runs: 0–15, 32, 40–47.
function ranges(ps) {
  const out = [];
  for (let i = 0; i < ps.length; i++) {
    let j = i;
    while (j + 1 < ps.length && ps[j + 1] === ps[j] + 1) j++;
    out.push(i === j ? `${ps[i]}` : `${ps[i]}–${ps[j]}`);
    i = j;
  }
  return out.join(', ');
}

async function nodesPage() {
  const show = pageShow();
  const slot = h('div');
  show(h('h1', {}, 'Nodes'), slot);
  await every(5000, async () => fill(slot, nodesView(await api('GET', '/v1/admin/nodes'))));
}

function nodesView(nodes) {
  const palette = ['#4f46e5', '#0ea5e9', '#16a34a', '#f59e0b', '#db2777', '#7c3aed', '#0d9488', '#ea580c', '#65a30d', '#2563eb'];
  const owner = new Array(nodes.partitions).fill(-1);
  nodes.data.forEach((n, i) => n.partitions.forEach((p) => { owner[p] = i; }));
  const grid = h('div', { class: 'pgrid', role: 'img', 'aria-label': `Partition ownership: ${nodes.unowned_partitions} of ${nodes.partitions} partitions unowned` },
    owner.map((o, p) => h('span', { class: o < 0 ? 'unowned' : `n${o % palette.length}`, title: `partition ${p}: ${o < 0 ? 'no owner' : nodes.data[o].name}` })));
  return [
    h('p', {}, `${nodes.data.length} live dispatcher node${nodes.data.length === 1 ? '' : 's'}; `,
      h('strong', { class: nodes.unowned_partitions ? 'err' : '' }, `${nodes.unowned_partitions} of ${nodes.partitions}`), ' partitions without an owner.'),
    table(['', 'Node', 'Started', 'Heartbeat', 'Expires', 'Partitions'], nodes.data.map((n, i) => [
      h('span', { class: `swatch n${i % palette.length}`, 'aria-hidden': 'true' }), h('span', {}, h('strong', {}, n.name), h('br'), h('code', { class: 'muted' }, n.id)),
      timeCell(n.started_at), timeCell(n.heartbeat_at), timeCell(n.expires_at), h('span', {}, `${n.partitions.length}: `, h('span', { class: 'muted' }, ranges(n.partitions))),
    ]), 'Nodes', 'No live dispatcher node.', [2, 4]),
    h('section', { class: 'card' }, h('h2', {}, 'Partition map'), h('p', { class: 'muted' }, 'Each square is a partition, coloured by the node holding its lease; grey ones have none. Refreshed every 5 seconds.'), grid)];
}

async function breakersPage() {
  const show = pageShow();
  const list = await api('GET', '/v1/admin/breakers');
  show(h('h1', {}, 'Circuit breakers'), h('p', { class: 'muted' }, `As node ${list.node} sees them.`),
    table(['Target', 'State', 'Tenants', 'In flight', 'Waiting', 'Requests', 'Failures', 'Consecutive', 'Opened', 'Next probe'], list.data.map((b) => [
      h('code', {}, b.target), breakerBadge(b.state), fmtNum(b.tenants), fmtNum(b.in_flight), fmtNum(b.waiting), fmtNum(b.requests), fmtNum(b.failures),
      fmtNum(b.consecutive_failures), timeCell(b.opened_at), timeCell(b.next_probe_at),
    ]), 'Circuit breakers', 'No targets in use on this node.'));
}

async function healthPage() {
  const show = pageShow();
  const r = await fetch('/readyz', { headers: { Accept: 'application/json' } });
  const body = await r.json();
  show(h('h1', {}, 'Health'),
    h('p', {}, 'This node is ', h('span', { class: `badge ${r.ok ? 's-delivered' : 's-dead'}` }, r.ok ? 'ready' : 'not ready'), '.'),
    table(['Dependency', 'State'], Object.entries(body.checks || {}).map(([k, v]) => [h('strong', {}, k),
      v === 'ok' ? h('span', { class: 'badge s-delivered' }, 'ok') : h('span', { class: k === 'encryption' && v.startsWith('on') ? '' : 'err' }, v)]), 'Dependencies'));
}

// ---------------------------------------------------------------------------
// Start: learn who is signed in, then draw the page asked for.

async function start() {
  try {
    state.session = await api('GET', '/v1/session');
  } catch {
    state.session = null;
  }
  if (state.session && location.pathname === '/ui/sign-in') history.replaceState(null, '', home());
  await render();
}

// A session lasts an hour from its last renewal: renew it while a page is
// open and looked at, so that a person is signed out only by leaving.
setInterval(async () => {
  if (!state.session || document.hidden) return;
  try {
    state.session = await api('GET', '/v1/session');
  } catch {
    // An ended session sends the page to sign-in from api().
  }
}, 10 * 60 * 1000);

// uPlot is loaded by a classic deferred script, which runs before modules.
start();
