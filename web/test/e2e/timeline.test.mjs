// Browser test of the run page's time line: a real server, a run seeded
// through the HTTP API with an hour of training (a loss with a spike and
// four other metrics, GPU samples of 4 GPUs linked to the run, checkpoint
// saves that completed, failed and were cut off, GPU health events, an
// idle span, 20,000 log lines), opened in Chromium. Screenshots:
// timeline.png, timeline-zoomed.png, timeline-metrics-picked.png.
//
//   cd web && node --test test/e2e/timeline.test.mjs

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { canvasInk, createExperiment, createRun, finishRun, launch, logBatch, screenshot, sleep, startServer } from './harness.mjs';

let srv;
let br;
let page;
let run;
let metrics;
const HOUR = 3_600_000;
const LEFT = 110; // the lanes' labels (components/timeline.ts)
const RIGHT = 12;
const now = Math.floor(Date.now() / 10_000) * 10_000;
const start = now - HOUR;

before(async () => {
  srv = await startServer();
  br = await launch();
  page = br.page;
  const exp = await createExperiment(srv, 'timeline-test');
  run = await createRun(srv, exp, 'sft-timeline', { start });
  // One step every 2 s, slower in the middle (a save that halved throughput).
  metrics = [];
  let ts = start;
  for (let s = 1; s <= 1700; s++) {
    ts += s > 800 && s < 900 ? 4000 : 2000;
    metrics.push({ key: 'loss', value: 2 / Math.sqrt(s) + (s === 1200 ? 1.5 : 0), timestamp: ts, step: s });
    if (s % 10 === 0) {
      metrics.push({ key: 'lr', value: 1e-3 * Math.min(1, s / 300), timestamp: ts, step: s });
      metrics.push({ key: 'grad_norm', value: 1 + Math.sin(s / 50), timestamp: ts, step: s });
      metrics.push({ key: 'throughput/tokens_per_s', value: s > 800 && s < 900 ? 45_000 : 90_000, timestamp: ts, step: s });
      metrics.push({ key: 'val/acc', value: s / 2000, timestamp: ts, step: s });
    }
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

/** geometry reads where the timeline drew its lanes and which time range it shows. */
async function geometry() {
  const tl = page.locator('[data-testid="timeline"]');
  const box = await page.locator('[data-testid="timeline-canvas"]').boundingBox();
  const lanes = JSON.parse(await tl.getAttribute('data-lanes'));
  const [v0, v1] = (await tl.getAttribute('data-view')).split(',').map(Number);
  const lane = (name) => {
    const l = lanes.find((x) => x.name === name);
    assert.ok(l, `no lane ${name} in ${lanes.map((x) => x.name)}`);
    return l;
  };
  const xOf = (t) => box.x + LEFT + ((t - v0) / (v1 - v0)) * (box.width - LEFT - RIGHT);
  return { box, lanes, lane, v0, v1, xOf, yOf: (name, f = 0.5) => box.y + lane(name).y + lane(name).h * f };
}

/** colourInk counts the coloured (not grey) pixels of the canvas in a rectangle of CSS pixels relative to it. */
function colourInk(x0, y0, x1, y1) {
  return page.evaluate(([x0, y0, x1, y1]) => {
    const c = document.querySelector('[data-testid="timeline-canvas"]');
    const k = c.width / c.clientWidth;
    const d = c.getContext('2d').getImageData(Math.round(x0 * k), Math.round(y0 * k), Math.max(1, Math.round((x1 - x0) * k)), Math.max(1, Math.round((y1 - y0) * k))).data;
    let n = 0;
    for (let i = 0; i < d.length; i += 4) if (d[i + 3] > 100 && Math.max(d[i], d[i + 1], d[i + 2]) - Math.min(d[i], d[i + 1], d[i + 2]) > 60) n++;
    return n;
  }, [x0, y0, x1, y1]);
}

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

  // Hover the completed save of step 500.
  const { xOf, yOf } = await geometry();
  const yCk = yOf('checkpoints');
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

test('clicking an event (not a checkpoint) opens the log at the moment of the event', async () => {
  await page.goto(`${srv.url}/runs/${run}?tab=timeline`);
  await page.waitForSelector('[data-testid="timeline"][data-draw-ms]', { timeout: 60_000 });
  const { xOf, yOf } = await geometry();
  // The Xid error at 2,500 s: a mark in the events lane, clicked 6 px to
  // its right (still on the mark), so the log opens where the event
  // happened, not where the pointer was (some 16 s, 90 lines, later).
  const at = start + 2_500_000;
  await page.mouse.move(xOf(at) + 6, yOf('events'));
  const tip = page.locator('.timeline-tip');
  await tip.waitFor({ state: 'visible' });
  assert.match(await tip.textContent(), /gpu_xid GPU 2: Xid 79/);
  await page.mouse.click(xOf(at) + 6, yOf('events'));
  await page.waitForURL(/tab=logs&line=\d+/, { timeout: 10_000 });
  const line = Number(new URL(page.url()).searchParams.get('line'));
  // The first line logged from the event on (line n was logged at start +
  // (n-1) * 180 ms, 13,890 here), as the server's density says; the
  // timeline opens the first line of its density bucket (about 5 s, 28
  // lines) holding the event. The pointer's moment would be 90 lines on.
  const d = await srv.api('GET', `/api/2.0/sextant/logs/density?run_id=${run}&from_ms=${at}&to_ms=${at + 60_000}&buckets=1`);
  const want = d.first_lines[0];
  assert.ok(Math.abs(want - 13_890) <= 50, `the server puts the event at line ${want}`);
  assert.ok(line <= want + 2 && line >= want - 40, `opened line ${line}, want the line logged at the event, ${want}, or up to a bucket before`);
  const hit = page.locator('.logs .hit').first();
  await hit.waitFor({ timeout: 20_000 });
  assert.match(await hit.textContent(), new RegExp(`step ${line - 1} `));
  await screenshot(page, 'timeline-event-opens-log');
  assert.ok(br.problems.length === 0, br.problems.join('\n'));
});

test('the run\'s metrics are lanes on the shared time axis', async () => {
  await page.goto(`${srv.url}/runs/${run}?tab=timeline`);
  const tl = page.locator('[data-testid="timeline"]');
  await page.waitForSelector('[data-testid="timeline"][data-draw-ms]', { timeout: 60_000 });
  // A loss first, then the next keys in natural order: four lanes.
  assert.deepEqual(JSON.parse(await tl.getAttribute('data-metrics')), ['loss', 'grad_norm', 'lr', 'throughput/tokens_per_s']);
  const g = await geometry();
  assert.deepEqual(g.lanes.map((l) => l.name).slice(0, 7), ['steps/s', 'metric:loss', 'metric:grad_norm', 'metric:lr', 'metric:throughput/tokens_per_s', 'checkpoints', 'events']);
  for (const name of ['metric:loss', 'metric:grad_norm', 'metric:lr', 'metric:throughput/tokens_per_s']) {
    const l = g.lane(name);
    assert.ok((await colourInk(LEFT, l.y, g.box.width - RIGHT, l.y + l.h)) > 300, `lane ${name} has no line`);
  }
  // The loss spike at step 1200 is drawn where the time axis puts 1200's
  // timestamp: a stroke up to its height there (in the loss lane: values
  // 0.0485 to 2.0, the spike 1.558), none at that height 40 px either side.
  const spike = metrics.find((m) => m.key === 'loss' && m.step === 1200);
  const l = g.lane('metric:loss');
  const x = g.xOf(spike.timestamp) - g.box.x;
  const y = l.y + l.h - 3 - ((spike.value - 2 / Math.sqrt(1700)) / (2 - 2 / Math.sqrt(1700))) * (l.h - 6);
  assert.ok((await colourInk(x - 2, y - 2, x + 3, y + 3)) > 0, `no spike at x=${x}, y=${y}`);
  assert.equal(await colourInk(x - 42, y - 2, x - 37, y + 3), 0, 'ink at the spike\'s height 40 px before it');
  assert.equal(await colourInk(x + 38, y - 2, x + 43, y + 3), 0, 'ink at the spike\'s height 40 px after it');
  // The slow stretch (steps 801-899 took 4 s each) shows in steps/s and in the throughput lane at the same time.
  const slow = metrics.find((m) => m.key === 'loss' && m.step === 850).timestamp;
  await page.mouse.move(g.xOf(slow), g.yOf('steps/s'));
  const tip = page.locator('.timeline-tip');
  await tip.waitFor({ state: 'visible' });
  assert.match(await tip.textContent(), /0\.25 steps\/s \(from loss\)/);
  await page.mouse.move(g.xOf(slow), g.yOf('metric:throughput/tokens_per_s'));
  assert.match(await tip.textContent(), /throughput\/tokens_per_s = 45000 at step 8[0-9]0 /);
  // Pointing at the spike (points are 0.6 px apart here) names it.
  await page.mouse.move(g.xOf(spike.timestamp), g.box.y + y);
  assert.match(await tip.textContent(), /loss = 1\.5577\d* at step 1200 /);
  await page.mouse.move(g.xOf(spike.timestamp), g.yOf('metric:loss', 0.9));
  assert.match(await tip.textContent(), /loss = 0\.05\d* at step 1(19\d|20[1-9]) /, 'below the spike, on the line: a point beside it');
  assert.ok(br.problems.length === 0, br.problems.join('\n'));
});

test('the metrics shown are picked, kept for the experiment, and steps/s follows the first', async () => {
  await page.goto(`${srv.url}/runs/${run}?tab=timeline`);
  const tl = page.locator('[data-testid="timeline"]');
  await page.waitForSelector('[data-testid="timeline"][data-draw-ms]', { timeout: 60_000 });
  await page.click('[data-testid="timeline-metrics"]');
  const picker = page.locator('.timeline-picker');
  await picker.waitFor();
  assert.deepEqual(await picker.locator('label').allTextContents(), ['loss', 'grad_norm', 'lr', 'throughput/tokens_per_s', 'val/acc'], 'the chosen first, in lane order');
  await picker.locator('input[data-key="loss"]').uncheck();
  await picker.locator('input[data-key="val/acc"]').check();
  await page.keyboard.press('Escape');
  await page.mouse.click(5, 5);
  assert.equal(await picker.count(), 0, 'a click outside closes the picker');
  assert.deepEqual(JSON.parse(await tl.getAttribute('data-metrics')), ['grad_norm', 'lr', 'throughput/tokens_per_s', 'val/acc']);
  await page.waitForFunction(() => JSON.parse(document.querySelector('[data-testid="timeline"]').dataset.lanes).some((l) => l.name === 'metric:val/acc'));
  const g = await geometry();
  assert.ok(!g.lanes.some((l) => l.name === 'metric:loss'));
  const acc = g.lane('metric:val/acc');
  await page.waitForFunction(([y0, y1]) => {
    const c = document.querySelector('[data-testid="timeline-canvas"]');
    const d = c.getContext('2d').getImageData(120, y0, c.width - 140, y1 - y0).data;
    for (let i = 0; i < d.length; i += 4) if (d[i + 3] > 100 && Math.max(d[i], d[i + 1], d[i + 2]) - Math.min(d[i], d[i + 1], d[i + 2]) > 60) return true;
    return false;
  }, [acc.y, acc.y + acc.h]);
  // steps/s now comes from grad_norm (every 10 steps): the same rate.
  const slow = metrics.find((m) => m.key === 'loss' && m.step === 850).timestamp;
  await page.mouse.move(g.xOf(slow), g.yOf('steps/s'));
  const tip = page.locator('.timeline-tip');
  await tip.waitFor({ state: 'visible' });
  assert.match(await tip.textContent(), /0\.25 steps\/s \(from grad_norm\)/);
  await screenshot(page, 'timeline-metrics-picked');
  // Kept: the next page of the experiment's runs shows the same.
  await page.reload();
  await page.waitForSelector('[data-testid="timeline"][data-draw-ms]', { timeout: 60_000 });
  assert.deepEqual(JSON.parse(await tl.getAttribute('data-metrics')), ['grad_norm', 'lr', 'throughput/tokens_per_s', 'val/acc']);
  // Default puts the loss back.
  await page.click('[data-testid="timeline-metrics"]');
  await page.click('.timeline-picker button:has-text("Default")');
  assert.deepEqual(JSON.parse(await tl.getAttribute('data-metrics')), ['loss', 'grad_norm', 'lr', 'throughput/tokens_per_s']);
});

test('drag zooms every lane together and fetches the metrics of the zoomed steps; double-click shows the whole run again', async () => {
  await page.goto(`${srv.url}/runs/${run}?tab=timeline`);
  const tl = page.locator('[data-testid="timeline"]');
  await page.waitForSelector('[data-testid="timeline"][data-draw-ms]', { timeout: 60_000 });
  const box = await page.locator('[data-testid="timeline-canvas"]').boundingBox();
  const asked = [];
  page.on('request', (r) => {
    const u = new URL(r.url());
    if (u.pathname.endsWith('/get-history-bulk-interval') && u.searchParams.has('start_step')) asked.push(u.searchParams);
  });
  await page.mouse.move(box.x + 400, box.y + 60);
  await page.mouse.down();
  await page.mouse.move(box.x + 600, box.y + 60, { steps: 5 });
  await page.mouse.up();
  await page.waitForSelector('[data-testid="timeline"][data-zoom-ms]');
  const zoomMs = Number(await page.getAttribute('[data-testid="timeline"]', 'data-zoom-ms'));
  assert.ok(zoomMs < 200, `zoom redraw took ${zoomMs} ms`);
  await page.waitForSelector('[data-testid="timeline"][data-refined]', { timeout: 10_000 });
  // Each metric lane asked for the steps of the zoomed time range, and only those.
  const [v0, v1] = (await tl.getAttribute('data-view')).split(',').map(Number);
  const stepAt = (t) => metrics.filter((m) => m.key === 'loss' && m.timestamp <= t).pop()?.step ?? 0;
  assert.deepEqual(asked.map((q) => q.get('metric_key')).sort(), ['grad_norm', 'loss', 'lr', 'throughput/tokens_per_s']);
  const loss = asked.find((q) => q.get('metric_key') === 'loss');
  assert.ok(Number(loss.get('start_step')) <= stepAt(v0) && Number(loss.get('end_step')) > stepAt(v1), `asked steps ${loss.get('start_step')}-${loss.get('end_step')}, view is steps ${stepAt(v0)}-${stepAt(v1)}`);
  assert.ok(Number(loss.get('end_step')) - Number(loss.get('start_step')) < 600, 'the zoomed steps, not the whole run');
  await screenshot(page, 'timeline-zoomed');
  await page.mouse.dblclick(box.x + 500, box.y + 60);
  const [w0, w1] = (await tl.getAttribute('data-view')).split(',').map(Number);
  assert.ok(w0 <= start && w1 >= now - 60_000, 'the whole run again');
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

test('a killed attempt and its resume: the lines break at the gap, and the GPU lanes have a key', async () => {
  // Attempt 1 trains 20 min (a step every 2 s) and is killed; nothing for
  // 20 min; attempt 2 resumes from step 500 and trains 20 min more. Its
  // GPU (2 of them) report every 10 s while an attempt runs.
  const exp = await createExperiment(srv, 'timeline-gap');
  const t0 = now - HOUR;
  const gapFrom = t0 + 1_200_000;
  const gapTo = t0 + 2_400_000;
  const resumed = await createRun(srv, exp, 'resumed', { start: t0 });
  const ms = [];
  let step = 0;
  for (let t = t0 + 2000; t <= gapFrom; t += 2000) ms.push({ key: 'loss', value: 2 / Math.sqrt(++step), timestamp: t, step });
  step = 500;
  for (let t = gapTo; t <= now; t += 2000) ms.push({ key: 'loss', value: 2 / Math.sqrt(++step), timestamp: t, step });
  await logBatch(srv, resumed, { metrics: ms });
  const samples = [];
  for (let t = t0; t <= now - 10_000; t += 10_000) {
    if (t > gapFrom && t < gapTo) continue;
    samples.push({ ts_ms: t, gpus: [0, 1].map((i) => ({ index: i, uuid: `GPU-gap-${i}`, name: 'H100', util: 60 + i * 20, mem_used: (30 + i * 10) * 2 ** 30, mem_total: 80 * 2 ** 30 })) });
  }
  for (let i = 0; i < samples.length; i += 200) {
    await srv.api('POST', '/api/2.0/sextant/gpu/samples', { node: 'node-gap', run_id: resumed, node_rank: 0, samples: samples.slice(i, i + 200) });
  }
  await page.goto(`${srv.url}/runs/${resumed}?tab=timeline`);
  await page.waitForSelector('[data-testid="timeline"][data-draw-ms]', { timeout: 60_000 });
  const g = await geometry();
  // The middle of the gap, well clear of its edges: no line in any lane.
  const x0 = g.xOf(gapFrom + 120_000) - g.box.x;
  const x1 = g.xOf(gapTo - 120_000) - g.box.x;
  assert.ok(x1 - x0 > 50, `gap too narrow on screen: ${x0}..${x1}`);
  for (const name of ['steps/s', 'metric:loss', 'GPU util', 'GPU memory']) {
    const l = g.lane(name);
    assert.ok((await colourInk(LEFT, l.y, x0, l.y + l.h)) > 50, `lane ${name} has no line before the gap`);
    assert.ok((await colourInk(x1, l.y, g.box.width - RIGHT, l.y + l.h)) > 50, `lane ${name} has no line after the gap`);
    assert.equal(await colourInk(x0, l.y + 2, x1, l.y + l.h - 2), 0, `lane ${name} draws a line across the gap`);
  }
  // The key names each GPU's colour.
  const key = page.locator('[data-testid="timeline-gpu-key"]');
  assert.ok(await key.isVisible(), 'no GPU key');
  const text = await key.textContent();
  assert.match(text, /GPU 0/);
  assert.match(text, /GPU 1/);
  assert.equal(await key.locator('.swatch').count(), 2);
  await screenshot(page, 'timeline-resume-gap');
  assert.ok(br.problems.length === 0, br.problems.join('\n'));
});

test('the checkpoints tab offers Load for complete saves only, and no upload time for a save that did not land', async () => {
  await page.goto(`${srv.url}/runs/${run}?tab=checkpoints`);
  await page.waitForSelector('[data-testid=checkpoints] tr[data-state="failed"]', { timeout: 30_000 });
  const rows = await page.$$eval('[data-testid=checkpoints] tr[data-state]', (trs) => {
    const heads = [...trs[0].closest('table').querySelectorAll('thead th')].map((th) => th.textContent.trim());
    const up = heads.indexOf('Upload');
    return trs.map((tr) => ({ step: tr.dataset.step, state: tr.dataset.state, upload: tr.children[up].textContent.trim(), load: tr.querySelectorAll('button').length }));
  });
  // The complete saves' files were never written here: they show as deleted since.
  assert.deepEqual(rows.map((r) => r.state), ['writing', 'deleted', 'failed', 'deleted'], JSON.stringify(rows));
  for (const r of rows) {
    if (r.state === 'complete') assert.ok(r.load === 1 && r.upload !== '', JSON.stringify(r));
    else if (r.state === 'writing') assert.ok(r.load === 0 && r.upload === '', `a save still writing offers Load or an upload time: ${JSON.stringify(r)}`);
    else assert.ok(r.load === 0 && r.upload !== '', `a ${r.state} save offers Load or has no upload time: ${JSON.stringify(r)}`);
  }
  // A save cut off when its job was killed (closed with an end): no upload time, no Load.
  const exp = await createExperiment(srv, 'ckpt-cut-off');
  const killed = await createRun(srv, exp, 'killed', { start: now - 600_000 });
  await srv.api('POST', '/api/2.0/sextant/events/append', { run_id: killed, events: [
    { kind: 'checkpoint_save', key: 'save-cut', time_ms: now - 300_000, end_ms: now - 200_000, step: 70, severity: 'warning', message: 'cut off',
      checkpoint: { path: '/Volumes/main/ml/ckpt/killed/step_70', outcome: 'incomplete', mode: 'process', staging: 'shared', blocked_ms: 900, ranks: 2 } },
  ] });
  await finishRun(srv, killed, 'KILLED');
  await page.goto(`${srv.url}/runs/${killed}?tab=checkpoints`);
  const cut = page.locator('[data-testid=checkpoints] tr[data-step="70"][data-state="incomplete"]');
  await cut.waitFor({ timeout: 30_000 });
  assert.equal(await cut.locator('button').count(), 0, 'a cut-off save offers Load');
  assert.equal((await cut.locator('td').nth(7).textContent()).trim(), '', 'a cut-off save shows an upload time');
  await screenshot(page, 'checkpoints-incomplete');
});

/** inkExtent returns the first and last columns (fractions of the width) of a canvas with drawn pixels. */
function inkExtent(selector) {
  return page.evaluate((sel) => {
    const c = document.querySelector(sel);
    const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    let lo = Infinity;
    let hi = -Infinity;
    for (let x = 0; x < c.width; x++) {
      for (let y = 0; y < c.height; y++) {
        if (d[(y * c.width + x) * 4 + 3] > 100) {
          lo = Math.min(lo, x);
          hi = Math.max(hi, x);
          break;
        }
      }
    }
    return [lo / c.width, hi / c.width];
  }, selector);
}

test('GPU pane: a stale node is dimmed, a new node fills its sparklines, a finished run is not called live', async () => {
  const t = Date.now();
  const gpu = (i) => ({ index: i, uuid: 'GPU-x' + i, name: 'H100', util: 50 + 10 * i, mem_used: 2 ** 34, mem_total: 2 ** 36, temp: 50, power: 300, power_limit: 700 });
  const post = (node, from, to, step, extra = {}) => {
    const samples = [];
    for (let ts = from; ts <= to; ts += step) samples.push({ ts_ms: ts, gpus: [gpu(0)] });
    return srv.api('POST', '/api/2.0/sextant/gpu/samples', { node, samples, ...extra });
  };
  await post('node-old', t - HOUR, t - 600_000, 60_000); // stopped 10 minutes ago
  await post('node-new', t - 180_000, t, 10_000); // joined 3 minutes ago
  await page.goto(`${srv.url}/gpu?gpu_poll_ms=1000`);
  await page.waitForSelector('.gpu-node[data-node="node-new"] .gpu-card');
  await page.waitForSelector('.gpu-node[data-node="node-old"] .gpu-card');
  const old = page.locator('.gpu-node[data-node="node-old"]');
  assert.equal(await old.getAttribute('data-stale'), 'true');
  assert.ok(Number(await old.evaluate((el) => getComputedStyle(el).opacity)) < 0.8, 'the stale node is not dimmed');
  assert.equal(await page.getAttribute('.gpu-node[data-node="node-new"]', 'data-stale'), 'false');
  await page.waitForFunction(() => document.querySelector('.gpu-node[data-node="node-new"] .gpu-metric[data-field=util] canvas')?.width > 0);
  await sleep(100);
  const [lo, hi] = await inkExtent('.gpu-node[data-node="node-new"] .gpu-metric[data-field=util] canvas');
  assert.ok(hi - lo > 0.6, `the new node's sparkline is a sliver: columns ${lo}..${hi} of the width`);
  await screenshot(page, 'gpu-pane-stale-and-new');

  // A finished run's GPU tab: its last samples, no "Live", no polling.
  const exp = await createExperiment(srv, 'gpu-finished');
  const done = await createRun(srv, exp, 'done', { start: t - 600_000 });
  await post('node-done', t - 300_000, t - 120_000, 10_000, { run_id: done, node_rank: 0 });
  await finishRun(srv, done);
  await page.goto(`${srv.url}/runs/${done}?tab=gpu&gpu_poll_ms=300`);
  await page.waitForSelector('.gpu-node[data-node="node-done"] .gpu-card');
  const state = await page.textContent('[data-testid=gpu-state]');
  assert.doesNotMatch(state, /Live/);
  assert.match(state, /ended/);
  const polls = Number(await page.getAttribute('.gpu-pane', 'data-polls'));
  await sleep(1200);
  assert.equal(Number(await page.getAttribute('.gpu-pane', 'data-polls')), polls, 'a finished run is polled');
  await screenshot(page, 'gpu-finished-run');
});
