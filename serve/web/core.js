/* core.js: what every part of the page shares: the page's state, the
 * API client, elements, times and money, and what each park reason
 * means. Text from the store is only ever set as textContent, never
 * parsed as HTML. */

export const $ = (id) => document.getElementById(id);

/* The page's state, one object so that every module sees the same. */
export const S = {
  token: '',
  me: null,          /* GET /v1/me: who this token is */
  tab: 'park',
  selected: null,    /* {kind: 'park' | 'job', id} */
  pending: null,     /* the write waiting for Confirm */
  item: null,        /* the park item shown */
  job: null,         /* the job shown */
  posting: false,    /* a write is on its way */
  tierNames: [],
  shown: {},         /* what each part shows now, as JSON text */
  onUnauthorized: null,
};

/* Whether part must be drawn again: its data changed. Redrawing only
 * then keeps focus, a selection being copied, and screen readers' place
 * across polls. */
export function changed(part, data) {
  const text = JSON.stringify(data);
  if (S.shown[part] === text) return false;
  S.shown[part] = text;
  return true;
}

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

export async function api(method, path, body) {
  const headers = {}, used = S.token;
  if (S.token) headers.Authorization = 'Bearer ' + S.token;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  let r;
  try {
    r = await fetch(path, {
      method, headers, cache: 'no-store', credentials: 'omit',
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (e) {
    throw new ApiError(0, 'unreachable',
                       'the server cannot be reached (' + e.message + ')');
  }
  let data = null;
  try { data = await r.json(); } catch (e) { data = null; }
  if (r.status === 401) {
    /* an answer to a token since replaced says nothing of the new one */
    if (used === S.token && S.onUnauthorized)
      S.onUnauthorized(used ? 'The server refused that token.' : '');
    throw new ApiError(401, 'unauthorized', 'a token is needed');
  }
  if (!r.ok) {
    const err = data && data.error ? data.error : {};
    throw new ApiError(r.status, err.code || 'http_' + r.status,
                       err.message || 'HTTP ' + r.status);
  }
  return data;
}

/* el('td', {class: 'x'}, 'text', child...): an element; strings become
 * text nodes. */
export function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === 'class') e.className = v;
    else if (k.startsWith('data-') || k.startsWith('aria-') || k === 'role')
      e.setAttribute(k, v);
    else e[k] = v;
  }
  for (const k of kids)
    if (k !== null && k !== undefined)
      e.append(k instanceof Node ? k : String(k));
  return e;
}

/* ---- times: the browser's local time everywhere, as in the header -- */

const two = (n) => String(n).padStart(2, '0');

/* "2026-12-06 09:15:03" in local time (the header names the zone). */
export function local(d) {
  return d.getFullYear() + '-' + two(d.getMonth() + 1) + '-' +
    two(d.getDate()) + ' ' + two(d.getHours()) + ':' + two(d.getMinutes()) +
    ':' + two(d.getSeconds());
}

export function when(iso) {
  return iso ? local(new Date(iso)) : '';
}

/* The zone the page shows times in, as "UTC+01:00". */
export function zone() {
  const off = -new Date().getTimezoneOffset(), a = Math.abs(off);
  return 'UTC' + (off < 0 ? '-' : '+') + two(Math.floor(a / 60)) + ':' +
    two(a % 60);
}

/* How long ago: "40 s ago", "12 min ago", "5 h ago", "3 d ago". */
export function ago(iso, now) {
  if (!iso) return '';
  const s = Math.max(0, Math.round(((now || Date.now()) -
                                    Date.parse(iso)) / 1000));
  if (s < 60) return s + ' s ago';
  if (s < 3600) return Math.floor(s / 60) + ' min ago';
  if (s < 172800) return Math.floor(s / 3600) + ' h ago';
  return Math.floor(s / 86400) + ' d ago';
}

/* A <time> of iso in local time, its UTC form on hover. */
export function timeEl(iso, withAgo) {
  if (!iso) return '';
  return el('time', {dateTime: iso, title: iso},
            withAgo ? ago(iso) + ' (' + when(iso) + ')' : when(iso));
}

/* Dollars as the CLI writes them ("$0.00042", "~$0.1" for an estimate),
 * from cost_usd (null: not priced, ''). Whole nano-dollars, exact. */
export function money(usd, estimated) {
  if (usd === null || usd === undefined) return '';
  const n = Math.round(Math.abs(usd) * 1e9);
  const frac = String(n % 1e9).padStart(9, '0').replace(/0+$/, '');
  return (estimated ? '~' : '') + (usd < 0 ? '-' : '') + '$' +
    Math.floor(n / 1e9) + (frac ? '.' + frac : '');
}

export function table(head, rows, attrs) {
  return el('div', {class: 'scroll'}, el('table', attrs || {},
    el('thead', {}, el('tr', {}, ...head.map((h) => el('th', {}, h)))),
    el('tbody', {}, ...rows.map((r) =>
      el('tr', {}, ...r.map((c) => el('td', {}, c)))))));
}

export function facts(pairs) {
  const dl = el('dl');
  for (const [k, v] of pairs)
    if (v !== null && v !== undefined && v !== '')
      dl.append(el('dt', {}, k), el('dd', {}, v));
  return dl;
}

export function pretty(text) {
  try { return JSON.stringify(JSON.parse(text), null, 2); }
  catch (e) { return text; }
}

export function isViewer() {
  return !!(S.me && S.me.role === 'viewer');
}

/* ---- what each park reason means, in plain words ------------------- */

export const REASONS = {
  hard_quota: 'The endpoint said a limit was reached that does not reset ' +
    'soon: a daily or monthly cap, no credit left, or a key it refuses. ' +
    'The step has side effects and no idempotency key, so stepq neither ' +
    'switched it to another tier nor sent it again by itself. Retry once ' +
    'the limit has reset (Not before), Done if you did it by hand, or ' +
    'Skip or Fail.',
  refused: 'The endpoint refused the request (its content policy). The ' +
    'step has side effects, so stepq did not send it elsewhere by itself. ' +
    'Change the job and Retry, or Skip or Fail.',
  in_doubt: 'The request may have reached the endpoint, but no clear ' +
    'answer came back (a timeout, a lost connection, a 5xx, a worker ' +
    'that stopped mid-request). The step has side effects and no ' +
    'idempotency key, so sending it again may do it twice: post twice, ' +
    'charge twice. Check at the endpoint whether it happened: if it did, ' +
    'use Done with its result; if it did not, Retry.',
  budget: 'No tier the step may use fits its budgets before the job\'s ' +
    'deadline. Retry once a budget window has rolled over or a budget was ' +
    'raised in the config, or Skip or Fail.',
  approval: 'An agent wants to call a tool that needs a person\'s yes. ' +
    'Read the tool and its arguments: Approve runs the call, Reject tells ' +
    'the model no (with your note as the reason).',
  question: 'An agent asks a person a question (an ask tool). Answer with ' +
    'Done and your answer as the output; the agent goes on with it.',
};

export function reasonHelp(reason) {
  return REASONS[reason] || 'The step parked with this outcome and waits ' +
    'for a person: Retry, Skip, Done with an output, or Fail.';
}
