// A Chromium driven with nothing of DevTools enabled but what each call
// needs: the page as a user's browser runs it. Playwright enables the
// Network domain on every page it drives, and Chromium's DevTools network
// agent then keeps a copy of every response body for the inspector to
// show: after the chart benchmark's scrolls a memory dump of that renderer
// (memory-infra) had 195 MB of them in the allocator that holds them, which
// a user's tab, with no DevTools attached, does not have. The benchmark measures the tab's memory here instead.
//
// The protocol runs over --remote-debugging-pipe (file descriptors 3 and 4,
// messages ended by a NUL byte): no WebSocket, no dependency.

import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** bareBrowser starts Chromium and opens one page of width × height. */
export async function bareBrowser(executable, flags, { width = 1400, height = 900 } = {}) {
  const profile = mkdtempSync(join(tmpdir(), 'sextant-bench-bare-'));
  const proc = spawn(executable, [...flags, '--remote-debugging-pipe', `--user-data-dir=${profile}`, `--window-size=${width},${height}`, 'about:blank'], {
    stdio: ['ignore', 'ignore', 'ignore', 'pipe', 'pipe'],
  });
  const pending = new Map();
  let next = 0;
  let buf = '';
  proc.stdio[4].setEncoding('utf8');
  proc.stdio[4].on('data', (chunk) => {
    buf += chunk;
    for (let i = buf.indexOf('\0'); i >= 0; i = buf.indexOf('\0')) {
      const msg = JSON.parse(buf.slice(0, i));
      buf = buf.slice(i + 1);
      const p = msg.id !== undefined && pending.get(msg.id);
      if (!p) continue; // an event: none is enabled that matters here
      pending.delete(msg.id);
      if (msg.error) p.reject(new Error(`${p.method}: ${msg.error.message}`));
      else p.resolve(msg.result);
    }
  });
  const exited = new Promise((res) => proc.once('exit', res));
  const send = (method, params = {}, sessionId) =>
    new Promise((resolve, reject) => {
      const id = ++next;
      pending.set(id, { resolve, reject, method });
      proc.stdio[3].write(JSON.stringify({ id, method, params, ...(sessionId ? { sessionId } : {}) }) + '\0');
    });
  const { targetId } = await send('Target.createTarget', { url: 'about:blank' });
  const { sessionId } = await send('Target.attachToTarget', { targetId, flatten: true });
  const page = (method, params) => send(method, params, sessionId);
  await page('Emulation.setDeviceMetricsOverride', { width, height, deviceScaleFactor: 1, mobile: false });

  /** evaluate runs fn(arg) in the page and returns its (awaited) value. */
  async function evaluate(fn, arg) {
    const r = await page('Runtime.evaluate', { expression: `(${fn.toString()})(${JSON.stringify(arg ?? null)})`, awaitPromise: true, returnByValue: true });
    if (r.exceptionDetails) throw new Error('evaluate: ' + (r.exceptionDetails.exception?.description ?? r.exceptionDetails.text));
    return r.result.value;
  }
  return {
    profile,
    evaluate,
    /** goto navigates and waits until the document has loaded. */
    async goto(url) {
      await page('Page.navigate', { url });
      await evaluate(() => new Promise((res) => (document.readyState === 'complete' ? res() : addEventListener('load', () => res(), { once: true }))));
    },
    /** waitFor polls fn(arg) every animation frame until it returns something truthy, which it returns. */
    async waitFor(fn, arg, timeoutMs = 120_000) {
      // One expression with fn inline: the page's Content-Security-Policy
      // forbids eval, not what DevTools evaluates.
      const waiter = ({ arg, timeoutMs }) =>
        new Promise((res, rej) => {
          const t0 = performance.now();
          const tick = () => {
            const v = PROBE(arg);
            if (v) res(v);
            else if (performance.now() - t0 > timeoutMs) rej(new Error('waitFor: timed out'));
            else requestAnimationFrame(tick);
          };
          tick();
        });
      const expression = `((PROBE) => (${waiter.toString()}))(${fn.toString()})(${JSON.stringify({ arg: arg ?? null, timeoutMs })})`;
      const r = await page('Runtime.evaluate', { expression, awaitPromise: true, returnByValue: true });
      if (r.exceptionDetails) throw new Error('waitFor: ' + (r.exceptionDetails.exception?.description ?? r.exceptionDetails.text));
      return r.result.value;
    },
    collectGarbage: () => page('HeapProfiler.collectGarbage'),
    heapUsage: () => page('Runtime.getHeapUsage'),
    async close() {
      await send('Browser.close').catch(() => {});
      await Promise.race([exited, new Promise((r) => setTimeout(r, 5000))]);
      proc.kill();
      await exited;
      rmSync(profile, { recursive: true, force: true, maxRetries: 5, retryDelay: 200 });
    },
  };
}
