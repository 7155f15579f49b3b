/* app.js: the web page of `stepq serve`. It uses the JSON API like any
 * client: the token (when the server asks for one) goes in
 * Authorization, never in a cookie, so a page of another site cannot act
 * with it; the server also refuses writes whose Origin is not its own.
 *
 * Where the token is kept: in this tab's sessionStorage, gone when the
 * tab closes, never in localStorage (which outlives the browser and
 * would sign in the next person at a shared computer) nor in the URL
 * (which goes to history, bookmarks and screenshots). A new tab of the
 * page (a link opened in a new tab) asks the page's other open tabs for
 * it over a BroadcastChannel, which only pages of this same origin can
 * hear; with no tab open it asks the person. "Log out" drops it in every
 * tab.
 *
 * Every item and job has its address: #/park/ID and #/job/ID, and the
 * Parked tab's filters are kept after "?" (#/park?q=quota&age=3600). */
import {$, S, el, api, changed, when, local, zone} from './core.js';
import {parkFilters, setParkFilters, startPark, pollPark, renderPark,
        togglePick, cancelBulkConfirm} from './park.js';
import {renderItem, renderJob} from './detail.js';
import {ask, cancelConfirm, retryForm, startActions} from './actions.js';
import {pollReport, pollAudit, reportAgain} from './report.js';

const POLL_MS = 3000;
const STATES = ['queued', 'running', 'succeeded', 'failed', 'parked',
                'cancelled'];
const TABS = ['park', 'jobs', 'report', 'audit'];
const store = window.sessionStorage;
const channel = 'BroadcastChannel' in window ?
  new BroadcastChannel('stepq.token') : null;

let timer = null;
let jobsPage = [];
let detailSeq = 0;      /* the latest detail asked for */
let running = null;     /* the refresh under way, if any */
let again = false;      /* another refresh was asked for meanwhile */
let focusDetail = false; /* the detail being opened takes the focus */

/* ---- the token ------------------------------------------------------ */

function useToken(t) {
  S.token = t;
  store.setItem('stepq.token', t);
  $('login').hidden = true;
  document.body.classList.remove('signed-out');
  $('logout').hidden = false;
  refresh();
}

function askToken(why) {
  S.token = '';
  store.removeItem('stepq.token');
  S.me = null;
  applyMe();
  clearTimeout(timer);
  closeDetail();
  for (const id of ['strip', 'tiers', 'park-groups', 'report', 'audit'])
    $(id).replaceChildren();
  $('jobs-table').tBodies[0].replaceChildren();
  for (const k of Object.keys(S.shown)) delete S.shown[k];
  $('login-error').textContent = typeof why === 'string' ? why : '';
  $('login-error').hidden = !$('login-error').textContent;
  $('login').hidden = false;
  document.body.classList.add('signed-out');
  $('logout').hidden = true;
  $('token').focus();
}
S.onUnauthorized = askToken;

/* Another tab of this page asks for the token, hands one over, or logs
 * out everywhere. */
function onChannel(ev) {
  const m = ev.data || {};
  if (m.type === 'want' && S.token)
    channel.postMessage({type: 'token', token: S.token});
  else if (m.type === 'token' && S.waitingForTab && !S.token &&
           typeof m.token === 'string')
    useToken(m.token);
  else if (m.type === 'logout' && S.token)
    askToken('You logged out in another tab.');
}

function problem(text) {
  $('problem').hidden = !text;
  $('problem').textContent = text || '';
}

/* A named operator's "Who" is its name, not something to type: the
 * server refuses any other. With the shared token it is typed, and kept
 * nowhere but the field. */
function applyMe() {
  const named = !!(S.me && S.me.name);
  for (const id of ['resolve-by', 'retry-by', 'bulk-by']) {
    $(id).readOnly = named;
    if (named) $(id).value = S.me.name;
    else if (!S.me) $(id).value = '';
  }
  $('whoami').textContent = named ? S.me.name + ' (' + S.me.role + ')'
    : S.me && S.me.mode === 'token' ? 'shared token' : '';
  if (S.item) renderItem(S.item);
  if (S.job) renderJob(S.job, retryForm);
}

