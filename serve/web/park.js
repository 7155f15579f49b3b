/* park.js: the Parked tab: the items the page loaded, searched and
 * filtered in the page (no request per keystroke), open ones grouped by
 * reason and tier, resolved ones apart below them, and the bulk resolve
 * of the items selected, one POST /v1/park/ID/resolve each. */
import {$, S, el, api, changed, ago, when, reasonHelp, isViewer}
  from './core.js';

let items = [];           /* as GET /v1/park gave them */
const picked = new Set(); /* ids of the open items selected */
let bulkPending = null;   /* {action, ids} waiting for Confirm */

export function parkPath() {
  return '/v1/park?job_names=true' +
    ($('park-state').value === 'all' ? '&state=all' : '');
}

/* The filters as the URL keeps them (#/park?q=...). */
export function parkFilters() {
  const f = {};
  for (const k of ['q', 'reason', 'tier', 'age', 'state']) {
    const v = $('park-' + k).value.trim();
    if (v && !(k === 'state' && v === 'open')) f[k] = v;
  }
  return f;
}

function setSelect(sel, value) {
  if (value && ![...sel.options].some((o) => o.value === value))
    sel.append(el('option', {value}, value));
  sel.value = value || '';
}

export function setParkFilters(f) {
  $('park-q').value = f.q || '';
  setSelect($('park-reason'), f.reason);
  setSelect($('park-tier'), f.tier);
  setSelect($('park-age'), f.age);
  $('park-state').value = f.state === 'all' ? 'all' : 'open';
}

/* The reasons and tiers of the items loaded, as choices; the one chosen
 * stays even when no item has it now. */
function options(sel, values, label) {
  const keep = sel.value;
  const all = [...new Set(values.concat(keep ? [keep] : []))].sort();
  const text = JSON.stringify(all);
  if (sel.dataset.values === text) return;
  sel.dataset.values = text;
  sel.replaceChildren(el('option', {value: ''}, 'any'),
                      ...all.map((v) => el('option', {value: v}, label(v))));
  sel.value = keep;
}

const hays = new WeakMap(); /* each item's words, in lower case */

/* Whether item it fits the filters: every word of the search is in its
 * job's name or key, step, error, reason or tier ("job:7" and "#7" name
 * a job or item by id). */
