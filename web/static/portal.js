// The portal: a read-only page of one label's webhook deliveries, opened
// by a portal link (POST /v1/portal-links) and often embedded in a frame of
// the tenant's own application. The link's token arrives in the URL's
// fragment, which no browser sends to a server or in a Referer; it is moved
// at once into this tab's session storage and out of the address bar, and
// sent to /v1/portal/... as a bearer token. No build step: served as
// written (see web/README.md).

const main = document.getElementById('main');
const tokenKey = 'hookwheel.portal-token';
const tokenRe = /^#(hwpl_[a-z2-7]+_[a-z2-7]+)$/;
const uuidRe = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const statuses = ['scheduled', 'dispatching', 'retrying', 'delivered', 'dead', 'canceled'];
const outcomeText = { success: 'delivered', retry: 'failed, retried', fail: 'failed for good' };

// Kept in memory too: a frame whose storage the browser withholds still
// works until it is reloaded.
let token = null;

function takeToken() {
  const m = tokenRe.exec(location.hash);
  if (m) {
    token = m[1];
    try { sessionStorage.setItem(tokenKey, token); } catch { /* storage withheld: memory only */ }
    history.replaceState(null, '', location.pathname + location.search);
  }
  if (!token) {
    try { token = sessionStorage.getItem(tokenKey); } catch { token = null; }
  }
  return token;
}

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === false || v === null || v === undefined) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else el.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

function fmtTime(iso) {
  return iso ? new Date(iso).toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'medium' }) : '—';
}

function relTime(iso) {
  const s = (new Date(iso).getTime() - Date.now()) / 1000;
  const a = Math.abs(s);
  const rtf = new Intl.RelativeTimeFormat(undefined, { numeric: 'auto' });
  if (a < 60) return rtf.format(Math.round(s), 'second');
  if (a < 3600) return rtf.format(Math.round(s / 60), 'minute');
  if (a < 86400) return rtf.format(Math.round(s / 3600), 'hour');
  return rtf.format(Math.round(s / 86400), 'day');
}

function timeCell(iso) {
  return iso ? h('time', { datetime: iso, title: fmtTime(iso) }, relTime(iso)) : h('span', { class: 'muted' }, '—');
}

// show replaces the page's content, leaving out null and false children
// (replaceChildren would write them as text).
function show(...children) {
  main.replaceChildren(...children.filter((c) => c !== null && c !== undefined && c !== false));
}

const badge = (status) => h('span', { class: `badge s-${status}` }, status);

class PortalError extends Error {
  constructor(status, detail) {
    super(detail || `HTTP ${status}`);
    this.status = status;
  }
}

async function get(path) {
  const r = await fetch(path, { headers: { Accept: 'application/json', Authorization: `Bearer ${token}` }, credentials: 'omit' });
  const data = await r.json().catch(() => ({}));
  if (!r.ok) throw new PortalError(r.status, data.detail);
  return data;
}

function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v) q.set(k, v);
  const s = q.toString();
  return s ? `?${s}` : '';
}

function go(url) {
  history.pushState(null, '', url);
  window.scrollTo(0, 0);
  render();
}

