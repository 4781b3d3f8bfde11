/**
 * Limits of the tests' waits, scaled to how loaded the machine is. No dependencies: test support of any
 * kind (process and browser helpers, the OTLP receiver, action targets) imports it.
 */
import os from "node:os";
import type { Browser } from "playwright-core";

/**
 * How much slower than an idle machine this one runs tests: PLATFORM_TEST_TIME_SCALE when set (a number
 * ≥ 1), else the current 1-minute load average per core, at least 1 and at most 8 (read at each call, so
 * a wait that starts while the suite has loaded the machine gets a longer limit). Limits on waits for
 * events (a process printing its URL, a message arriving, a page showing) are multiplied by it, so a
 * loaded laptop waits longer instead of failing; tests never assert that something was fast.
 */
export function testTimeScale(): number {
  const set = Number(process.env.PLATFORM_TEST_TIME_SCALE);
  if (Number.isFinite(set) && set > 0) return Math.max(1, set);
  const perCore = os.loadavg()[0] / Math.max(1, os.availableParallelism());
  return Math.min(8, Math.max(1, perCore));
}

/** `ms` scaled by `testTimeScale()`: the limit of a wait for an event, generous on a loaded machine. */
export function testTime(ms: number): number {
  return Math.round(ms * testTimeScale());
}

/**
 * `browser`, whose contexts (also those `newPage` makes) wait for pages, elements and navigations up to
 * Playwright's 30 s scaled by `testTime`, instead of 30 s on any machine.
 */
export function withScaledTimeouts(browser: Browser): Browser {
  const newContext = browser.newContext.bind(browser);
  browser.newContext = async (options) => {
    const context = await newContext(options);
    context.setDefaultTimeout(testTime(30_000));
    return context;
  };
  return browser;
}
