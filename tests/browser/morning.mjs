// morning.mjs: the page of `stepq serve` on a real morning, in Debian's
// headless Chromium (playwright-core), with an accessibility check by
// axe-core at each view. Run by tests/test_serve_web.c on a store a real
// worker run filled:
//
//   STEPQ_URL=http://127.0.0.1:PORT STEPQ_TOKEN=T node morning.mjs morning
//     a newcomer's morning: an order post in doubt, four sync posts in
//     doubt, an agent's call waiting for approval (a worker runs beside)
//   STEPQ_URL=... STEPQ_TOKEN=T ITEMS=1000 node morning.mjs scale
//     1,000 open items: prints how long the list, a search, a filter,
//     opening an item and a bulk skip of them all took (no assertion on
//     time: the numbers are for the report)
import {api, check, describe, login, run, url, watch, WAIT, token}
  from './lib.mjs';
import fs from 'node:fs';

const AXE = fs.readFileSync(
  new URL('./node_modules/axe-core/axe.min.js', import.meta.url), 'utf8');

// axe-core on the page as it is: no serious or critical violation of
// WCAG 2.1 A/AA or axe's best practices.
async function axeCheck(page, where) {
  if (!await page.evaluate(() => !!window.axe)) await page.evaluate(AXE);
  const r = await page.evaluate(() => window.axe.run(document, {
    runOnly: {type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a',
                                    'wcag21aa', 'best-practice']}}));
  const bad = r.violations.filter((v) => v.impact === 'serious' ||
                                         v.impact === 'critical');
  check(bad.length === 0, 'axe on ' + where + ': ' + bad.map((v) =>
    v.id + ' (' + v.impact + ': ' + v.nodes.slice(0, 3).map((n) =>
      n.target.join(' ')).join(', ') + ')').join('; '));
}

// An RFC 3339 UTC time as the page writes it in Asia/Kolkata (+05:30).
function kolkata(iso) {
  const d = new Date(Date.parse(iso) + 330 * 60000).toISOString();
  return d.slice(0, 10) + ' ' + d.slice(11, 19);
}

const rows = (page) => page.locator('#park-groups a.row');
const focused = (page) => page.evaluate(() =>
  document.activeElement.id || document.activeElement.dataset.park || '');

