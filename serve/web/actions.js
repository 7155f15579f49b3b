/* actions.js: the writes of the detail: resolving an item, retrying and
 * cancelling a job. Each asks for confirmation with what it will do; a
 * Retry (or Approve) of an item in doubt also asks the operator to say
 * they checked that it did not happen, since it may post twice. */
import {$, S, el, api, isViewer} from './core.js';

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

/* What may happen twice when an item in doubt is sent again. */
function doubtText(it) {
  const where = it.http ? it.http.method + ' ' + it.http.url :
    it.call ? 'the tool ' + it.call.tool : 'its endpoint';
  return 'May send twice: this request may already have reached ' + where +
    ' (no clear answer came back). Sending it again may post twice, ' +
    'charge twice or act twice. Check there first whether it happened; ' +
    'if it did, use Done with its result instead.';
}

export function outcome(ok, text) {
  const o = $('outcome');
  o.hidden = false;
  o.className = 'outcome ' + (ok ? 'ok' : 'bad');
  o.textContent = text;
}

export function cancelConfirm() {
  const had = S.pending !== null;
  S.pending = null;
  for (const id of ['confirm', 'retry-confirm', 'cancel-confirm', 'doubt',
                    'output-row', 'not-before-row'])
    $(id).hidden = true;
  $('confirm-yes').disabled = false;
  return had;
}

export function ask(action) {
  const it = S.item;
  if (!it || S.posting || $('resolve').hidden) return;
  const by = $('resolve-by').value.trim();
  if (!by) {
    outcome(false, 'Say who you are (Who) before resolving.');
    $('resolve-by').focus();
    return;
  }
  if ((action === 'approve' || action === 'reject') && !it.call) return;
  const tier = $('resolve-tier').value;
  S.pending = {action, tier};
  const retry = action === 'retry' || action === 'retry-tier';
  const doubt = it.reason === 'in_doubt' && (retry || action === 'approve');
  $('output-row').hidden = action !== 'done';
  $('not-before-row').hidden = !retry;
  $('confirm-text').textContent = WHAT[action](it, tier);
  $('doubt').hidden = !doubt;
  $('doubt-text').textContent = doubt ? doubtText(it) : '';
  $('doubt-ok').checked = false;
  $('confirm-yes').disabled = doubt;
  $('confirm').hidden = false;
  $('outcome').hidden = true;
  (doubt ? $('doubt-ok') : action === 'done' ? $('resolve-output') :
   $('confirm-yes')).focus();
}

/* "6h", "30m", "2d" from now, or a time as typed: RFC 3339 for the API. */
function notBefore(text) {
  const m = /^([0-9]+)\s*([smhd])$/.exec(text);
  if (m)
    return new Date(Date.now() + +m[1] * {s: 1, m: 60, h: 3600, d: 86400}[
      m[2]] * 1000).toISOString().replace(/\.[0-9]+Z$/, 'Z');
  const t = Date.parse(text);
  if (isNaN(t)) return null;
  return new Date(t).toISOString().replace(/\.[0-9]+Z$/, 'Z');
}

export async function confirmResolve(refresh) {
  if (!S.pending || !S.item) return;
  const id = S.item.id, p = S.pending;
  const body = {resolution: p.action === 'retry-tier' ? 'retry' : p.action,
                by: $('resolve-by').value.trim()};
  const note = $('resolve-note').value.trim();
  if (note) body.note = note;
  if (p.action === 'retry-tier') body.tier = p.tier;
  if (p.action === 'done') body.output = $('resolve-output').value;
  const nb = $('resolve-not-before').value.trim();
  if (body.resolution === 'retry' && nb) {
    body.not_before = notBefore(nb);
    if (!body.not_before) {
      outcome(false, 'Not before: "' + nb + '" is neither a time nor a ' +
              'span such as 6h.');
      $('resolve-not-before').focus();
      return;
    }
  }
  S.posting = true;
  for (const b of document.querySelectorAll('[data-action], #confirm-yes'))
    b.disabled = true;
  try {
    const r = await api('POST', '/v1/park/' + id + '/resolve', body);
    outcome(true, 'Item #' + id + ' resolved: ' + r.resolution + ' by ' +
            body.by + '.');
    for (const f of ['resolve-note', 'resolve-output', 'resolve-not-before'])
      $(f).value = '';
  } catch (e) {
    outcome(false, (e.status === 409 ? 'Not resolved: ' : 'Failed: ') +
            e.message);
  } finally {
    S.posting = false;
    for (const b of document.querySelectorAll('[data-action]'))
      b.disabled = false;
    cancelConfirm();
  }
  $('outcome').focus();
  delete S.shown.detail;
  refresh();
}