/* ---- status strip ------------------------------------------------- */

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
  if (names.join('\n') === S.tierNames.join('\n')) return;
  S.tierNames = names;
  const sel = $('resolve-tier'), keep = sel.value;
  sel.replaceChildren(...names.map((n) => el('option', {value: n}, n)));
  if (names.includes(keep)) sel.value = keep;
}

/* ---- jobs list ---------------------------------------------------- */

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
                  el('td', {}, el('a', {href: '#/job/' + j.id,
                                        class: 'row'}, j.id)),
                  el('td', {}, j.name),
                  el('td', {class: 'mono'}, j.key || ''),
                  el('td', {class: 'state-' + j.state}, j.state),
                  el('td', {}, when(j.created_at)),
                  el('td', {}, when(j.updated_at)));
    tr.addEventListener('click', (ev) => {
      if (ev.target.tagName !== 'A') go('#/job/' + j.id);
    });
    return tr;
  });
  $('jobs-table').tBodies[0].replaceChildren(...rows);
  $('jobs-empty').hidden = jobs.length > 0;
  $('jobs-next').disabled = jobs.length < 50;
}

/* ---- the detail --------------------------------------------------- */

/* Shows what is selected as it is now. An answer that comes after the
 * selection changed, or after a confirmation was asked for, is dropped:
 * the form an operator is confirming does not change under them. */
async function loadDetail() {
  if (!S.selected) return;
  const seq = ++detailSeq, {kind, id} = S.selected;
  const path = (kind === 'park' ? '/v1/park/' : '/v1/jobs/') + id;
  const data = await api('GET', path);
  if (seq !== detailSeq || S.pending || !S.selected ||
      S.selected.kind !== kind || S.selected.id !== id)
    return;
  if (!changed('detail', data) && !$('detail').hidden) return;
  if (kind === 'park') renderItem(data);
  else renderJob(data, retryForm);
  $('detail').hidden = false;
  document.querySelector('main').classList.add('with-detail');
  if (focusDetail) {
    focusDetail = false;
    $('detail-title').focus();
  }
}

function markCurrent() {
  const sel = S.selected;
  for (const b of document.querySelectorAll('a[data-park]'))
    b.setAttribute('aria-current', sel && sel.kind === 'park' &&
                   +b.dataset.park === sel.id ? 'true' : 'false');
}

async function open(kind, id, takeFocus) {
  if (S.selected && S.selected.kind === kind && S.selected.id === id &&
      !$('detail').hidden)
    return;
  S.selected = {kind, id};
  focusDetail = takeFocus;
  cancelConfirm();
  delete S.shown.detail;
  $('outcome').hidden = true;
  markCurrent();
  if (S.waitingForTab) return; /* the first poll loads it */
  try {
    await loadDetail();
    problem(null);
  } catch (e) {
    if (e.status !== 401) problem(e.message);
    closeDetail();
  }
}

function rowOf(sel) {
  if (!sel) return null;
  return document.querySelector(sel.kind === 'park' ?
    `a[data-park="${sel.id}"]` : `tr[data-job="${sel.id}"] a`);
}

function closeDetail() {
  const was = S.selected;
  S.selected = null;
  S.item = null;
  S.job = null;
  detailSeq++; /* an answer on its way is for nothing now */
  delete S.shown.detail;
  cancelConfirm();
  $('detail').hidden = true;
  document.querySelector('main').classList.remove('with-detail');
  markCurrent();
  return was;
}

/* ---- addresses: #/park/ID, #/job/ID, #/TAB?filters ---------------- */