async function findAndResolve(page, ctx, doubt, errors) {
  // Find: the search narrows the list as one types, and the address
  // keeps it; the group says what its reason means.
  await page.fill('#park-q', 'order');
  await page.waitForFunction(() => document.querySelectorAll(
    '#park-groups a.row').length === 1, null, WAIT);
  check(await rows(page).first().getAttribute('data-park') === '' + doubt.id,
        'the search finds the order post');
  check((await page.evaluate(() => location.hash)).includes('q=order'),
        'the address keeps the search');
  await page.click('[data-group^="in_doubt"] summary');
  check((await page.locator('[data-group^="in_doubt"] details')
    .textContent()).includes('twice'), 'the reason is explained');

  // Open it with the keyboard: j to the row, Enter; the focus goes to
  // the detail, which says where the post went.
  await page.evaluate(() => document.activeElement.blur());
  await page.keyboard.press('j');
  check(await focused(page) === '' + doubt.id, 'j moves to the first row');
  await page.keyboard.press('Enter');
  await page.locator('#detail-title', {hasText: `Park item #${doubt.id}`})
    .waitFor(WAIT);
  await page.waitForFunction(() => document.activeElement.id ===
                             'detail-title', null, WAIT);
  check((await page.locator('#detail-help').textContent())
    .includes('do it twice'), 'the detail explains in_doubt');
  check(/POST http:\/\/127\.0\.0\.1:[0-9]+\/orders/.test(
    await page.locator('#detail-body dl').textContent()),
        'the detail shows where the post went');
  check(await page.evaluate(() => location.hash) ===
        `#/park/${doubt.id}?q=order`, 'the item has its address');

  // Retry of a post in doubt: a warning, and Confirm stays off until
  // the operator says they checked. Escape cancels, Escape closes.
  await page.fill('#resolve-by', 'ana');
  await page.locator('#detail-title').focus();
  await page.keyboard.press('r');
  await page.locator('#doubt', {hasText: 'post twice'}).waitFor(WAIT);
  check(await page.locator('#confirm-yes').isDisabled(),
        'Confirm is on before the double-send check');
  await axeCheck(page, 'the in-doubt confirmation');
  await page.check('#doubt-ok');
  check(await page.locator('#confirm-yes').isEnabled(),
        'Confirm stays off after the check');
  await page.keyboard.press('Escape');
  check(await page.locator('#confirm').isHidden(), 'Escape keeps the confirm');
  check(await page.locator('#detail').isVisible(), 'Escape closed it all');
  await page.keyboard.press('Escape');
  await page.locator('#detail').waitFor({state: 'hidden', ...WAIT});
  check(await focused(page) === '' + doubt.id,
        'closing the detail gives the focus back to its row');

  // Its address in a new tab: no token asked (this tab hands it over).
  // Done, with the result the operator found, all by keyboard.
  const tab = await ctx.newPage();
  watch(tab, errors);
  await tab.goto(url + '/#/park/' + doubt.id);
  await tab.locator('#detail-title', {hasText: `Park item #${doubt.id}`})
    .waitFor(WAIT);
  check(await tab.locator('#login').isHidden(), 'the new tab asks again');
  await tab.fill('#resolve-by', 'ana');
  await tab.locator('#detail-title').focus();
  await tab.keyboard.press('d');
  await tab.waitForFunction(() => document.activeElement.id ===
                            'resolve-output', null, WAIT);
  await tab.keyboard.type('order 77 was placed');
  await tab.click('#confirm-yes');
  await tab.locator('#outcome', {hasText: 'resolved: done by ana'})
    .waitFor(WAIT);
  await tab.close();
  describe(page);

  // Resolved items are apart from the open groups.
  await page.fill('#park-q', '');
  await page.selectOption('#park-state', 'all');
  await page.locator(`[data-group="resolved"] [data-park="${doubt.id}"]`)
    .waitFor(WAIT);
  check(await page.locator('.group:not([data-group="resolved"]) ' +
                           `[data-park="${doubt.id}"]`).count() === 0,
        'a resolved item in an open group');
  await page.selectOption('#park-state', 'open');
}

// A sync post retried "not before 6h" (in doubt: ticked as checked), a
// job cancelled from its view, the other two sync posts skipped at once.
async function cancelAndBulk(page, syncs) {
  await page.click(`[data-park="${syncs[1].id}"]`);
  await page.locator('#detail-title', {hasText: `Park item #${syncs[1].id}`})
    .waitFor(WAIT);
  await page.fill('#resolve-by', 'ana');
  await page.click('[data-action="retry"]');
  await page.fill('#resolve-not-before', '6h');
  await page.check('#doubt-ok');
  await page.click('#confirm-yes');
  await page.locator('#outcome', {hasText: 'resolved: retry by ana'})
    .waitFor(WAIT);

  await page.click(`[data-park="${syncs[0].id}"]`);
  await page.click('#detail-body [data-open-job]');
  await page.locator('#detail-title', {hasText: `Job #${syncs[0].job_id}`})
    .waitFor(WAIT);
  check((await page.locator('table.job-park').textContent())
    .includes('#' + syncs[0].id), 'the job shows its park item');
  await page.click('#cancel-go');
  await page.click('#cancel-yes');
  await page.locator('#outcome', {hasText: `Job #${syncs[0].job_id} ` +
                                  'cancelled.'}).waitFor(WAIT);
  await page.locator('table.job-park', {hasText: 'cancel by'}).waitFor(WAIT);

  await page.click('#tab-park');
  await page.fill('#park-q', 'sync');
  await page.waitForFunction(() => document.querySelectorAll(
    '#park-groups a.row').length === 2, null, WAIT);
  await page.check('#park-select-all');
  await page.locator('#bulk-count', {hasText: '2 selected'}).waitFor(WAIT);
  await page.fill('#bulk-by', 'ana');
  await page.click('[data-bulk="skip"]');
  check(await page.locator('#bulk-preview li').count() === 2,
        'the preview lists both');
  await axeCheck(page, 'the bulk preview');
  await page.click('#bulk-yes');
  await page.locator('#bulk-outcome',
                     {hasText: '2 items resolved: skip by ana.'}).waitFor(WAIT);
  await page.fill('#park-q', '');
}

