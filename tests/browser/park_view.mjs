// park_view.mjs: the web park view of `stepq serve` in Debian's headless
// Chromium, driven over the DevTools protocol by playwright-core. Run by
// tests/test_serve_web.c, which parks two steps with a real worker run,
// starts the server, runs this and then checks the database.
//
//   STEPQ_URL=http://127.0.0.1:PORT STEPQ_TOKEN=T PARK_ID=1 RACE_ID=2 \
//     node park_view.mjs park       # a server with a token
//   STEPQ_URL=... node park_view.mjs csrf       # a server with --no-auth
//   STEPQ_URL=... STEPQ_TOKEN=T JOB_ID=4 node park_view.mjs retry
//   STEPQ_URL=... OP_TOKEN=T VIEWER_TOKEN=V PARK_ID=1 OPEN_ID=2 \
//     node park_view.mjs operators  # named operators: rita, vera
//
// Optional: CHROMIUM (default /usr/bin/chromium), SCREENSHOT and
// SCREENSHOT_PHONE (paths of PNG files to write). Exits 0 when every check
// held; otherwise prints what did not, and exits 1.
import {api, check, fitsWidth, login, run, url, watch, WAIT, token}
  from './lib.mjs';
import http from 'node:http';

async function parkMode(browser) {
  const park = process.env.PARK_ID, race = process.env.RACE_ID;
  const onTier = process.env.TIER_ID;
  const ctx = await browser.newContext({viewport: {width: 1280, height: 860}});
  const page = await ctx.newPage();
  const errors = [];
  watch(page, errors);

  // A wrong token is refused and asked for again; the right one shows
  // the items the worker parked, grouped by reason and tier.
  await login(page, 'not-the-token-0123456789');
  await page.locator('#login-error', {hasText: 'refused that token'})
    .waitFor(WAIT);
  check(await page.locator('[data-park]').count() === 0,
        'items shown with a wrong token');
  await page.fill('#token', token);
  await page.click('#login button[type=submit]');
  const row = page.locator(`[data-park="${park}"]`);
  await row.waitFor(WAIT);
  const group = page.locator('[data-group="hard_quota · no tier"]');
  check(await group.locator(`[data-park="${park}"]`).count() === 1,
        'item not in its group (hard_quota, no tier)');
  check(await group.locator('[data-park]').count() === 2,
        'both parked posts are in the group');
  check(await page.locator('[data-group="hard_quota · tier free"] ' +
                           `[data-park="${onTier}"]`).count() === 1,
        'the chat step is in its tier\'s group');
  await page.locator('[data-state="park_open"] b', {hasText: '3'})
    .waitFor(WAIT);
  await page.locator('[data-tier="free"]').waitFor(WAIT);

  // The detail: the request as sent, the error and every attempt.
  await row.click();
  await page.locator('#detail-title', {hasText: `Park item #${park}`})
    .waitFor(WAIT);
  const request = await page.locator('#detail .request').textContent();
  check(request.includes('drafted'), 'request as sent: ' + request);
  check((await page.locator('#detail .error').textContent())
          .includes('daily quota'), 'the error is shown');
  const attempts = page.locator('#detail table.history tbody tr');
  check(await attempts.count() === 1, 'one attempt in the history');
  check((await attempts.first().textContent()).includes('429'),
        'the attempt shows its 429');
  check(!(await page.locator('.pair').isVisible()),
        'an http step is offered no tier');

  // Asking who resolves; Cancel changes nothing.
  await page.fill('#resolve-by', '');
  await page.click('[data-action="skip"]');
  await page.locator('#outcome', {hasText: 'Say who you are'}).waitFor(WAIT);
  await page.fill('#resolve-by', 'ana');
  await page.click('[data-action="fail"]');
  await page.locator('#confirm-text', {hasText: `Fail job #`}).waitFor(WAIT);
  await page.click('#confirm-no');
  check(await page.locator('#confirm').isHidden(), 'cancel hides confirm');
  let r = await api('GET', `/v1/park/${park}`);
  check(r.json.state === 'open', 'cancelled resolve changed the item');

  // Done, with pasted output, who and a note.
  await page.fill('#resolve-note', 'posted by hand');
  await page.click('[data-action="done"]');
  await page.fill('#resolve-output', 'comment 123 posted by hand');
  if (process.env.SCREENSHOT)
    await page.screenshot({path: process.env.SCREENSHOT, fullPage: true});
  await page.click('#confirm-yes');
  await page.locator('#outcome', {hasText: 'resolved: done by ana'})
    .waitFor(WAIT);
  await row.waitFor({state: 'detached', ...WAIT});

  // A chat step parked on tier free, retried on tier local.
  await page.click(`[data-park="${onTier}"]`);
  await page.locator('#detail-title', {hasText: `Park item #${onTier}`})
    .waitFor(WAIT);
  check(await page.locator('.pair').isVisible(), 'a chat step gets tiers');
  await page.selectOption('#resolve-tier', 'local');
  await page.click('[data-action="retry-tier"]');
  await page.locator('#confirm-text', {hasText: 'on tier local'})
    .waitFor(WAIT);
  await page.click('#confirm-yes');
  await page.locator('#outcome', {hasText: 'resolved: retry by ana'})
    .waitFor(WAIT);

  // A race lost: another operator resolves the second item while this
  // page is asking for confirmation; the page says so.
  await page.click(`[data-park="${race}"]`);
  await page.locator('#detail-title', {hasText: `Park item #${race}`})
    .waitFor(WAIT);
  await page.click('[data-action="skip"]');
  r = await api('POST', `/v1/park/${race}/resolve`,
                {resolution: 'skip', by: 'bo'});
  check(r.status === 200, 'the other resolve: ' + r.status);
  await page.click('#confirm-yes');
  await page.locator('#outcome', {hasText: 'Not resolved'}).waitFor(WAIT);

  // The page keeps up without a reload: nothing open, in the strip too.
  await page.locator('[data-state="park_open"] b', {hasText: /^0$/})
    .waitFor(WAIT);
  await page.locator('#park-groups', {hasText: 'Nothing is parked'})
    .waitFor(WAIT);

  // The jobs list with a filter, and a job's detail.
  await page.click('#tab-jobs');
  await page.locator('#jobs-table tbody tr').first().waitFor(WAIT);
  // Done and skip on the posts, each its job's last step, ended both jobs
  // at the resolve: they are succeeded before any worker ran.
  await page.selectOption('#jobs-state', 'succeeded');
  await page.waitForFunction(() =>
    document.querySelectorAll('#jobs-table tbody tr').length === 2 &&
    document.querySelectorAll('#jobs-table tbody td.state-succeeded')
      .length === 2, null, WAIT);
  // The announce, retried on tier local, waits for a worker.
  await page.selectOption('#jobs-state', 'queued');
  await page.waitForFunction(() =>
    document.querySelectorAll('#jobs-table tbody tr').length === 1 &&
    document.querySelectorAll('#jobs-table tbody td.state-queued')
      .length === 1, null, WAIT);
  await page.locator('#jobs-table tbody tr').first().click();
  await page.locator('#detail-title', {hasText: 'Job #'}).waitFor(WAIT);

  // The morning report: nothing waits now; the two walls met (the second
  // post was held unsent by its host's wall) are its failures.
  await page.click('#tab-report');
  await page.locator('[data-report="park"]',
                     {hasText: 'Park items waiting: 0'}).waitFor(WAIT);
  await page.locator('[data-outcome="hard_quota"]',
                     {hasText: '2 × hard_quota (daily_cap)'}).waitFor(WAIT);
  await page.selectOption('#report-since', '7d');
  await page.locator('#report', {hasText: 'Jobs created: 3'}).waitFor(WAIT);
  // Money next to tokens: the drafts on the priced tier "local".
  await page.locator('[data-report="cost"]', {hasText: 'Cost: $0.0'})
    .waitFor(WAIT);
  check(await page.locator('#report th', {hasText: 'cost'}).count() >= 2,
        'the report has no cost columns');

  // On a phone: the same page, nothing wider than the screen.
  const phone = await browser.newContext({
    viewport: {width: 390, height: 844}, isMobile: true, hasTouch: true,
    deviceScaleFactor: 2});
  const p2 = await phone.newPage();
  watch(p2, errors);
  await login(p2, token);
  await p2.selectOption('#park-state', 'all');
  await p2.locator(`[data-park="${park}"]`).waitFor(WAIT);
  check(await fitsWidth(p2), 'the list is wider than a phone');
  await p2.click(`[data-park="${park}"]`);
  await p2.locator('#detail-title', {hasText: `Park item #${park}`})
    .waitFor(WAIT);
  check(await fitsWidth(p2), 'the detail is wider than a phone');
  if (process.env.SCREENSHOT_PHONE)
    await p2.screenshot({path: process.env.SCREENSHOT_PHONE});
  check(errors.length === 0, 'errors in the page: ' + errors.join('; '));
}

