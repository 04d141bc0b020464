// Browser test of the goodput line (docs/run.md "Throughput, MFU and
// goodput"): a real server, a finished run seeded through the HTTP API with
// ten progress steps of rank 0 of known times and the MFU params, opened in
// Chromium. The timeline's goodput lane must hold the cumulative goodput
// computed here by hand from those step times, and the run page's overview
// the goodput, MFU and throughput. Screenshot: goodput-line.png.
//
//   cd web && node --test test/e2e/goodput.test.mjs

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { canvasInk, createExperiment, createRun, launch, screenshot, startServer } from './harness.mjs';

let srv;
let br;
let page;
let run;
const start = Math.floor(Date.now() / 1000) * 1000 - 60_000;
// Step i (1..10) ends at start + 2 s × i and took 1 + 0.08 i seconds: the rest of each 2 s is not productive.
const steps = Array.from({ length: 10 }, (_, k) => ({ step: k + 1, end: start + 2000 * (k + 1), secs: 1 + 0.08 * (k + 1) }));
const LEFT = 110; // the lanes' labels (components/timeline.ts)
const RIGHT = 12;

before(async () => {
  srv = await startServer();
  br = await launch();
  page = br.page;
  const exp = await createExperiment(srv, 'goodput-test');
  run = await createRun(srv, exp, 'goodput-line', { start });
  await srv.api('POST', '/api/2.0/sextant/progress', { run_id: run, node: 'node-0', reports: steps.map((s) => (
    { rank: 0, step: s.step, time_ms: s.end, step_time_s: s.secs, samples: 16 })) });
  await srv.api('POST', '/api/2.0/mlflow/runs/log-batch', { run_id: run, params: [
    { key: 'sextant.flops_per_sample', value: '1e9' }, { key: 'sextant.peak_tflops', value: '0.001' }] });
  await srv.api('POST', '/api/2.0/mlflow/runs/update', { run_id: run, status: 'FINISHED', end_time: start + 20_000 });
});

after(async () => {
  await br?.close();
  await srv?.stop();
});

test('the timeline draws the goodput line with the hand-computed values', async () => {
  // No attempts: the wall runs from the run's start; at step k's end it is 2k s, productive the steps' sum.
  const want = steps.map((s, k) => steps.slice(0, k + 1).reduce((a, x) => a + x.secs, 0) / (2 * (k + 1)));
  const api = await srv.api('GET', `/api/2.0/sextant/goodput?run_id=${run}`);
  assert.deepEqual(api.series.map((p) => p.step), steps.map((s) => s.step));
  api.series.forEach((p, k) => assert.ok(Math.abs(p.goodput - want[k]) < 1e-9, `step ${p.step}: ${p.goodput} vs ${want[k]}`));

  await page.goto(`${srv.url}/runs/${run}?tab=timeline`);
  const tl = page.locator('[data-testid="timeline"]');
  await page.waitForSelector('[data-testid="timeline"][data-draw-ms]', { timeout: 60_000 });
  const gp = JSON.parse(await tl.getAttribute('data-goodput'));
  assert.equal(gp.points, steps.length);
  assert.ok(Math.abs(gp.last - want[want.length - 1]) < 1e-9, JSON.stringify(gp));
  assert.ok(Math.abs(gp.run - steps.reduce((a, s) => a + s.secs, 0) / 20) < 1e-9, JSON.stringify(gp));

  // The lane is there, under steps/s, and its line passes where the first and last values put it.
  const lanes = JSON.parse(await tl.getAttribute('data-lanes'));
  const names = lanes.map((l) => l.name);
  assert.equal(names[1], 'goodput', names.join(','));
  const lane = lanes[1];
  const [v0, v1] = (await tl.getAttribute('data-view')).split(',').map(Number);
  const inkAt = (t, v) => page.evaluate(([t, v, lane, v0, v1, LEFT, RIGHT]) => {
    const c = document.querySelector('[data-testid="timeline-canvas"]');
    const k = c.width / c.clientWidth;
    const x = LEFT + ((t - v0) / (v1 - v0)) * (c.clientWidth - LEFT - RIGHT);
    const y = lane.y + lane.h - 3 - v * (lane.h - 6);
    const d = c.getContext('2d').getImageData(Math.round((x - 2) * k), Math.round((y - 3) * k), Math.round(4 * k), Math.round(6 * k)).data;
    let n = 0;
    for (let i = 0; i < d.length; i += 4) if (d[i + 3] > 100 && Math.max(d[i], d[i + 1], d[i + 2]) - Math.min(d[i], d[i + 1], d[i + 2]) > 40) n++;
    return n;
  }, [t, v, lane, v0, v1, LEFT, RIGHT]);
  assert.ok((await inkAt(steps[0].end, want[0])) > 0, 'no line at the first step');
  assert.ok((await inkAt(steps[9].end, want[9])) > 0, 'no line at the last step');
  // Nowhere near the line: a value it never takes (100%).
  assert.equal(await inkAt(steps[5].end, 1), 0, 'ink where the line is not');
  assert.ok((await canvasInk(page, '[data-testid="timeline-canvas"]')) > 1000);
  await screenshot(page, 'goodput-line');

  // The tip names the value under the pointer.
  const box = await page.locator('[data-testid="timeline-canvas"]').boundingBox();
  const x = box.x + LEFT + ((steps[9].end - v0) / (v1 - v0)) * (box.width - LEFT - RIGHT);
  await page.mouse.move(x, box.y + lane.y + lane.h / 2);
  const tip = page.locator('.timeline-tip');
  await tip.waitFor({ state: 'visible' });
  const pct = (Math.round(want[9] * 1000) / 10).toFixed(1) + '%';
  assert.match(await tip.textContent(), new RegExp('goodput ' + pct.replace('.', '\\.')));
});

test('the run page shows goodput, MFU and throughput', async () => {
  await page.goto(`${srv.url}/runs/${run}`);
  const el = page.locator('[data-testid="run-goodput"]');
  await page.waitForFunction(() => !document.querySelector('[data-testid="run-goodput"]')?.textContent?.startsWith('…'), null, { timeout: 30_000 });
  const secs = steps.reduce((a, s) => a + s.secs, 0);
  const rate = (160 / secs);
  const mfu = (rate * 1e9) / (1 * 0.001e12);
  const pct = (v) => (Math.round(v * 1000) / 10).toFixed(1) + '%';
  const text = await el.textContent();
  assert.ok(text.startsWith(`${pct(secs / 20)} goodput · MFU ${pct(mfu)} · ${rate.toPrecision(3)} samples/s`), text);
  assert.match(await page.textContent('[data-testid="run-goodput-breakdown"]'), /^productive /);
});