// The agent: its call waiting for approval, the job's transcript, the
// approval given, and the turns after it (a worker runs meanwhile).
async function agent(page, approval) {
  await page.selectOption('#park-reason', 'approval');
  await page.waitForFunction(() => document.querySelectorAll(
    '#park-groups a.row').length === 1, null, WAIT);
  await page.click(`[data-park="${approval.id}"]`);
  await page.locator('#detail-body', {hasText: 'post_comment'}).waitFor(WAIT);
  await page.click('#detail-body [data-open-job]');
  const call = page.locator('table.transcript tr', {hasText: 'add_label'});
  await call.waitFor(WAIT);
  const text = await call.textContent();
  check(text.includes('{"label":"bug"}') && text.includes('→'),
        'the call shows its arguments and result: ' + text);
  check(await page.locator('table.transcript tr[data-turn]', {
    hasText: 'local'}).count() >= 2, 'the turns show their tier');
  await page.locator(`[data-approval="${approval.id}"]`,
                     {hasText: 'waiting'}).waitFor(WAIT);
  await axeCheck(page, 'a job with a transcript');

  await page.click(`[data-approval="${approval.id}"] a`);
  await page.locator('#detail-title', {hasText: `Park item #${approval.id}`})
    .waitFor(WAIT);
  await page.fill('#resolve-by', 'ana');
  await page.locator('#detail-title').focus();
  await page.keyboard.press('a');
  await page.locator('#confirm-text', {hasText: 'Approve the call of ' +
                                       'post_comment'}).waitFor(WAIT);
  await page.click('#confirm-yes');
  await page.locator('#outcome', {hasText: 'resolved: approve by ana'})
    .waitFor(WAIT);
  await page.click('#detail-body [data-open-job]');
  await page.locator(`[data-approval="${approval.id}"]`,
                     {hasText: 'resolved approve by ana'})
    .waitFor({timeout: 30000});
  await page.locator('table.transcript tr', {hasText: 'post_comment'})
    .filter({hasText: 'ok'}).first().waitFor({timeout: 30000});
}

async function morningMode(browser) {
  const items = (await api('GET', '/v1/park?job_names=true')).json;
  const doubt = items.find((i) => i.job_name === 'nightly-order-0000');
  const syncs = items.filter((i) => i.job_name.startsWith('nightly-sync-'));
  const approval = items.find((i) => i.reason === 'approval');
  check(doubt && syncs.length === 4 && approval,
        'the night parked: ' + JSON.stringify(items));
  const ctx = await browser.newContext({
    viewport: {width: 1280, height: 900}, timezoneId: 'Asia/Kolkata'});
  const page = await ctx.newPage();
  const errors = [];
  watch(page, errors);
  await login(page, 'wrong-token-0123456789');
  await page.locator('#login-error').waitFor(WAIT);
  await axeCheck(page, 'the login');
  await page.fill('#token', token);
  await page.click('#login button[type=submit]');
  await rows(page).first().waitFor(WAIT);
  await axeCheck(page, 'the list');

  // Times in the browser's zone, named in the header, and ages.
  await page.locator('#zone', {hasText: 'times in UTC+05:30'}).waitFor(WAIT);
  const line = await page.locator(`[data-park="${doubt.id}"] .line2`)
    .textContent();
  check(line.includes(kolkata(doubt.parked_at)) &&
        /parked [0-9]+ (s|min) ago/.test(line), 'local time and age: ' + line);

  await findAndResolve(page, ctx, doubt, errors);
  await cancelAndBulk(page, syncs);
  await agent(page, approval);
  // The tabs by arrows, then the rows of the jobs list by arrows.
  await page.locator('#tab-park').focus();
  await page.keyboard.press('ArrowRight');
  await page.locator('#tab-jobs[aria-selected="true"]').waitFor(WAIT);
  await page.locator('#jobs-table a.row').first().waitFor(WAIT);
  await page.keyboard.press('ArrowDown');
  check(await page.evaluate(() => document.activeElement.closest(
    '#jobs-table') !== null), 'the down arrow goes to the first job');
  await page.click('#tab-report');
  await page.locator('[data-report="park"]').waitFor(WAIT);
  await axeCheck(page, 'the report');
  await page.click('#tab-audit');
  await page.locator('#audit table').waitFor(WAIT);
  await axeCheck(page, 'the audit trail');
  check(errors.length === 0, 'errors in the page: ' + errors.join('; '));
}