document.addEventListener('click', (e) => {
  const a = e.target.closest('a');
  if (!a || e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
  const url = new URL(a.href, location.href);
  if (url.origin !== location.origin || !url.pathname.startsWith('/portal/')) return;
  e.preventDefault();
  go(url.pathname + url.search);
});
window.addEventListener('popstate', () => render());

function heading(link, ...rest) {
  return h('header', { class: 'portalhead' },
    h('p', { class: 'muted label' }, 'Webhook deliveries · ', h('code', {}, link.label)),
    ...rest,
    h('p', { class: 'muted expiry' }, 'This link works until ', h('time', { datetime: link.expires_at }, fmtTime(link.expires_at)), '.'));
}

async function listPage(params) {
  const status = params.get('status') || '';
  const cursor = params.get('cursor') || '';
  const list = await get(`/v1/portal/tasks${query({ status, cursor, limit: 25 })}`);
  const select = h('select', { id: 'status', name: 'status', onchange: () => go(`/portal/${query({ status: select.value })}`) },
    h('option', { value: '' }, 'any status'), statuses.map((s) => h('option', { value: s, selected: s === status }, s)));
  const rows = list.data.map((t) => h('tr', {},
    h('td', { 'data-label': 'Delivery' }, h('a', { href: `/portal/tasks/${t.id}`, 'aria-label': `Delivery ${t.id}` }, h('code', {}, `…${t.id.slice(-8)}`))),
    h('td', { 'data-label': 'Status' }, badge(t.status)),
    h('td', { 'data-label': 'Endpoint' }, h('span', { class: 'url', title: t.url }, h('span', { class: 'method' }, t.method), ' ', t.url)),
    h('td', { 'data-label': 'Created' }, timeCell(t.created_at)),
    h('td', { 'data-label': 'Attempts', class: 'n' }, `${t.attempts}/${t.max_attempts}`),
    h('td', { 'data-label': 'Last answer' }, t.last_status_code ? h('code', {}, `HTTP ${t.last_status_code}`) : (t.last_error ? h('span', { class: 'err' }, 'error') : '—'))));
  const table = rows.length === 0
    ? h('p', { class: 'muted empty' }, status ? `No ${status} delivery.` : 'No delivery yet.')
    : h('div', { class: 'tablewrap stacked' }, h('table', {}, h('caption', { class: 'sr' }, 'Deliveries'),
      h('thead', {}, h('tr', {}, ['Delivery', 'Status', 'Endpoint', 'Created', 'Attempts', 'Last answer'].map((c, i) => h('th', { scope: 'col', class: i === 4 ? 'n' : false }, c)))),
      h('tbody', {}, rows)));
  show(
    heading(list, h('h1', {}, list.name || 'Webhook deliveries'), list.description ? h('p', { class: 'desc' }, list.description) : null),
    h('form', { class: 'portalfilter', onsubmit: (e) => e.preventDefault() }, h('label', { for: 'status' }, 'Show'), select),
    table,
    h('div', { class: 'pager' }, cursor ? h('a', { href: `/portal/${query({ status })}` }, '← Newest') : h('span'),
      list.next_cursor ? h('a', { href: `/portal/${query({ status, cursor: list.next_cursor })}` }, 'Older →') : null));
}

async function taskPage(id) {
  if (!uuidRe.test(id)) throw new PortalError(404, `no delivery ${id}`);
  const t = await get(`/v1/portal/tasks/${id}`);
  const attempts = [...t.attempt_list].reverse();
  show(
    h('p', { class: 'back' }, h('a', { href: '/portal/' }, '← All deliveries')),
    h('h1', {}, 'Delivery ', h('code', { class: 'wrap' }, t.id)),
    h('p', { class: 'statusline' }, badge(t.status)),
    h('div', { class: 'two' },
      h('section', { class: 'card' }, h('h2', {}, 'Request'), h('dl', { class: 'fields' },
        h('dt', {}, 'Endpoint'), h('dd', {}, h('code', { class: 'wrap' }, `${t.method} ${t.url}`)),
        h('dt', {}, 'Due'), h('dd', {}, fmtTime(t.run_at)),
        h('dt', {}, 'Attempts'), h('dd', {}, `${t.attempts} of ${t.max_attempts}`),
        h('dt', {}, 'Next attempt'), h('dd', {}, t.next_attempt_at ? [fmtTime(t.next_attempt_at), ' (', relTime(t.next_attempt_at), ')'] : '—'),
        h('dt', {}, 'Created'), h('dd', {}, fmtTime(t.created_at))),
      h('h3', {}, 'Body'), h('pre', { class: 'body', tabindex: 0 }, t.body || '(empty)')),
      h('section', { class: 'card' }, h('h2', {}, 'Attempts'),
        t.more_attempts ? h('p', { class: 'muted' }, `The first ${attempts.length} of ${t.attempts} attempts are shown, newest of them first.`) : null,
        attempts.length === 0 ? h('p', { class: 'muted' }, 'No attempt yet.') : h('ol', { class: 'timeline' }, attempts.map((a) => h('li', { class: `o-${a.outcome}` },
          h('div', { class: 'row' }, h('strong', {}, `Attempt ${a.attempt}`), h('span', { class: `badge a-${a.outcome}` }, outcomeText[a.outcome] || a.outcome),
            a.status_code ? h('span', { class: 'code' }, `HTTP ${a.status_code}`) : null,
            h('span', { class: 'muted' }, `${a.duration_ms} ms`), h('time', { datetime: a.started_at, class: 'muted' }, fmtTime(a.started_at))),
          a.error ? h('div', { class: 'err' }, a.error) : null,
          a.response_body ? h('pre', { class: 'snippet', tabindex: 0 }, a.response_body) : null))))));
}

async function render() {
  if (!takeToken()) {
    show(h('h1', {}, 'This link is incomplete'), h('p', {}, 'Open the whole link you were given, or ask for a new one.'));
    return;
  }
  const path = location.pathname.replace(/\/+$/, '');
  const params = new URLSearchParams(location.search);
  const m = /^\/portal\/tasks\/([^/]+)$/.exec(path);
  try {
    if (m) await taskPage(m[1]);
    else if (path === '/portal') await listPage(params);
    else throw new PortalError(404, 'no page here');
  } catch (err) {
    if (!(err instanceof PortalError)) console.error(err);
    const title = err.status === 401 ? 'This link has expired' : err.status === 404 ? 'Not found' : 'Something went wrong';
    const detail = err.status === 401 ? 'It was revoked or its time is up. Ask for a new link.' : err.message;
    show(h('h1', {}, title), h('div', { class: 'problem', role: 'alert' }, detail),
      err.status === 404 ? h('p', {}, h('a', { href: '/portal/' }, '← All deliveries')) : null);
  }
  const h1 = main.querySelector('h1');
  document.title = h1 ? `${h1.textContent} · Webhook deliveries` : 'Webhook deliveries';
}

render();