// A page of another site posts a job to a server without a token: the
// browser sends its Origin, and the server refuses. The test then checks
// that no job was added. The page of stepq itself works without a token.
async function csrfMode(browser) {
  const target = url + '/v1/jobs';
  const evil = http.createServer((req, res) => {
    res.setHeader('Content-Type', 'text/html');
    res.end(`<!doctype html><form id="f" method="POST" action="${target}"
      enctype="text/plain"><input name='{"name":"evil","steps":[{"name":"s",
      "request":{"messages":[]},"x":"' value='"}]}'></form>
      <script>fetch(${JSON.stringify(target)}, {method: 'POST',
        mode: 'no-cors', body: '{"name":"evil2","steps":[]}'});
      document.getElementById('f').submit();</script>`);
  });
  await new Promise((ok) => evil.listen(0, '127.0.0.1', ok));
  const ctx = await browser.newContext();
  const page = await ctx.newPage();
  const answer = page.waitForResponse((r) => r.url() === target &&
                                      r.request().method() === 'POST' &&
                                      r.request().resourceType() ===
                                        'document', WAIT);
  await page.goto(`http://127.0.0.1:${evil.address().port}/`);
  const res = await answer;
  check(res.status() === 403, 'a cross-site form post answered ' +
        res.status());
  check((await res.text()).includes('cross_site'), 'the 403 says why');
  evil.close();

  const own = await ctx.newPage();
  await own.goto(url + '/');
  await own.locator('[data-state="park_open"]').waitFor(WAIT);
  check(await own.locator('#login').isHidden(),
        'a server without a token asks for one');
}