// Milliseconds from setting the search (or a filter) to the list drawn
// and painted
// and painted ("script": the page's own code alone).
async function timeInput(page, id, value, ms, name) {
  const [script, all] = await page.evaluate(([id, value]) => {
    const e = document.getElementById(id), t = performance.now();
    e.value = value;
    e.dispatchEvent(new Event(e.tagName === 'SELECT' ? 'change' : 'input'));
    const s = performance.now() - t;
    return new Promise((ok) => requestAnimationFrame(() =>
      setTimeout(() => ok([s, performance.now() - t]))));
  }, [id, value]);
  ms[name] = Math.round(all);
  ms[name + '_script'] = Math.round(script);
}

async function scaleMode(browser) {
  const n = +process.env.ITEMS;
  const ctx = await browser.newContext({viewport: {width: 1280, height: 900}});
  const page = await ctx.newPage();
  const errors = [], ms = {items: n};
  watch(page, errors);
  await page.goto(url + '/');
  await page.locator('#login').waitFor({state: 'visible', ...WAIT});
  await page.fill('#token', token);
  let t = Date.now();
  await page.click('#login button[type=submit]');
  await page.waitForFunction((n) => document.querySelectorAll(
    '#park-groups a.row').length === n, n, {timeout: 60000});
  ms.list_shown = Date.now() - t;
  ms.park_fetch = Math.round(await page.evaluate(() => performance
    .getEntriesByType('resource')
    .filter((e) => /\/v1\/park\?job_names=true$/.test(e.name))
    .map((e) => e.duration)[0]));
  await timeInput(page, 'park-q', 'night-post-0500', ms, 'search');
  check(await rows(page).count() === 1, 'the search finds one');
  await timeInput(page, 'park-q', '', ms, 'search_cleared');
  await timeInput(page, 'park-age', '3600', ms, 'filter_age');
  check(await rows(page).count() === 0, 'nothing waited an hour');
  await timeInput(page, 'park-age', '', ms, 'filter_cleared');
  check(await rows(page).count() === n, 'all shown again');
  await page.evaluate(() => document.activeElement.blur());
  t = Date.now();
  for (let i = 0; i < 10; i++) await page.keyboard.press('j');
  ms.ten_j_presses = Date.now() - t;
  t = Date.now();
  await page.keyboard.press('Enter');
  await page.locator('#detail-title', {hasText: 'Park item #'}).waitFor(WAIT);
  ms.open_item = Date.now() - t;
  await page.keyboard.press('Escape');
  await page.check('#park-select-all');
  await page.fill('#bulk-by', 'ana');
  await page.click('[data-bulk="skip"]');
  t = Date.now();
  await page.click('#bulk-yes');
  await page.locator('#bulk-outcome', {hasText: `${n} items resolved`})
    .waitFor({timeout: 120000});
  ms.bulk_skip_all = Date.now() - t;
  await page.locator('#park-groups', {hasText: 'Nothing is parked'})
    .waitFor(WAIT);
  console.log('timings_ms ' + JSON.stringify(ms));
  check(errors.length === 0, 'errors in the page: ' + errors.join('; '));
}

await run({morning: morningMode, scale: scaleMode});
