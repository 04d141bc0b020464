// Browser test of the run page's time line: a real server, a run seeded
// through the HTTP API with an hour of training (a loss metric, GPU
// samples of 4 GPUs linked to the run, checkpoint saves that completed,
// failed and were cut off, GPU health events, an idle span, 20,000 log
// lines), opened in Chromium. Screenshot: timeline.png.
//
//   cd web && node --test test/e2e/timeline.test.mjs

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { canvasInk, createExperiment, createRun, launch, logBatch, screenshot, startServer } from './harness.mjs';

let srv;
let br;
let page;
let run;
const HOUR = 3_600_000;
const now = Math.floor(Date.now() / 10_000) * 10_000;
const start = now - HOUR;

before(async () => {
  srv = await startServer();
  br = await launch();
  page = br.page;
  const exp = await createExperiment(srv, 'timeline-test');
  run = await createRun(srv, exp, 'sft-timeline', { start });
  // One step every 2 s, slower in the middle (a save that halved throughput).
  const metrics = [];
  let ts = start;
  for (let s = 1; s <= 1700; s++) {
    ts += s > 800 && s < 900 ? 4000 : 2000;
    metrics.push({ key: 'loss', value: 2 / Math.sqrt(s) + (s === 1200 ? 1.5 : 0), timestamp: ts, step: s });
  }
  await logBatch(srv, run, { metrics });
  // 4 GPUs every 10 s: busy, with an idle stretch in the last quarter.
  const samples = [];
  for (let t = start; t <= now - 10_000; t += 10_000) {
    const idle = t > now - 900_000 && t < now - 600_000;
    samples.push({ ts_ms: t, gpus: [0, 1, 2, 3].map((i) => ({ index: i, uuid: `GPU-${i}`, name: 'H100', util: idle ? 1 : 80 + ((t / 10_000 + i * 7) % 15), mem_used: (40 + i * 5) * 2 ** 30, mem_total: 80 * 2 ** 30 })) });
  }
  for (let i = 0; i < samples.length; i += 200) {
    await srv.api('POST', '/api/2.0/sextant/gpu/samples', { node: 'node-0', run_id: run, node_rank: 0, samples: samples.slice(i, i + 200) });
  }
  const ck = (k, step, at, end, outcome, extra = {}) => ({
    kind: 'checkpoint_save', key: 'save-' + k, time_ms: at, ...(end ? { end_ms: end } : { open: true }), step,
    checkpoint: { path: `/Volumes/main/ml/ckpt/run/step_${step}`, outcome, mode: 'process', staging: 'shared', blocked_ms: 900, ranks: 2, bytes: 4 * 2 ** 30, ...extra },
    severity: outcome === 'failed' ? 'error' : 'info', message: `save of step ${step}`,
  });
  await srv.api('POST', '/api/2.0/sextant/events/append', { run_id: run, events: [
    ck(1, 500, start + 1_000_000, start + 1_120_000, 'complete'),
    ck(2, 1000, start + 2_000_000, start + 2_090_000, 'failed', { error: 'shard __1_x_0.distcp did not land' }),
    ck(3, 1500, start + 3_000_000, start + 3_150_000, 'complete'),
    ck(4, 1650, start + 3_400_000, null, 'writing'),
    { kind: 'gpu_xid', severity: 'error', time_ms: start + 2_500_000, node: 'node-0', gpu: 2, message: 'Xid 79 on GPU 2 of node-0: the GPU has fallen off the bus', attrs: { xid: '79' } },
    { kind: 'gpu_throttle', severity: 'warning', time_ms: start + 1_500_000, end_ms: start + 1_800_000, node: 'node-0', gpu: 1, message: 'GPU 1 of node-0 slowed down (hw_thermal)' },
    { kind: 'idle', severity: 'warning', time_ms: now - 900_000, end_ms: now - 600_000, message: 'GPUs were idle for 5m0s' },
  ] });
  // 20,000 log lines over the hour.
  const lines = [];
  for (let i = 0; i < 20_000; i++) lines.push({ timestamp: start + Math.floor((i * HOUR) / 20_000), stream: 'stdout', text: `step ${i} tokens/s=${90000 + (i % 977)}` });
  await srv.api('POST', '/api/2.0/sextant/logs/append', { run_id: run, source: 'test', first_seq: 0, lines });
});