function fits(it, f, now) {
  if (f.reason && it.reason !== f.reason) return false;
  if (f.tier && (it.tier || '-') !== f.tier) return false;
  if (f.age && it.state === 'open' &&
      now - Date.parse(it.parked_at) < +f.age * 1000)
    return false;
  if (!f.words.length) return true;
  let hay = hays.get(it);
  if (hay === undefined) {
    hay = [it.job_name, it.job_key, it.step, it.error, it.reason, it.tier,
           it.resolved_by, it.note].join('\n').toLowerCase();
    hays.set(it, hay);
  }
  for (const w of f.words) {
    let m = /^(?:job:|#)([0-9]+)$/.exec(w);
    if (m && (it.job_id === +m[1] || (w[0] === '#' && it.id === +m[1])))
      continue;
    if (m || !hay.includes(w)) return false;
  }
  return true;
}

export function setItems(list) {
  items = list;
  const ids = new Set(list.map((it) => it.id));
  for (const id of rowCache.keys()) if (!ids.has(id)) rowCache.delete(id);
  options($('park-reason'), list.map((it) => it.reason), (v) => v);
  options($('park-tier'), list.map((it) => it.tier || '-'),
          (v) => v === '-' ? 'no tier' : v);
  renderPark();
}

function row(it, now) {
  const open = it.state === 'open';
  const state = open ? '' : ' · ' + it.resolution + ' by ' + it.resolved_by;
  const a = el('a', {class: 'row', href: '#/park/' + it.id,
                     'data-park': it.id},
               el('span', {class: 'line1'}, '#' + it.id + ' · job #' +
                  it.job_id + ' ' + (it.job_name || '') + ' · ' + it.step +
                  state),
               el('span', {class: 'line2'}, (it.error || it.reason) +
                  ' · parked ' + ago(it.parked_at, now) + ' (' +
                  when(it.parked_at) + ')' + (open ? '' : ' · resolved ' +
                  when(it.resolved_at))));
  const li = el('li', {});
  if (open && !isViewer()) {
    const box = el('input', {type: 'checkbox', checked: picked.has(it.id),
                             'data-pick': it.id,
                             'aria-label': 'select item #' + it.id});
    box.addEventListener('change', () => {
      if (box.checked) picked.add(it.id);
      else picked.delete(it.id);
      bulkBar();
    });
    li.append(box);
  }
  li.append(a);
  return li;
}

/* The rows drawn, by item id, kept while the item and the minute stay
 * the same: clearing a search over 1,000 items puts them back instead of
 * building them again. */
const rowCache = new Map();

function cachedRow(it, now) {
  const text = JSON.stringify([it, Math.floor(now / 60000), isViewer()]);
  let c = rowCache.get(it.id);
  if (!c || c.text !== text) {
    c = {text, li: row(it, now)};
    rowCache.set(it.id, c);
  }
  const box = c.li.firstChild;
  if (box.tagName === 'INPUT') box.checked = picked.has(it.id);
  c.li.lastChild.setAttribute('aria-current', S.selected &&
    S.selected.kind === 'park' && S.selected.id === it.id ? 'true' : 'false');
  return c.li;
}

function group(key, title, list, help, now) {
  const g = el('div', {class: 'group', 'data-group': key},
               el('h3', {}, title + ' (' + list.length + ')'));
  if (help)
    g.append(el('details', {class: 'help'},
                el('summary', {}, 'What this means'), el('p', {}, help)));
  g.append(el('ul', {class: 'items'},
              ...list.map((it) => cachedRow(it, now))));
  return g;
}

/* Draws the list as the filters say, keeping focus on the row it was on. */
export function renderPark() {
  const now = Date.now(), raw = parkFilters();
  const f = {...raw, words: (raw.q || '').toLowerCase().split(/\s+/)
    .filter((w) => w)};
  const groups = new Map(), resolved = [];
  let open = 0;
  for (const it of items) {
    if (it.state === 'open') open++;
    if (!fits(it, f, now)) continue;
    if (it.state !== 'open') {
      resolved.push(it);
      continue;
    }
    const key = it.reason + ' · ' + (it.tier ? 'tier ' + it.tier : 'no tier');
    if (!groups.has(key)) groups.set(key, []);
    groups.get(key).push(it);
  }
  const openIds = new Set(items.filter((it) => it.state === 'open')
    .map((it) => it.id));
  for (const id of [...picked]) if (!openIds.has(id)) picked.delete(id);
  const out = [];
  let shown = 0;
  for (const key of [...groups.keys()].sort()) {
    const list = groups.get(key);
    shown += list.length;
    out.push(group(key, key, list, reasonHelp(list[0].reason), now));
  }
  if (!items.length) out.push(el('p', {class: 'muted'}, 'Nothing is parked.'));
  else if (!shown && !resolved.length)
    out.push(el('p', {class: 'muted'}, 'No item matches.'));
  if (resolved.length)
    out.push(group('resolved', 'Resolved', resolved, null, now));
  const focused = document.activeElement && document.activeElement.dataset ?
    document.activeElement.dataset.park : undefined;
  $('park-groups').replaceChildren(...out);
  if (focused) {
    const again = document.querySelector(`[data-park="${focused}"]`);
    if (again) again.focus();
  }
  $('park-matching').textContent = shown + ' of ' + open +
    ' open items shown' + (resolved.length ? ', and ' + resolved.length +
    ' resolved' : '');
  bulkBar();
}

/* Every open item shown, as the filters say now. */
function shownOpen() {
  return [...document.querySelectorAll('#park-groups input[data-pick]')]
    .map((b) => +b.dataset.pick);
}

function bulkBar() {
  const ids = shownOpen();
  $('park-select-all').checked = ids.length > 0 &&
    ids.every((id) => picked.has(id));
  $('park-select-all').parentElement.hidden = isViewer() || !ids.length;
  $('bulk').hidden = picked.size === 0 || S.me === null || isViewer();
  $('bulk-count').textContent = picked.size + ' selected';
  if (!picked.size) cancelBulk();
}

function selectAll() {
  const on = $('park-select-all').checked;
  for (const id of shownOpen()) {
    if (on) picked.add(id);
    else picked.delete(id);
  }
  for (const b of document.querySelectorAll('#park-groups input[data-pick]'))
    b.checked = picked.has(+b.dataset.pick);
  bulkBar();
}

/* x on a focused row selects it, as its checkbox does. */
export function togglePick(id) {
  const box = document.querySelector(`input[data-pick="${id}"]`);
  if (!box) return;
  box.checked = !box.checked;
  box.dispatchEvent(new Event('change'));
}

const BULK_WHAT = {
  retry: 'are queued again and will be sent again.',
  skip: 'are skipped: their jobs go on without them.',
  fail: 'fail their jobs.',
};

function askBulk(action) {
  if (S.posting) return;
  if (!$('bulk-by').value.trim()) {
    bulkOutcome(false, 'Say who you are (Who) before resolving.');
    $('bulk-by').focus();
    return;
  }
  const byId = new Map(items.map((it) => [it.id, it]));
  const ids = [...picked].filter((id) => byId.has(id)).sort((a, b) => a - b);
  const doubt = ids.filter((id) => byId.get(id).reason === 'in_doubt');
  bulkPending = {action, ids};
  $('bulk-confirm-text').textContent = (action === 'retry' ? 'Retry' :
    action === 'skip' ? 'Skip' : 'Fail') + ' ' + ids.length + ' item' +
    (ids.length === 1 ? '' : 's') + '? They ' + BULK_WHAT[action];
  const preview = ids.slice(0, 20).map((id) => {
    const it = byId.get(id);
    return el('li', {}, '#' + id + ' · job #' + it.job_id + ' ' +
              (it.job_name || '') + ' · ' + it.step + ' (' + it.reason + ')');
  });
  if (ids.length > 20)
    preview.push(el('li', {}, 'and ' + (ids.length - 20) + ' more'));
  $('bulk-preview').replaceChildren(...preview);
  const warn = action === 'retry' && doubt.length > 0;
  $('bulk-doubt-row').hidden = !warn;
  $('bulk-doubt').checked = false;
  if (warn)
    $('bulk-confirm-text').textContent += ' ' + doubt.length + ' of them ' +
      (doubt.length === 1 ? 'is' : 'are') + ' in doubt: their request may ' +
      'have reached the endpoint already, and retrying may send it twice ' +
      '(post twice). Check each first.';
  $('bulk-yes').disabled = warn;
  $('bulk-confirm').hidden = false;
  $('bulk-outcome').hidden = true;
  $('bulk-yes').focus();
  if (warn) $('bulk-doubt').focus();
}

function cancelBulk() {
  bulkPending = null;
  $('bulk-confirm').hidden = true;
}

function bulkOutcome(ok, text) {
  const o = $('bulk-outcome');
  o.hidden = false;
  o.className = 'outcome ' + (ok ? 'ok' : 'bad');
  o.textContent = text;
}

/* Resolves the items one by one, four at a time: each is its own
 * resolution with its own audit row, and one resolved meanwhile by
 * someone else is counted, not an error. */
async function confirmBulk(refresh) {
  if (!bulkPending) return;
  const {action, ids} = bulkPending, by = $('bulk-by').value.trim();
  cancelBulk();
  S.posting = true;
  const done = [], lost = [], failed = [];
  let next = 0;
  const worker = async () => {
    while (next < ids.length) {
      const id = ids[next++];
      try {
        await api('POST', '/v1/park/' + id + '/resolve',
                  {resolution: action, by});
        done.push(id);
      } catch (e) {
        (e.status === 409 ? lost : failed).push([id, e.message]);
        if (e.status === 401) break;
      }
      picked.delete(id);
      $('bulk-count').textContent = 'resolving: ' + (done.length +
        lost.length + failed.length) + ' of ' + ids.length;
    }
  };
  await Promise.all([worker(), worker(), worker(), worker()]);
  S.posting = false;
  let text = done.length + ' item' + (done.length === 1 ? '' : 's') +
    ' resolved: ' + action + ' by ' + by + '.';
  if (lost.length) text += ' ' + lost.length + ' not: ' + lost[0][1] +
    (lost.length > 1 ? ' (and others)' : '') + '.';
  if (failed.length) text += ' ' + failed.length + ' failed: ' +
    failed[0][1] + '.';
  bulkOutcome(!lost.length && !failed.length, text);
  $('bulk-outcome').focus();
  delete S.shown.park;
  bulkBar();
  refresh();
}

export function startPark(refresh, route) {
  const filtered = () => {
    route();
    renderPark();
  };
  $('park-q').addEventListener('input', filtered);
  for (const k of ['reason', 'tier', 'age'])
    $('park-' + k).addEventListener('change', filtered);
  $('park-state').addEventListener('change', () => {
    route();
    refresh();
  });
  $('park-select-all').addEventListener('change', selectAll);
  for (const b of document.querySelectorAll('[data-bulk]'))
    b.addEventListener('click', () => askBulk(b.dataset.bulk));
  $('bulk-clear').addEventListener('click', () => {
    picked.clear();
    renderPark();
  });
  $('bulk-no').addEventListener('click', cancelBulk);
  $('bulk-yes').addEventListener('click', () => confirmBulk(refresh));
  $('bulk-doubt').addEventListener('change', () => {
    $('bulk-yes').disabled = !$('bulk-doubt').checked;
  });
}

/* Loads the items (on every poll); draws them only when they changed,
 * or when the minute did (the ages). */
export async function pollPark() {
  const path = parkPath(), list = await api('GET', path);
  if (S.tab === 'park' && path === parkPath() &&
      changed('park', [list, Math.floor(Date.now() / 60000)]))
    setItems(list);
}

export function cancelBulkConfirm() {
  if (!bulkPending) return false;
  cancelBulk();
  return true;
}
