// lib.mjs: what the browser tests of the page share (park_view.mjs,
// morning.mjs): Debian's headless Chromium driven over the DevTools
// protocol by playwright-core, the API as a program sees it, and the
// checks. A script calls run({mode: fn, ...}) with its modes; the mode
// is its first argument. It exits 0 when every check held; otherwise it
// prints what did not, with what the page showed, and exits 1.
import {chromium} from 'playwright-core';

export const url = process.env.STEPQ_URL;
export const token = process.env.STEPQ_TOKEN || '';
export const WAIT = {timeout: 15000};

export function check(ok, what) {
  if (!ok) throw new Error('check failed: ' + what);
}

// The API as a program sees it (not through the page).
export async function api(method, path, body, withToken) {
  const r = await fetch(url + path, {
    method,
    headers: {Authorization: 'Bearer ' + (withToken || token),
              'Content-Type': 'application/json'},
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return {status: r.status, json: await r.json()};
}

export async function login(page, withToken, path) {
  await page.goto(url + (path || '/'));
  await page.locator('#login').waitFor({state: 'visible', ...WAIT});
  await page.fill('#token', withToken);
  await page.click('#login button[type=submit]');
}

// Nothing on a phone's width needs scrolling sideways (clientWidth: on
// a phone, innerWidth grows with the content as the page zooms out).
export async function fitsWidth(page) {
  return page.evaluate(() => document.documentElement.scrollWidth <=
                             document.documentElement.clientWidth);
}

let lastPage = null; /* the page watched last, described on a failure */

// Errors of the page: its scripts', the console's and the policy's (a
// refused inline script or style), but not the answers the test asks for:
// the 401 of a wrong token and the 409 of a lost race.
export function watch(page, errors) {
  lastPage = page;
  page.on('pageerror', (e) => {
    console.log('page error: ' + e.message + '\n' + e.stack);
    errors.push(e.message);
  });
  page.on('console', (m) => {
    if (m.type() === 'error' && !/status of (401|409)/.test(m.text()))
      errors.push(m.text());
  });
}

// The page a failure describes (watch sets it too).
export function describe(page) {
  lastPage = page;
}

export async function run(modes) {
  const mode = process.argv[2];
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
  });
  let rc = 0;
  try {
    if (!modes[mode]) throw new Error('no mode "' + mode + '"');
    await modes[mode](browser);
    console.log(mode + ': ok');
  } catch (e) {
    console.log(mode + ': ' + e.message);
    if (lastPage)
      console.log('the page at ' + lastPage.url() + ' shows: ' +
        (await lastPage.locator('body').innerText().catch(() => ''))
          .replace(/\s+/g, ' ').slice(0, 600));
    rc = 1;
  } finally {
    await browser.close();
  }
  process.exit(rc);
}
