/* report.js: the Report tab (the morning report, as `stepq report`)
 * and the Audit tab (the audit trail, as `stepq audit`). Times are the
 * browser's local time, as everywhere on the page. */
import {$, S, el, api, changed, money, table, when, timeEl} from './core.js';

/* ---- the morning report ------------------------------------------ */

const REPORT_EVERY_MS = 30000;
let reportAt = 0, reportSince = '';

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
      'waiting'], park.oldest.map((p) => [el('a', {href: '#/park/' + p.id},
      '#' + p.id), el('span', {}, el('a', {href: '#/job/' + p.job_id},
      '#' + p.job_id), ' ' + (p.job_name || '')), p.step, p.reason, p.tier || '', hours(p.age_s)]))
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
/* The next poll reads the report again (the tab was opened). */
export function reportAgain() {
  reportAt = 0;
}

export async function pollReport() {
  const since = $('report-since').value;
  if (since === reportSince && Date.now() - reportAt < REPORT_EVERY_MS)
    return;
  const r = await api('GET', '/v1/report?since=' +
                      encodeURIComponent(since));
  if (S.tab !== 'report' || since !== $('report-since').value) return;
  reportAt = Date.now();
  reportSince = since;
  if (changed('report', r)) renderReport(r);
}

function renderAudit(rows) {
  const what = (r) => r.park_id ? 'item #' + r.park_id
    : r.job_id ? 'job #' + r.job_id : '';
  $('audit').replaceChildren(rows.length
    ? table(['when', 'who', 'action', 'what', 'from', 'detail'],
            rows.slice().reverse().map((r) => [
              timeEl(r.at), r.who, r.action, what(r), r.source,
              JSON.stringify(r.detail)]))
    : el('p', {class: 'muted'}, 'No write in this window.'));
}

export async function pollAudit() {
  const since = $('audit-since').value;
  const rows = await api('GET', '/v1/audit?since=' +
                         encodeURIComponent(since));
  if (S.tab === 'audit' && since === $('audit-since').value &&
      changed('audit', rows))
    renderAudit(rows);
}