// Named operators: the resolver rita logs in with her token; "Who" is
// her name, from GET /v1/me (nothing in localStorage), and cannot be
// changed; her resolution and the audit tab name her; logging out forgets
// the token, which another tab never had. The viewer vera may not resolve.
async function operatorsMode(browser) {
  const park = process.env.PARK_ID;
  const ctx = await browser.newContext();
  const page = await ctx.newPage();
  const errors = [];
  watch(page, errors);

  await login(page, process.env.OP_TOKEN);
  await page.locator('#whoami', {hasText: 'rita (resolver)'}).waitFor(WAIT);
  await page.click(`[data-park="${park}"]`);
  await page.locator('#detail-title', {hasText: `Park item #${park}`})
    .waitFor(WAIT);
  check(await page.inputValue('#resolve-by') === 'rita',
        'Who is not pre-filled with the operator\'s name');
  check(await page.locator('#resolve-by').evaluate((e) => e.readOnly),
        'Who can be changed');
  check(await page.evaluate(() => window.localStorage.length) === 0,
        'something was kept in localStorage');
  check(await page.evaluate(() => window.sessionStorage
    .getItem('stepq.token')) === process.env.OP_TOKEN,
        'the token is not in this tab\'s sessionStorage');
  await page.click('[data-action="skip"]');
  await page.click('#confirm-yes');
  await page.locator('#outcome', {hasText: 'resolved: skip by rita'})
    .waitFor(WAIT);
  // The item's detail, drawn again, shows its own audit row.
  await page.locator('#detail-body table', {hasText: 'park.resolve'})
    .waitFor(WAIT);

  // The audit tab shows the resolution, by her, from this address.
  await page.click('#tab-audit');
  const audit = page.locator('#audit tbody tr', {hasText: 'park.resolve'});
  await audit.waitFor(WAIT);
  check((await audit.textContent()).includes('rita'), 'audit row: who');
  check((await audit.textContent()).includes('item #' + park),
        'audit row: which item');

  // A link opened in another tab of the same browser: the item's own
  // address, without the token asked again (the open tab hands it over),
  // and still nothing in localStorage. Another browser profile (a fresh
  // context) has no tab to ask: it asks for the token.
  const other = await ctx.newPage();
  await other.goto(url + '/#/park/' + park);
  await other.locator('#detail-title', {hasText: `Park item #${park}`})
    .waitFor(WAIT);
  check(await other.locator('#login').isHidden(), 'the new tab asks again');
  check(await other.evaluate(() => window.localStorage.length) === 0,
        'the new tab kept something in localStorage');
  const stranger = await (await browser.newContext()).newPage();
  await stranger.goto(url + '/#/park/' + park);
  await stranger.locator('#login').waitFor({state: 'visible', ...WAIT});
  check(await stranger.locator('[data-park]').count() === 0,
        'items shown to a browser without the token');

  // Log out: the token is gone from the tab, and from the other tab too.
  await page.click('#logout');
  await page.locator('#login').waitFor({state: 'visible', ...WAIT});
  await other.locator('#login').waitFor({state: 'visible', ...WAIT});
  check(await other.evaluate(() => window.sessionStorage
    .getItem('stepq.token')) === null, 'the other tab kept the token');
  await other.close();
  check(await page.evaluate(() => window.sessionStorage
    .getItem('stepq.token')) === null, 'the token stayed after logout');
  check(await page.locator('#whoami').textContent() === '',
        'the name stayed after logout');
  await page.reload();
  await page.locator('#login').waitFor({state: 'visible', ...WAIT});

  // The viewer reads an open item, and is offered no resolution.
  await page.fill('#token', process.env.VIEWER_TOKEN);
  await page.click('#login button[type=submit]');
  await page.locator('#whoami', {hasText: 'vera (viewer)'}).waitFor(WAIT);
  await page.click('#tab-park'); /* the reload kept the Audit tab */
  const open = process.env.OPEN_ID;
  await page.click(`[data-park="${open}"]`);
  await page.locator('#detail-title', {hasText: `Park item #${open}`})
    .waitFor(WAIT);
  await page.locator('#read-only').waitFor({state: 'visible', ...WAIT});
  check(await page.locator('input[data-pick]').count() === 0 &&
        await page.locator('#park-select-all').isHidden(),
        'a viewer is offered a bulk selection');
  check(await page.locator('#resolve').isHidden(),
        'a viewer is offered the resolve form');
  check(errors.length === 0, 'errors in the page: ' + errors.join('; '));
}

