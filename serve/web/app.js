/* app.js: the web park view of `stepq serve`. It uses the JSON API like
 * any client: the token (when the server asks for one) goes in
 * Authorization from this tab's sessionStorage, never in a cookie, so a
 * page of another site cannot act with it; the server also refuses
 * writes whose Origin is not its own. Text from the store is only ever
 * set as textContent, never parsed as HTML. */
'use strict';

(function () {
  const POLL_MS = 3000;
  const STATES = ['queued', 'running', 'succeeded', 'failed', 'parked',
                  'cancelled'];
  const $ = (id) => document.getElementById(id);
  const store = window.sessionStorage;

  let token = store.getItem('stepq.token') || '';
  let tab = 'park';
  let selected = null;    /* {kind: 'park' | 'job', id} */
  let pending = null;     /* the resolution waiting for Confirm */
  let item = null;        /* the park item shown */
  let shownJob = null;    /* the job shown */
  let retryFor = null;    /* the job the retry form was last set up for */
  let tierNames = [];
  let timer = null;
  let jobsPage = [];
  let detailSeq = 0;      /* the latest detail asked for */
  let running = null;     /* the refresh under way, if any */
  let again = false;      /* another refresh was asked for meanwhile */
  let posting = false;    /* a resolution is on its way */
  let me = null;          /* GET /v1/me: who this token is */
  const shown = {};       /* what each part shows now, as JSON text */

  /* Whether part must be drawn again: its data changed. Redrawing only
   * then keeps focus, a selection being copied, and screen readers' place
   * across polls. */
  function changed(part, data) {
    const text = JSON.stringify(data);
    if (shown[part] === text) return false;
    shown[part] = text;
    return true;
  }

  class ApiError extends Error {
    constructor(status, code, message) {
      super(message);
      this.status = status;
      this.code = code;
    }
  }

  /* el('td', {class: 'x'}, 'text', child...): an element; strings become
   * text nodes. */
  function el(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === 'class') e.className = v;
      else if (k.startsWith('data-') || k.startsWith('aria-'))
        e.setAttribute(k, v);
      else e[k] = v;
    }
    for (const k of kids)
      if (k !== null && k !== undefined)
        e.append(k instanceof Node ? k : String(k));
    return e;
  }

  function when(iso) {
    return iso ? iso.replace('T', ' ').replace('Z', ' UTC') : '';
  }

  async function api(method, path, body) {
    const headers = {}, used = token;
    if (token) headers.Authorization = 'Bearer ' + token;
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
      if (used === token)
        askToken(used ? 'The server refused that token.' : '');
      throw new ApiError(401, 'unauthorized', 'a token is needed');
    }
    if (!r.ok) {
      const err = data && data.error ? data.error : {};
      throw new ApiError(r.status, err.code || 'http_' + r.status,
                         err.message || 'HTTP ' + r.status);
    }
    return data;
  }

  function askToken(why) {
    token = '';
    store.removeItem('stepq.token');
    me = null;
    applyMe();
    clearTimeout(timer);
    closeDetail();
    for (const id of ['strip', 'tiers', 'park-groups', 'report', 'audit'])
      $(id).replaceChildren();
    $('jobs-table').tBodies[0].replaceChildren();
    for (const k of Object.keys(shown)) delete shown[k];
    $('login-error').textContent = typeof why === 'string' ? why : '';
    $('login-error').hidden = !$('login-error').textContent;
    $('login').hidden = false;
    $('logout').hidden = true;
    $('token').focus();
  }

  function problem(text) {
    $('problem').hidden = !text;
    $('problem').textContent = text || '';
  }

  /* ---- status strip ------------------------------------------------ */

  function renderStatus(st) {
    const strip = $('strip');
    strip.replaceChildren();
    for (const s of STATES) {
      const n = st.jobs[s] || 0;
      strip.append(el('span', {class: 'chip state-' + s, 'data-state': s},
                      s + ' ', el('b', {}, n)));
    }
    strip.append(el('span', {class: 'chip' + (st.park_open ? ' warn' : ''),
                             'data-state': 'park_open'},
                    'park open ', el('b', {}, st.park_open)));
    $('park-count').textContent = '(' + st.park_open + ')';
  }

  function tierChip(t) {
    let cls = 'ok', what = 'open';
    if (t.breaker !== 'closed') {
      cls = 'bad';
      what = 'breaker ' + t.breaker.replace('_', '-') +
             (t.open_until ? ' until ' + when(t.open_until) : '');
    } else if (t.exhausted_until) {
      cls = 'bad';
      what = 'exhausted' + (t.exhausted_reason ? ' (' + t.exhausted_reason +
                            ')' : '') + ' until ' + when(t.exhausted_until);
    } else if (t.limited_until) {
      cls = 'warn';
      what = 'limited until ' + when(t.limited_until);
    } else if (t.in_doubt) {
      what = 'one at a time';
    }
    return el('span', {class: 'chip ' + cls, 'data-tier': t.name},
              el('b', {}, t.name), ' ' + what + ' · ' +
              (t.rate_rpm > 0 ? t.rate_rpm + ' rpm' : 'no rpm set') + ' · ' +
              t.in_flight + ' in flight');
  }

  function renderTiers(tiers) {
    const names = tiers.map((t) => t.name);
    $('tiers').replaceChildren(...tiers.map(tierChip));
    if (names.join('\n') === tierNames.join('\n')) return;
    tierNames = names;
    const sel = $('resolve-tier'), keep = sel.value;
    sel.replaceChildren(...tierNames.map((n) => el('option', {value: n}, n)));
    if (tierNames.includes(keep)) sel.value = keep;
  }

  /* ---- park list --------------------------------------------------- */

  function renderPark(items) {
    const groups = new Map();
    for (const it of items) {
      const key = it.reason + ' · ' + (it.tier ? 'tier ' + it.tier : 'no tier');
      if (!groups.has(key)) groups.set(key, []);
      groups.get(key).push(it);
    }
    const out = [];
    for (const key of [...groups.keys()].sort()) {
      const list = groups.get(key);
      out.push(el('div', {class: 'group', 'data-group': key},
                  el('h3', {}, key + ' (' + list.length + ')'),
                  el('ul', {class: 'items'}, ...list.map(parkRow))));
    }
    if (out.length === 0)
      out.push(el('p', {class: 'muted'}, 'Nothing is parked.'));
    $('park-groups').replaceChildren(...out);
  }

  function parkRow(it) {
    const current = selected && selected.kind === 'park' &&
                    selected.id === it.id;
    const state = it.state === 'open' ? '' : ' · ' + it.resolution +
                  ' by ' + it.resolved_by;
    const b = el('button', {type: 'button', 'data-park': it.id,
                            'aria-current': current ? 'true' : 'false'},
                 el('div', {class: 'line1'}, '#' + it.id + ' · job ' +
                    it.job_id + ' · ' + it.step + state),
                 el('div', {class: 'line2'}, (it.error || '') + ' · parked ' +
                    when(it.parked_at)));
    b.addEventListener('click', () => open('park', it.id));
    return el('li', {}, b);
  }

  /* ---- jobs list --------------------------------------------------- */

  function jobsPath() {
    const q = new URLSearchParams({limit: '50', state: $('jobs-state').value});
    const after = $('jobs-after').value.trim();
    if (/^[0-9]+$/.test(after)) q.set('after', after);
    return '/v1/jobs?' + q.toString();
  }

  function renderJobs(jobs) {
    jobsPage = jobs;
    const rows = jobs.map((j) => {
      const tr = el('tr', {class: 'pick', 'data-job': j.id},
                    el('td', {}, j.id), el('td', {}, j.name),
                    el('td', {class: 'mono'}, j.key || ''),
                    el('td', {class: 'state-' + j.state}, j.state),
                    el('td', {}, when(j.created_at)),
                    el('td', {}, when(j.updated_at)));
      tr.addEventListener('click', () => open('job', j.id));
      return tr;
    });
    $('jobs-table').tBodies[0].replaceChildren(...rows);
    $('jobs-empty').hidden = jobs.length > 0;
    $('jobs-next').disabled = jobs.length < 50;
  }

  /* ---- the morning report ------------------------------------------ */

  const REPORT_EVERY_MS = 30000;
  let reportAt = 0, reportSince = '';

  function table(head, rows) {
    return el('div', {class: 'scroll'}, el('table', {},
      el('thead', {}, el('tr', {}, ...head.map((h) => el('th', {}, h)))),
      el('tbody', {}, ...rows.map((r) =>
        el('tr', {}, ...r.map((c) => el('td', {}, c)))))));
  }

  /* Dollars as the CLI writes them ("$0.00042", "~$0.1" for an estimate),
   * from cost_usd (null: not priced, ''). Whole nano-dollars, exact. */
  function money(usd, estimated) {
    if (usd === null || usd === undefined) return '';
    const n = Math.round(Math.abs(usd) * 1e9);
    const frac = String(n % 1e9).padStart(9, '0').replace(/0+$/, '');
    return (estimated ? '~' : '') + (usd < 0 ? '-' : '') + '$' +
      Math.floor(n / 1e9) + (frac ? '.' + frac : '');
  }

  function hours(s) {
    return Math.floor(s / 3600) + 'h' +
      String(Math.floor(s / 60) % 60).padStart(2, '0') + 'm';
  }

  function renderReport(r) {
    const jobs = r.jobs, park = r.park;
    const states = Object.entries(jobs.by_state).filter(([, n]) => n > 0)
      .map(([s, n]) => s + ' ' + n).join(', ');
    const parts = [
      el('p', {class: 'muted'}, 'From ' + when(r.since) + ' to ' +
         when(r.until)),
      el('h3', {}, 'Jobs created: ' + jobs.created),
      el('p', {'data-report': 'jobs'}, states || 'none'),
      el('h3', {}, 'Schedules'),
      r.schedules.length ? table(['schedule', 'ran', 'missed', 'failed',
        'cost', 'last slot'], r.schedules.map((s) => {
        const last = s.slots[s.slots.length - 1];
        return [s.name + (s.paused ? ' (paused)' : ''), s.ran, s.missed,
                s.failed, money(s.cost_usd),
                last ? when(last.slot) + ': ' + last.state : ''];
      })) : el('p', {class: 'muted'}, 'The config has no schedules.'),
      el('h3', {'data-report': 'park'}, 'Park items waiting: ' +
         park.waiting),
      park.oldest.length ? table(['item', 'job', 'step', 'reason', 'tier',
        'waiting'], park.oldest.map((p) => ['#' + p.id, '#' + p.job_id + ' ' +
        (p.job_name || ''), p.step, p.reason, p.tier || '', hours(p.age_s)]))
        : el('p', {class: 'muted'}, 'None.'),
      el('h3', {}, 'Tiers'),
      table(['tier', 'requests', 'tokens', 'cost', 'ok', 'throttles',
             'walls', '5xx', 'timeouts', 'other', 'breaker opened'],
            r.tiers.map((t) => [t.tier || '(http)', t.requests, t.tokens,
              money(t.cost_usd), t.ok, t.throttles, t.walls,
              t.server_errors, t.timeouts, t.other, t.breaker_openings])),
      el('h3', {'data-report': 'cost'}, 'Cost: ' +
         (money(r.cost_usd) || 'no tier has a price')),
      r.costliest.length ? table(['job', 'tokens', 'cost'],
        r.costliest.map((j) => ['#' + j.id + ' ' + j.name, j.tokens,
                                money(j.cost_usd)])) : null,
      el('h3', {}, 'Failures'),
    ];
    while (parts.includes(null)) parts.splice(parts.indexOf(null), 1);
    for (const f of r.failures)
      parts.push(el('div', {class: 'failure', 'data-outcome': f.outcome},
        el('b', {}, f.count + ' × ' + f.outcome + (f.reason ? ' (' + f.reason +
           ')' : '')), ' e.g. job #' + f.example.job_id +
        (f.example.step ? ', step ' + f.example.step : '') + ', attempt ' +
        f.example.attempt + (f.example.tier ? ' on ' + f.example.tier : ''),
        f.example.body ? el('pre', {}, f.example.body) : null));
    if (!r.failures.length) parts.push(el('p', {class: 'muted'}, 'None.'));
    parts.push(el('h3', {}, 'Slowest jobs'),
      r.slowest.length ? table(['job', 'state', 'seconds'],
        r.slowest.map((j) => ['#' + j.id + ' ' + j.name, j.state,
                              j.seconds.toFixed(1)]))
        : el('p', {class: 'muted'}, 'None ended.'));
    $('report').replaceChildren(...parts);
  }

  /* The report reads the whole window: fetched on opening the tab, on a
   * new window, and every 30 s, not at every poll. */
  async function pollReport() {
    const since = $('report-since').value;
    if (since === reportSince && Date.now() - reportAt < REPORT_EVERY_MS)
      return;
    const r = await api('GET', '/v1/report?since=' +
                        encodeURIComponent(since));
    if (tab !== 'report' || since !== $('report-since').value) return;
    reportAt = Date.now();
    reportSince = since;
    if (changed('report', r)) renderReport(r);
  }

  /* ---- who is signed in, and the audit trail ----------------------- */

  /* A named operator's "Who" is its name, not something to type: the
   * server refuses any other. With the shared token it is typed, and
   * kept nowhere but the field. */
  function applyMe() {
    const named = !!(me && me.name);
    for (const id of ['resolve-by', 'retry-by']) {
      $(id).readOnly = named;
      if (named) $(id).value = me.name;
      else if (!me) $(id).value = '';
    }
    $('whoami').textContent = named ? me.name + ' (' + me.role + ')'
      : me && me.mode === 'token' ? 'shared token' : '';
    if (item) renderItem(item);
    if (shownJob) retryForm(shownJob);
  }

  function isViewer() {
    return !!(me && me.role === 'viewer');
  }

  function renderAudit(rows) {
    const what = (r) => r.park_id ? 'item #' + r.park_id
      : r.job_id ? 'job #' + r.job_id : '';
    $('audit').replaceChildren(rows.length
      ? table(['when', 'who', 'action', 'what', 'from', 'detail'],
              rows.slice().reverse().map((r) => [
                when(r.at), r.who, r.action, what(r), r.source,
                JSON.stringify(r.detail)]))
      : el('p', {class: 'muted'}, 'No write in this window.'));
  }

  /* A job's or item's own rows of the trail, in its detail. */
  function auditPart(rows) {
    if (!rows || !rows.length) return [];
    return [el('h3', {}, 'Audit'),
            table(['when', 'who', 'action', 'from'],
                  rows.map((r) => [when(r.at), r.who, r.action, r.source]))];
  }

  async function pollAudit() {
    const since = $('audit-since').value;
    const rows = await api('GET', '/v1/audit?since=' +
                           encodeURIComponent(since));
    if (tab === 'audit' && since === $('audit-since').value &&
        changed('audit', rows))
      renderAudit(rows);
  }

  /* ---- detail ------------------------------------------------------ */

  function facts(pairs) {
    const dl = el('dl');
    for (const [k, v] of pairs)
      if (v !== null && v !== undefined && v !== '')
        dl.append(el('dt', {}, k), el('dd', {}, v));
    return dl;
  }

  function pretty(text) {
    try { return JSON.stringify(JSON.parse(text), null, 2); }
    catch (e) { return text; }
  }

  function history(rows) {
    const body = rows.map((h) => el('tr', {},
      el('td', {}, h.attempt), el('td', {}, h.tier || ''),
      el('td', {}, h.status === null ? '' : h.status),
      el('td', {}, h.outcome), el('td', {}, h.reason || ''),
      el('td', {}, h.decision || ''),
      el('td', {}, money(h.cost_usd, h.cost_estimated)),
      el('td', {}, when(h.started_at) || (h.latency_ms !== undefined ?
                                          h.latency_ms + ' ms' : '')),
      el('td', {}, h.body ? el('pre', {}, h.body) : '')));
    return el('div', {class: 'scroll'}, el('table', {class: 'history'},
      el('thead', {}, el('tr', {}, ...['#', 'tier', 'status', 'outcome',
        'reason', 'decision', 'cost', 'when', 'body'].map((t) =>
          el('th', {}, t)))),
      el('tbody', {}, ...body)));
  }

  /* A tool call's item: the tool and the exact arguments it would run
   * with (and an ask tool's question). */
  function callFacts(call) {
    if (!call) return [];
    return [el('h3', {}, 'Tool call'),
            facts([['tool', call.tool], ['call id', call.call_id],
                   ['question', call.question]]),
            el('pre', {class: 'request'}, JSON.stringify(call.args, null, 2))];
  }

  function renderItem(it) {
    item = it;
    shownJob = null;
    $('retry-job').hidden = true;
    $('detail-title').textContent = 'Park item #' + it.id;
    const step = it.step + (it.kind ? ' (' + it.kind + (it.side_effects ?
      ', side effects' : '') + (it.idempotency_key ? ', idempotency key' :
      it.side_effects ? ', no idempotency key' : '') + ')' : '');
    const jobLink = el('button', {type: 'button', class: 'link',
                                  'data-open-job': it.job_id},
                       '#' + it.job_id + ' ' + (it.job_name || ''));
    jobLink.addEventListener('click', () => open('job', it.job_id));
    const job = el('span', {}, jobLink, ' (' + it.job_state + ')');
    const resolved = it.state === 'open' ? null : it.resolution + ' by ' +
                     it.resolved_by + (it.note ? ': ' + it.note : '');
    $('detail-body').replaceChildren(
      facts([['job', job], ['step', step], ['reason', it.reason],
             ['tier', it.tier], ['attempts', it.attempts],
             ['parked', when(it.parked_at)], ['state', it.state],
             ['resolved', resolved], ['request sha256', it.request_sha256]]),
      ...callFacts(it.call),
      el('h3', {}, 'Error'), el('pre', {class: 'error'}, it.error || ''),
      el('h3', {}, 'Request as sent'),
      el('pre', {class: 'request'}, it.request ? pretty(it.request) :
         '(not kept)'),
      el('h3', {}, 'Attempts'), history(it.history || []),
      ...auditPart(it.audit));
    const openItem = it.state === 'open';
    $('resolve').hidden = !openItem || isViewer();
    $('read-only').hidden = !openItem || !isViewer();
    /* approve and reject: a tool call's item only (an agent step's) */
    for (const a of ['approve', 'reject'])
      document.querySelector('[data-action="' + a + '"]').hidden = !it.call;
    /* a tier applies to chat steps only */
    $('resolve-tier').parentElement.hidden = it.kind === 'http';
  }

  function renderJob(j) {
    item = null;
    $('detail-title').textContent = 'Job #' + j.id + ' ' + j.name;
    const parts = [facts([['key', j.key], ['state', j.state],
                          ['created', when(j.created_at)],
                          ['cost', money(j.cost_usd)],
                          ['error', j.error]])];
    for (const s of j.steps || []) {
      parts.push(el('h3', {}, s.name + ': ' + s.state +
                    (s.tier ? ' on ' + s.tier : '') + ', ' + s.attempts +
                    ' attempt' + (s.attempts === 1 ? '' : 's') +
                    (s.tokens ? ', ' + s.tokens + ' tokens' : '') +
                    (money(s.cost_usd) ? ', ' + money(s.cost_usd) : '')));
      if (s.output) parts.push(el('pre', {}, s.output));
      if (s.history && s.history.length) parts.push(history(s.history));
    }
    if (j.retries && j.retries.length) {
      parts.push(el('h3', {}, 'Retries'));
      parts.push(el('ul', {class: 'retries'}, ...j.retries.map((r) =>
        el('li', {}, when(r.at) + ' by ' + r.by + ' from step ' + r.from +
           ' (was ' + r.state + (r.error ? ': ' + r.error : '') + ')'))));
    }
    parts.push(...auditPart(j.audit));
    $('detail-body').replaceChildren(...parts);
    $('resolve').hidden = true;
    $('read-only').hidden = true;
    shownJob = j;
    retryForm(j);
  }

  /* Shows what is selected as it is now. An answer that comes after the
   * selection changed, or after a confirmation was asked for, is dropped:
   * the form an operator is confirming does not change under them. */
  async function loadDetail() {
    if (!selected) return;
    const seq = ++detailSeq, {kind, id} = selected;
    const path = (kind === 'park' ? '/v1/park/' : '/v1/jobs/') + id;
    const data = await api('GET', path);
    if (seq !== detailSeq || pending || !selected ||
        selected.kind !== kind || selected.id !== id)
      return;
    if (!changed('detail', data) && !$('detail').hidden) return;
    if (kind === 'park') renderItem(data);
    else renderJob(data);
    $('detail').hidden = false;
    document.querySelector('main').classList.add('with-detail');
  }

  async function open(kind, id) {
    selected = {kind, id};
    cancelConfirm();
    delete shown.detail;
    $('outcome').hidden = true;
    try {
      await loadDetail();
      problem(null);
    } catch (e) {
      if (e.status !== 401) problem(e.message);
      closeDetail();
    }
    for (const b of document.querySelectorAll('[data-park]'))
      b.setAttribute('aria-current',
                     kind === 'park' && +b.dataset.park === id ? 'true' :
                     'false');
  }

  function closeDetail() {
    selected = null;
    item = null;
    shownJob = null;
    detailSeq++; /* an answer on its way is for nothing now */
    delete shown.detail;
    cancelConfirm();
    $('detail').hidden = true;
    document.querySelector('main').classList.remove('with-detail');
  }

  /* ---- resolving --------------------------------------------------- */

  const WHAT = {
    retry: (it) => 'Retry item #' + it.id + '? Step ' + it.step + ' of job #' +
      it.job_id + ' is queued again and will be sent again.',
    'retry-tier': (it, tier) => 'Retry item #' + it.id + ' on tier ' + tier +
      '? Step ' + it.step + ' is queued again for that tier only.',
    skip: (it) => 'Skip step ' + it.step + ' of job #' + it.job_id +
      '? The job goes on without it.',
    done: (it) => 'Mark step ' + it.step + ' of job #' + it.job_id +
      ' done with the output above? The job goes on as if it had answered.',
    fail: (it) => 'Fail job #' + it.job_id + '? It ends as failed.',
    approve: (it) => 'Approve the call of ' + (it.call || {}).tool +
      ' with the arguments above? It is sent, and the model gets its result.',
    reject: (it) => 'Reject the call of ' + (it.call || {}).tool +
      '? It is not sent; the model gets your note as its result.',
  };

  function ask(action) {
    if (!item || posting) return;
    const by = $('resolve-by').value.trim();
    if (!by) {
      outcome(false, 'Say who you are (Who) before resolving.');
      $('resolve-by').focus();
      return;
    }
    const tier = $('resolve-tier').value;
    pending = {action, tier};
    detailSeq++;
    $('output-row').hidden = action !== 'done';
    $('confirm-text').textContent = WHAT[action](item, tier);
    $('confirm').hidden = false;
    $('outcome').hidden = true;
    $('confirm-yes').focus();
  }

  function cancelConfirm() {
    pending = null;
    $('confirm').hidden = true;
    $('retry-confirm').hidden = true;
    $('output-row').hidden = true;
  }

  function outcome(ok, text) {
    const o = $('outcome');
    o.hidden = false;
    o.className = 'outcome ' + (ok ? 'ok' : 'bad');
    o.textContent = text;
  }

  async function confirmResolve() {
    if (!pending || !item) return;
    const id = item.id, p = pending;
    const body = {resolution: p.action === 'retry-tier' ? 'retry' : p.action,
                  by: $('resolve-by').value.trim()};
    const note = $('resolve-note').value.trim();
    if (note) body.note = note;
    if (p.action === 'retry-tier') body.tier = p.tier;
    if (p.action === 'done') body.output = $('resolve-output').value;
    posting = true;
    $('confirm-yes').disabled = true;
    for (const b of document.querySelectorAll('[data-action]'))
      b.disabled = true;
    try {
      const r = await api('POST', '/v1/park/' + id + '/resolve', body);
      outcome(true, 'Item #' + id + ' resolved: ' + r.resolution + ' by ' +
              body.by + '.');
      $('resolve-note').value = '';
      $('resolve-output').value = '';
    } catch (e) {
      outcome(false, (e.status === 409 ? 'Not resolved: ' : 'Failed: ') +
              e.message);
    } finally {
      posting = false;
      $('confirm-yes').disabled = false;
      for (const b of document.querySelectorAll('[data-action]'))
        b.disabled = false;
      cancelConfirm();
    }
    delete shown.detail;
    refresh();
  }

  /* ---- retrying a job (POST /v1/jobs/ID/retry, as `jobs retry`) --- */

  /* A failed or cancelled job runs again from its first step not done,
   * or an earlier one; a succeeded one from any step. */
  function retryForm(j) {
    const steps = j.steps || [];
    const can = ['failed', 'cancelled', 'succeeded'].includes(j.state);
    $('retry-job').hidden = !can || isViewer();
    if (!can) return;
    /* "send side effects again" is asked anew for every job */
    if (retryFor !== j.id) $('retry-force').checked = false;
    retryFor = j.id;
    let first = steps.findIndex((s) => s.state !== 'succeeded' &&
                                       s.state !== 'skipped');
    const opts = [];
    if (j.state !== 'succeeded' && first >= 0)
      opts.push(el('option', {value: '', 'data-step': steps[first].name},
                   'the first step not done (' + steps[first].name + ')'));
    if (first < 0) first = steps.length - 1;
    for (const s of steps.slice(0, first + 1))
      opts.push(el('option', {value: s.name}, s.name));
    $('retry-from').replaceChildren(...opts);
  }

  function askRetry() {
    if (!shownJob || posting) return;
    if (!$('retry-by').value.trim()) {
      outcome(false, 'Say who you are (Who) before retrying.');
      $('retry-by').focus();
      return;
    }
    const sel = $('retry-from'), from = sel.value;
    const name = from || sel.selectedOptions[0].dataset.step;
    pending = {action: 'retry-job', from, force: $('retry-force').checked};
    detailSeq++;
    $('retry-confirm-text').textContent = 'Retry job #' + shownJob.id +
      ' from step ' + name + '? Steps before it keep their output; it and ' +
      'the later steps run again.' + (pending.force ? ' Side effects ' +
      'already sent are sent again.' : '');
    $('retry-confirm').hidden = false;
    $('outcome').hidden = true;
    $('retry-yes').focus();
  }

  async function confirmRetry() {
    if (!pending || !shownJob) return;
    const id = shownJob.id, p = pending;
    const body = {by: $('retry-by').value.trim()};
    if (p.from) body.from = p.from;
    if (p.force) body.force_side_effects = true;
    posting = true;
    $('retry-yes').disabled = true;
    try {
      const r = await api('POST', '/v1/jobs/' + id + '/retry', body);
      outcome(true, 'Job #' + id + ' queued again from step ' + r.from +
              ' by ' + r.by + '.');
    } catch (e) {
      outcome(false, (e.status === 409 ? 'Not retried: ' : 'Failed: ') +
              e.message);
    } finally {
      posting = false;
      $('retry-yes').disabled = false;
      cancelConfirm();
    }
    delete shown.detail;
    refresh();
  }

  /* ---- refresh loop ------------------------------------------------ */

  /* One refresh at a time: a call while one is under way asks for one
   * more after it, and the next poll is set in one place only. */
  function refresh() {
    if (running) {
      again = true;
      return running;
    }
    clearTimeout(timer);
    running = poll().finally(() => {
      running = null;
      clearTimeout(timer);
      if (again) {
        again = false;
        refresh();
      } else if (!document.hidden && $('login').hidden) {
        timer = setTimeout(refresh, POLL_MS);
      }
    });
    return running;
  }

  async function poll() {
    if (!$('login').hidden) return;
    try {
      if (!me) {
        me = await api('GET', '/v1/me');
        applyMe();
      }
      const [st, tiers] = await Promise.all([api('GET', '/v1/status'),
                                             api('GET', '/v1/tiers')]);
      if (changed('status', st)) renderStatus(st);
      if (changed('tiers', tiers)) renderTiers(tiers);
      if (tab === 'park') {
        const all = $('park-all').checked;
        const items = await api('GET', '/v1/park' + (all ? '?state=all' : ''));
        if (tab === 'park' && all === $('park-all').checked &&
            changed('park', items))
          renderPark(items);
      } else if (tab === 'jobs') {
        const path = jobsPath(), jobs = await api('GET', path);
        if (tab === 'jobs' && path === jobsPath() && changed('jobs', jobs))
          renderJobs(jobs);
      } else if (tab === 'audit') {
        await pollAudit();
      } else {
        await pollReport();
      }
      if (selected && !pending) await loadDetail();
      problem(null);
      $('updated').textContent = 'updated ' +
        new Date().toLocaleTimeString();
    } catch (e) {
      if (e.status !== 401) problem(e.message);
    }
  }

  function show(which) {
    tab = which;
    for (const t of ['park', 'jobs', 'report', 'audit']) {
      $('tab-' + t).setAttribute('aria-selected', String(which === t));
      $(t + '-view').hidden = which !== t;
    }
    reportAt = 0;
    refresh();
  }

  function start() {
    $('login').addEventListener('submit', (ev) => {
      ev.preventDefault();
      token = $('token').value.trim();
      $('token').value = '';
      store.setItem('stepq.token', token);
      $('login').hidden = true;
      $('logout').hidden = false;
      refresh();
    });
    $('logout').addEventListener('click', () => askToken(''));
    $('tab-park').addEventListener('click', () => show('park'));
    $('tab-jobs').addEventListener('click', () => show('jobs'));
    $('tab-report').addEventListener('click', () => show('report'));
    $('tab-audit').addEventListener('click', () => show('audit'));
    $('audit-since').addEventListener('change', refresh);
    $('report-since').addEventListener('change', refresh);
    $('park-all').addEventListener('change', refresh);
    $('jobs-state').addEventListener('change', () => {
      $('jobs-after').value = '';
      refresh();
    });
    $('jobs-after').addEventListener('change', refresh);
    $('jobs-next').addEventListener('click', () => {
      if (jobsPage.length) $('jobs-after').value = jobsPage.at(-1).id;
      refresh();
    });
    $('detail-close').addEventListener('click', closeDetail);
    for (const b of document.querySelectorAll('[data-action]'))
      b.addEventListener('click', () => ask(b.dataset.action));
    $('confirm-yes').addEventListener('click', confirmResolve);
    $('confirm-no').addEventListener('click', cancelConfirm);
    $('resolve').addEventListener('submit', (ev) => ev.preventDefault());
    $('retry-go').addEventListener('click', askRetry);
    $('retry-yes').addEventListener('click', confirmRetry);
    $('retry-no').addEventListener('click', cancelConfirm);
    $('retry-job').addEventListener('submit', (ev) => ev.preventDefault());
    document.addEventListener('visibilitychange', () => {
      if (!document.hidden) refresh();
    });
    $('logout').hidden = !token;
    refresh();
  }

  start();
})();