after(async () => {
  await br?.close();
  await srv?.stop();
});

test('the timeline draws every lane, tells what is under the pointer, and opens the log at a moment', async () => {
  await page.goto(`${srv.url}/runs/${run}?tab=timeline`);
  const tl = page.locator('[data-testid="timeline"]');
  await page.waitForSelector('[data-testid="timeline"][data-draw-ms]', { timeout: 60_000 });
  assert.equal(await tl.getAttribute('data-events'), '7');
  assert.equal(await tl.getAttribute('data-gpus'), '4');
  assert.equal(await tl.getAttribute('data-log-lines'), '20000');
  assert.ok((await canvasInk(page, '[data-testid="timeline-canvas"]')) > 20_000, 'the canvas is mostly empty');
  assert.match(await page.textContent('[data-testid="timeline-status"]'), /7 events · 4 GPUs · 20000 log lines/);
  await screenshot(page, 'timeline');

  // Hover the completed save of step 500 (the checkpoints lane is the third).
  const box = await page.locator('[data-testid="timeline-canvas"]').boundingBox();
  const xOf = (t) => box.x + 110 + ((t - start) / (now - start)) * (box.width - 110 - 12);
  const yCk = box.y + 22 + 54 + 6 + 64 + 6 + 15;
  await page.mouse.move(xOf(start + 1_060_000), yCk);
  const tip = page.locator('.timeline-tip');
  await tip.waitFor({ state: 'visible' });
  const text = await tip.textContent();
  assert.match(text, /save step 500: complete, blocked 900 ms, upload 1m 59s, 4\.00 GiB \(process\/shared\)/, text);
  await page.mouse.move(xOf(start + 2_045_000), yCk);
  assert.match(await tip.textContent(), /save step 1000: failed.*did not land/);

  // A click on the save opens the log where it started.
  await page.mouse.click(xOf(start + 1_060_000), yCk);
  await page.waitForURL(/tab=logs&line=\d+/, { timeout: 10_000 });
  const line = Number(new URL(page.url()).searchParams.get('line'));
  const want = Math.floor((1_000_000 * 20_000) / HOUR); // the line logged when the save began
  assert.ok(Math.abs(line - want) <= 4096, `opened line ${line}, want about ${want}`);
  // The logs tab shows that line, highlighted.
  const hit = page.locator('.logs .hit').first();
  await hit.waitFor({ timeout: 20_000 });
  assert.match(await hit.textContent(), new RegExp(`step ${line - 1} `));
  await screenshot(page, 'timeline-opens-log');
  assert.ok(br.problems.length === 0, br.problems.join('\n'));
});

test('drag zooms, double-click shows the whole run again', async () => {
  await page.goto(`${srv.url}/runs/${run}?tab=timeline`);
  await page.waitForSelector('[data-testid="timeline"][data-draw-ms]', { timeout: 60_000 });
  const box = await page.locator('[data-testid="timeline-canvas"]').boundingBox();
  await page.mouse.move(box.x + 400, box.y + 60);
  await page.mouse.down();
  await page.mouse.move(box.x + 600, box.y + 60, { steps: 5 });
  await page.mouse.up();
  await page.waitForSelector('[data-testid="timeline"][data-zoom-ms]');
  const zoomMs = Number(await page.getAttribute('[data-testid="timeline"]', 'data-zoom-ms'));
  assert.ok(zoomMs < 200, `zoom redraw took ${zoomMs} ms`);
  await screenshot(page, 'timeline-zoomed');
  await page.mouse.dblclick(box.x + 500, box.y + 60);
});

test('the GPU tab lists the run\'s GPU health events', async () => {
  await page.goto(`${srv.url}/runs/${run}?tab=gpu`);
  const list = page.locator('[data-testid="gpu-health"]');
  await list.locator('table').waitFor({ timeout: 30_000 });
  const rows = await list.locator('tbody tr').allTextContents();
  assert.equal(rows.length, 2, rows.join('\n'));
  assert.match(rows[0], /throttle.*slowed down \(hw_thermal\) \(for 5m 0s\)/);
  assert.match(rows[1], /xid.*Xid 79/);
  await screenshot(page, 'gpu-health');
});