// A failed job's detail offers Retry: who is asked for, Cancel changes
// nothing, Confirm queues it again (the test then checks the store).
async function retryMode(browser) {
  const id = process.env.JOB_ID;
  const ctx = await browser.newContext({viewport: {width: 1280, height: 860}});
  const page = await ctx.newPage();
  const errors = [];
  watch(page, errors);
  await login(page, token);
  await page.click('#tab-jobs');
  await page.selectOption('#jobs-state', 'failed');
  await page.locator('#jobs-table tbody tr', {hasText: 'nightly-digest'})
    .click(WAIT);
  await page.locator('#detail-title', {hasText: `Job #${id}`}).waitFor(WAIT);
  await page.locator('#retry-go').waitFor(WAIT);
  check(await page.locator('#resolve').isHidden(), 'a job offers resolve');
  check((await page.locator('#retry-from').textContent())
          .includes('the first step not done (send)'), 'the default step');
  await page.fill('#retry-by', '');
  await page.click('#retry-go');
  await page.locator('#outcome', {hasText: 'Say who you are'}).waitFor(WAIT);
  await page.fill('#retry-by', 'ana');
  await page.click('#retry-go');
  await page.locator('#retry-confirm-text',
                     {hasText: `Retry job #${id} from step send?`})
    .waitFor(WAIT);
  await page.click('#retry-no');
  check(await page.locator('#retry-confirm').isHidden(),
        'cancel hides confirm');
  check((await api('GET', '/v1/jobs/' + id)).json.state === 'failed',
        'cancel changed the job');
  await page.click('#retry-go');
  await page.click('#retry-yes');
  await page.locator('#outcome',
                     {hasText: `Job #${id} queued again from step send by ana`})
    .waitFor(WAIT);
  // Queued now: the page offers no retry and lists the retry, and the
  // API refuses a second.
  await page.locator('#retry-job').waitFor({state: 'hidden', ...WAIT});
  await page.locator('#detail-body .retries',
                     {hasText: 'by ana from step send (was failed: '})
    .waitFor(WAIT);
  check((await api('POST', '/v1/jobs/' + id + '/retry', {})).status === 409,
        'a second retry is refused');
  check(errors.length === 0, 'errors in the page: ' + errors.join('; '));
}

await run({park: parkMode, csrf: csrfMode, operators: operatorsMode,
           retry: retryMode});