function hashNow() {
  let h = '#/' + (S.selected ? (S.selected.kind === 'park' ? 'park/' :
                  'job/') + S.selected.id : S.tab);
  if (S.tab === 'park') {
    const q = new URLSearchParams(parkFilters()).toString();
    if (q) h += '?' + q;
  } else if (S.tab === 'jobs' && $('jobs-state').value !== 'all') {
    h += '?state=' + encodeURIComponent($('jobs-state').value);
  }
  return h;
}

/* Writes the address of what is shown, without a new history entry. */
function route() {
  const h = hashNow();
  if (location.hash !== h) history.replaceState(null, '', h);
}

/* Goes to address h, as a link to it does (a new history entry). */
function go(h) {
  if (location.hash === h) applyHash();
  else location.hash = h;
}

function applyHash() {
  const h = location.hash.replace(/^#\/?/, ''), qi = h.indexOf('?');
  const path = (qi < 0 ? h : h.slice(0, qi)).split('/');
  const query = qi < 0 ? null : new URLSearchParams(h.slice(qi + 1));
  let tab = TABS.includes(path[0]) ? path[0] : null;
  const id = +path[1];
  const kind = path[0] === 'park' && id > 0 ? 'park' :
    path[0] === 'job' && id > 0 ? 'job' : null;
  if (!tab) tab = kind === 'job' ? (S.tab || 'jobs') : 'park';
  if (query && tab === 'park')
    setParkFilters(Object.fromEntries(query.entries()));
  if (query && tab === 'jobs' && query.get('state'))
    $('jobs-state').value = query.get('state');
  if (kind) {
    if (tab !== S.tab) show(tab, false);
    open(kind, id, true);
  } else {
    const was = closeDetail();
    show(tab, false);
    const back = rowOf(was);
    if (back) back.focus();
  }
  route();
  if (query && tab === 'park') renderPark();
}

function show(which, write) {
  S.tab = which;
  for (const t of TABS) {
    $('tab-' + t).setAttribute('aria-selected', String(which === t));
    $(t + '-view').hidden = which !== t;
  }
  reportAgain();
  if (write !== false) route();
  refresh();
}

/* ---- refresh loop ------------------------------------------------- */

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
  if (!$('login').hidden || (!S.token && S.waitingForTab)) return;
  try {
    if (!S.me) {
      S.me = await api('GET', '/v1/me');
      applyMe();
    }
    const [st, tiers] = await Promise.all([api('GET', '/v1/status'),
                                           api('GET', '/v1/tiers')]);
    if (changed('status', st)) renderStatus(st);
    if (changed('tiers', tiers)) renderTiers(tiers);
    if (S.tab === 'park') {
      await pollPark();
      markCurrent();
    } else if (S.tab === 'jobs') {
      const path = jobsPath(), jobs = await api('GET', path);
      if (S.tab === 'jobs' && path === jobsPath() && changed('jobs', jobs))
        renderJobs(jobs);
    } else if (S.tab === 'audit') {
      await pollAudit();
    } else {
      await pollReport();
    }
    if (S.selected && !S.pending) {
      focusDetail = focusDetail || $('detail').hidden;
      await loadDetail();
    }
    problem(null);
    $('updated').textContent = 'updated ' + local(new Date()).slice(11);
    $('zone').textContent = 'times in ' + zone();
  } catch (e) {
    if (e.status !== 401) problem(e.message);
  }
}

/* ---- keys --------------------------------------------------------- */

function rows() {
  return [...document.querySelectorAll(S.tab === 'park' ?
    '#park-groups a.row' : S.tab === 'jobs' ? '#jobs-table a.row' : 'x')];
}

/* j/k or the arrows: the next or previous row; with the detail open it
 * shows that row's item, the focus staying in the list. */
function move(by) {
  const list = rows();
  if (!list.length) return;
  let i = list.indexOf(document.activeElement);
  if (i < 0) i = list.indexOf(rowOf(S.selected));
  i = i < 0 ? (by > 0 ? 0 : list.length - 1) :
    Math.min(list.length - 1, Math.max(0, i + by));
  list[i].focus();
  if (S.selected) {
    const id = +(list[i].dataset.park || list[i].textContent);
    S.selected = null;
    history.replaceState(null, '', list[i].getAttribute('href'));
    open(list[i].dataset.park ? 'park' : 'job', id, false).then(route);
  }
}

