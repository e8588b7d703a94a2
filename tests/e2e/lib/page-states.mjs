// Record what a page shows as it changes, for tests that check its states tell the truth (the
// empty conversation's line, disabled buttons, progress rows): a MutationObserver, installed
// before the page's own scripts run, keeps each distinct snapshot in window.__states.
//
//   await recordStates(page, { status: ['[data-testid=app]', 'data-status'], empty: ['[data-testid=messages-empty]', 'text'] });
//   await page.goto(url); ...
//   const states = await recordedStates(page);   // [{status: 'idle', empty: '…'}, {status: 'loading', …}, …]

/**
 * ``probes``: {name: [selector, what, all?]}; what is 'text' (textContent), '?attr' (whether
 * the attribute is present, e.g. '?disabled') or attribute names joined by '|' (their values
 * joined by a space); all: every matching element, as a list. A missing element reads null.
 */
export async function recordStates(page, probes) {
  await page.addInitScript((list) => {
    window.__states = [];
    const value = (el, what) => {
      if (what === 'text') return el.textContent;
      if (what.startsWith('?')) return el.hasAttribute(what.slice(1));
      return what.split('|').map((a) => el.getAttribute(a)).join(' ');
    };
    const read = () => {
      const snap = {};
      for (const [name, [selector, what, all]] of Object.entries(list)) {
        if (all) {
          snap[name] = [...document.querySelectorAll(selector)].map((el) => value(el, what));
        } else {
          const el = document.querySelector(selector);
          snap[name] = el ? value(el, what) : null;
        }
      }
      const last = window.__states.at(-1);
      if (!last || JSON.stringify(last) !== JSON.stringify(snap)) window.__states.push(snap);
    };
    const start = () => {
      read();
      new MutationObserver(read).observe(document.documentElement, { subtree: true, childList: true, characterData: true, attributes: true });
    };
    if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start);
    else start();
  }, probes);
}

/** The snapshots recorded so far (recordStates). */
export function recordedStates(page) {
  return page.evaluate(() => window.__states);
}

/** Requests to a model bundle's folder (/models/<bundle>/…; index.json, the list, is not one)
 * made by ``context``'s pages and their workers, gathered in the returned list. */
export function watchModelRequests(context) {
  const seen = [];
  context.on('request', (request) => {
    const { pathname } = new URL(request.url());
    if (/^\/models\/[^/]+\//.test(pathname)) seen.push(pathname);
  });
  return seen;
}