/* ---- retrying a job (POST /v1/jobs/ID/retry, as `jobs retry`) ----- */

let retryFor = null; /* the job the retry form was last set up for */

/* A failed or cancelled job runs again from its first step not done,
 * or an earlier one; a succeeded one from any step. */
export function retryForm(j) {
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
  const j = S.job;
  if (!j || S.posting) return;
  if (!$('retry-by').value.trim()) {
    outcome(false, 'Say who you are (Who) before retrying.');
    $('retry-by').focus();
    return;
  }
  const sel = $('retry-from'), from = sel.value;
  const name = from || sel.selectedOptions[0].dataset.step;
  S.pending = {action: 'retry-job', from, force: $('retry-force').checked};
  $('retry-confirm-text').textContent = 'Retry job #' + j.id +
    ' from step ' + name + '? Steps before it keep their output; it and ' +
    'the later steps run again.' + (S.pending.force ? ' Side effects ' +
    'already sent are sent again: they may happen twice.' : '');
  $('retry-confirm').hidden = false;
  $('outcome').hidden = true;
  $('retry-yes').focus();
}

async function post(path, body, ok, verb, refresh) {
  S.posting = true;
  try {
    outcome(true, ok(await api('POST', path, body)));
  } catch (e) {
    outcome(false, (e.status === 409 ? 'Not ' + verb + ': ' : 'Failed: ') +
            e.message);
  } finally {
    S.posting = false;
    cancelConfirm();
  }
  $('outcome').focus();
  delete S.shown.detail;
  refresh();
}

function confirmRetry(refresh) {
  if (!S.pending || !S.job) return;
  const id = S.job.id, p = S.pending;
  const body = {by: $('retry-by').value.trim()};
  if (p.from) body.from = p.from;
  if (p.force) body.force_side_effects = true;
  return post('/v1/jobs/' + id + '/retry', body, (r) => 'Job #' + id +
              ' queued again from step ' + r.from + ' by ' + r.by + '.',
              'retried', refresh);
}

function askCancel() {
  const j = S.job;
  if (!j || S.posting) return;
  S.pending = {action: 'cancel-job'};
  $('cancel-confirm-text').textContent = 'Cancel job #' + j.id + ' ' +
    j.name + '? It ends as cancelled' + (j.state === 'parked' ?
    ', and its open park items close with it.' : '.');
  $('cancel-confirm').hidden = false;
  $('outcome').hidden = true;
  $('cancel-yes').focus();
}

function confirmCancel(refresh) {
  if (!S.pending || !S.job) return;
  const id = S.job.id;
  return post('/v1/jobs/' + id + '/cancel', undefined, () => 'Job #' + id +
              ' cancelled.', 'cancelled', refresh);
}

export function startActions(refresh) {
  for (const b of document.querySelectorAll('[data-action]'))
    b.addEventListener('click', () => ask(b.dataset.action));
  $('confirm-yes').addEventListener('click', () => confirmResolve(refresh));
  $('confirm-no').addEventListener('click', cancelConfirm);
  $('doubt-ok').addEventListener('change', () => {
    $('confirm-yes').disabled = !$('doubt-ok').checked;
  });
  $('resolve').addEventListener('submit', (ev) => ev.preventDefault());
  $('retry-go').addEventListener('click', askRetry);
  $('retry-yes').addEventListener('click', () => confirmRetry(refresh));
  $('retry-no').addEventListener('click', cancelConfirm);
  $('retry-job').addEventListener('submit', (ev) => ev.preventDefault());
  $('cancel-go').addEventListener('click', askCancel);
  $('cancel-yes').addEventListener('click', () => confirmCancel(refresh));
  $('cancel-no').addEventListener('click', cancelConfirm);
  $('cancel-job').addEventListener('submit', (ev) => ev.preventDefault());
}