const RESOLVE_KEYS = {r: 'retry', s: 'skip', d: 'done', f: 'fail',
                      a: 'approve'};

function onKey(ev) {
  if (ev.ctrlKey || ev.metaKey || ev.altKey || !$('login').hidden) return;
  const t = ev.target, typing = t.isContentEditable ||
    ['INPUT', 'TEXTAREA', 'SELECT'].includes(t.tagName);
  if (ev.key === 'Escape') {
    if (cancelBulkConfirm() || cancelConfirm()) return;
    if (S.selected) {
      ev.preventDefault();
      const was = closeDetail();
      route();
      const back = rowOf(was);
      if (back) back.focus();
    }
    return;
  }
  if (typing) return;
  if (t.getAttribute('role') === 'tab' &&
      (ev.key === 'ArrowRight' || ev.key === 'ArrowLeft')) {
    /* the tabs: the arrows go to the next or previous one */
    const i = TABS.indexOf(t.id.slice(4)) + (ev.key === 'ArrowRight' ? 1 : -1);
    const next = TABS[(i + TABS.length) % TABS.length];
    ev.preventDefault();
    closeDetail();
    show(next);
    $('tab-' + next).focus();
  } else if (ev.key === '/') {
    ev.preventDefault();
    if (S.tab !== 'park') show('park');
    $('park-q').focus();
  } else if (ev.key === 'j' || ev.key === 'ArrowDown') {
    ev.preventDefault();
    move(1);
  } else if (ev.key === 'k' || ev.key === 'ArrowUp') {
    ev.preventDefault();
    move(-1);
  } else if (ev.key === 'x' && t.dataset && t.dataset.park) {
    togglePick(+t.dataset.park);
  } else if (RESOLVE_KEYS[ev.key] && S.item && !S.pending) {
    ev.preventDefault();
    ask(RESOLVE_KEYS[ev.key]);
  }
}

function start() {
  $('login').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const t = $('token').value.trim();
    $('token').value = '';
    useToken(t);
  });
  $('logout').addEventListener('click', () => {
    if (channel) channel.postMessage({type: 'logout'});
    askToken('');
  });
  for (const t of TABS)
    $('tab-' + t).addEventListener('click', () => {
      closeDetail();
      show(t);
    });
  $('audit-since').addEventListener('change', refresh);
  $('report-since').addEventListener('change', refresh);
  $('jobs-state').addEventListener('change', () => {
    $('jobs-after').value = '';
    route();
    refresh();
  });
  $('jobs-after').addEventListener('change', refresh);
  $('jobs-next').addEventListener('click', () => {
    if (jobsPage.length) $('jobs-after').value = jobsPage.at(-1).id;
    refresh();
  });
  $('detail-close').addEventListener('click', () => {
    const was = closeDetail();
    route();
    const back = rowOf(was);
    if (back) back.focus();
  });
  startPark(refresh, route);
  startActions(refresh);
  window.addEventListener('hashchange', applyHash);
  document.addEventListener('keydown', onKey);
  document.addEventListener('visibilitychange', () => {
    if (!document.hidden) refresh();
  });
  S.token = store.getItem('stepq.token') || '';
  S.tab = null; /* a job's address opens the Jobs tab */
  $('logout').hidden = !S.token;
  if (channel) channel.addEventListener('message', onChannel);
  /* No token in this tab: another open tab of the page may have one. */
  S.waitingForTab = !S.token && !!channel;
  applyHash();
  if (S.waitingForTab) {
    channel.postMessage({type: 'want'});
    setTimeout(() => {
      S.waitingForTab = false;
      if (!S.token) refresh();
    }, 300);
  }
}

start();
