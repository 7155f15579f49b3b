/* detail.js: the detail beside the list: a park item (what it is, what
 * its reason means, its attempts and audit rows), a job (its steps, an
 * agent step as a transcript, its park items and their resolutions, its
 * retries), and what they are drawn from. */
import {$, S, el, facts, pretty, money, when, timeEl, table, isViewer,
        reasonHelp} from './core.js';

/* A job's or item's own rows of the trail, in its detail. */
export function auditPart(rows) {
  if (!rows || !rows.length) return [];
  return [el('h3', {}, 'Audit'),
          table(['when', 'who', 'action', 'from'],
                rows.map((r) => [timeEl(r.at), r.who, r.action, r.source]))];
}

function history(rows) {
  const body = rows.map((h) => el('tr', {},
    el('td', {}, h.attempt), el('td', {}, h.tier || ''),
    el('td', {}, h.status === null ? '' : h.status),
    el('td', {}, h.outcome), el('td', {}, h.reason || ''),
    el('td', {}, h.decision || ''),
    el('td', {}, money(h.cost_usd, h.cost_estimated)),
    el('td', {}, h.started_at ? timeEl(h.started_at) :
       h.latency_ms !== undefined ? h.latency_ms + ' ms' : ''),
    el('td', {}, h.body ? el('pre', {}, h.body) : '')));
  return el('div', {class: 'scroll'}, el('table', {class: 'history'},
    el('thead', {}, el('tr', {}, ...['#', 'tier', 'status', 'outcome',
      'reason', 'decision', 'cost', 'when', 'body'].map((t) =>
        el('th', {}, t)))),
    el('tbody', {}, ...body)));
}

const compact = (v) => typeof v === 'string' ? v : JSON.stringify(v);

/* An agent step's attempts as a transcript: each model turn (tier,
 * tokens, cost, how it finished) and each tool call (tool, arguments,
 * state, the start of its result), then the approvals of its calls and
 * who gave them. */
function transcript(s, park) {
  const rows = s.history.map((h) => {
    if (h.kind === 'tool')
      return el('tr', {'data-call': h.call_id || ''},
        el('td', {}, h.attempt), el('td', {}, 'call'),
        el('td', {}, h.tool || ''), el('td', {}), el('td', {}),
        el('td', {}, (h.outcome || 'in flight') +
           (h.reason ? ' (' + h.reason + ')' : '')),
        el('td', {}, el('pre', {class: 'args'}, compact(h.args)),
           h.result ? el('pre', {class: 'result'}, '→ ' + h.result) : ''));
    const finish = h.decision === 'tool_calls' ? 'tool calls (' +
      h.calls + ')' : (h.outcome || 'in flight') +
      (h.reason ? ' (' + h.reason + ')' : '');
    return el('tr', {'data-turn': h.attempt},
      el('td', {}, h.attempt), el('td', {}, 'turn'),
      el('td', {}, h.tier || ''),
      el('td', {}, h.tokens === null || h.tokens === undefined ? '' :
         h.tokens),
      el('td', {}, money(h.cost_usd, h.cost_estimated)),
      el('td', {}, finish),
      el('td', {}, h.body && h.outcome !== 'ok' && h.decision !==
         'tool_calls' ? el('pre', {}, h.body) : ''));
  });
  const parts = [el('div', {class: 'scroll'}, el('table',
    {class: 'transcript'},
    el('thead', {}, el('tr', {}, ...['#', 'what', 'tier or tool', 'tokens',
      'cost', 'finish or state', 'arguments and result'].map((t) =>
        el('th', {}, t)))),
    el('tbody', {}, ...rows)))];
  const asks = park.filter((p) => p.step === s.name && p.call);
  if (asks.length)
    parts.push(el('ul', {class: 'approvals'}, ...asks.map((p) =>
      el('li', {'data-approval': p.id}, p.reason + ' ' + p.call.tool + ' ' +
         compact(p.call.args) + ': ',
         p.state === 'open' ? el('a', {href: '#/park/' + p.id},
                                 'waiting (item #' + p.id + ')')
           : 'resolved ' + p.resolution + ' by ' + p.resolved_by + ' at ' +
             when(p.resolved_at) + (p.note ? ' (' + p.note + ')' : '')))));
  return parts;
}

/* A job's park items and how each was resolved. */
function parkPart(park) {
  if (!park || !park.length) return [];
  return [el('h3', {}, 'Park items'),
          table(['item', 'step', 'reason', 'parked', 'state', 'resolution'],
                park.map((p) => [
                  el('a', {href: '#/park/' + p.id, 'data-open-park': p.id},
                     '#' + p.id),
                  p.step, p.reason, timeEl(p.parked_at, true), p.state,
                  p.state === 'open' ? '' : p.resolution + ' by ' +
                    p.resolved_by + ' at ' + when(p.resolved_at) +
                    (p.note ? ': ' + p.note : '')]),
                {class: 'job-park'})];
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

function helpBox(reason) {
  return el('div', {class: 'help-box', 'data-help': reason},
            el('b', {}, 'Why it waits (' + reason + '): '),
            reasonHelp(reason));
}

export function renderItem(it) {
  S.item = it;
  S.job = null;
  $('retry-job').hidden = true;
  $('cancel-job').hidden = true;
  $('detail-title').textContent = 'Park item #' + it.id;
  const step = it.step + (it.kind ? ' (' + it.kind + (it.side_effects ?
    ', side effects' : '') + (it.idempotency_key ? ', idempotency key' :
    it.side_effects ? ', no idempotency key' : '') + ')' : '');
  const job = el('span', {}, el('a', {href: '#/job/' + it.job_id,
                                      'data-open-job': it.job_id},
                                '#' + it.job_id + ' ' + (it.job_name || '')),
                 ' (' + it.job_state + ')');
  const resolved = it.state === 'open' ? null : it.resolution + ' by ' +
                   it.resolved_by + ' at ' + when(it.resolved_at) +
                   (it.note ? ': ' + it.note : '');
  $('detail-help').replaceChildren(it.state === 'open' ? helpBox(it.reason)
                                                       : '');
  $('detail-body').replaceChildren(
    facts([['job', job], ['step', step], ['reason', it.reason],
           ['tier', it.tier],
           ['sends to', it.http ? it.http.method + ' ' + it.http.url : null],
           ['attempts', it.attempts],
           ['parked', timeEl(it.parked_at, true)], ['state', it.state],
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

export function renderJob(j, retryForm) {
  S.item = null;
  $('detail-title').textContent = 'Job #' + j.id + ' ' + j.name;
  $('detail-help').replaceChildren();
  const parts = [facts([['key', j.key], ['state', j.state],
                        ['created', timeEl(j.created_at, true)],
                        ['updated', timeEl(j.updated_at)],
                        ['due', timeEl(j.run_at)],
                        ['deadline', timeEl(j.deadline_at)],
                        ['cost', money(j.cost_usd)],
                        ['input', j.input === null || j.input === undefined ?
                          null : compact(j.input)],
                        ['error', j.error]])];
  for (const s of j.steps || []) {
    parts.push(el('h3', {'data-step': s.name}, s.name + ': ' + s.state +
                  (s.tier ? ' on ' + s.tier : '') + ', ' + s.attempts +
                  ' attempt' + (s.attempts === 1 ? '' : 's') +
                  (s.tokens ? ', ' + s.tokens + ' tokens' : '') +
                  (money(s.cost_usd) ? ', ' + money(s.cost_usd) : '')));
    if (s.reason) parts.push(el('p', {class: 'muted'}, s.reason));
    if (s.http) parts.push(el('p', {class: 'mono'}, s.http.method + ' ' +
                              s.http.url));
    if (s.output) parts.push(el('pre', {}, s.output));
    const h = s.history || [];
    if (h.some((a) => a.kind)) parts.push(...transcript(s, j.park || []));
    else if (h.length) parts.push(history(h));
  }
  parts.push(...parkPart(j.park));
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
  $('cancel-job').hidden = isViewer() ||
    !['queued', 'running', 'parked'].includes(j.state);
  S.job = j;
  retryForm(j);
}
