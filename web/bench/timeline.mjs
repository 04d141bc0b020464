// The run page's time line, benchmarked: a real server built from this
// tree, a 24-hour run seeded through the HTTP API (one GPU sample every
// 10 s for 8 GPUs, 50 checkpoint saves, 1,000 events, 1,000,000 log lines,
// a loss and three other metrics logged every second: four metric lanes),
// the timeline opened in Debian's Chromium three times. Prints one JSON
// object.
//
//   cd web && node bench/timeline.mjs
//
// draw_ms is from the component's creation to its first complete drawing
// (fetching the events, the GPU series, the log density and the metrics,
// then drawing every lane); page_ms is the same moment from the start of
// the page's navigation; render_ms the drawing alone; zoom_ms a redraw
// after a zoom. Target (issue 18): drawn under 500 ms.

import { createExperiment, createRun, launch, startServer } from '../test/e2e/harness.mjs';

const DAY = 86_400_000;
const LOG_LINES = Number(process.env.SEXTANT_BENCH_LOG_LINES ?? 1_000_000);
const log = (...a) => console.error('[bench]', ...a);

const srv = await startServer({ extraArgs: ['--gpu-retention', '25h', '--idle-for', '0', '--stall-for', '0'] });
const br = await launch();
const page = br.page;
const out = { machine: { cpus: (await import('node:os')).cpus().length } };
try {
  const now = Math.floor(Date.now() / 10_000) * 10_000;
  const start = now - DAY;
  let t = Date.now();
  const exp = await createExperiment(srv, 'bench-timeline');
  const run = await createRun(srv, exp, 'day-long', { start });
  // The loss and three more metrics, every second (86,400 points each):
  // the timeline's four metric lanes by default.
  const KEYS = ['loss', 'grad_norm', 'lr', 'tokens_per_s'];
  for (let s0 = 0; s0 < 86_400; s0 += 250) {
    const metrics = [];
    for (let s = s0; s < s0 + 250; s++) {
      const v = [2 / Math.sqrt(s + 1), 1 + Math.sin(s / 500), 1e-3 * Math.min(1, s / 3000), 90_000 + (s % 977)];
      KEYS.forEach((key, i) => metrics.push({ key, value: v[i], timestamp: start + s * 1000, step: s }));
    }
    await srv.api('POST', '/api/2.0/mlflow/runs/log-batch', { run_id: run, metrics });
  }
  log(`metric in ${Date.now() - t} ms`);
  t = Date.now();
  // 8 GPUs every 10 s for 24 h: 8,640 samples.
  for (let ts0 = start; ts0 < now; ts0 += 200 * 10_000) {
    const samples = [];
    for (let ts = ts0; ts < Math.min(now, ts0 + 200 * 10_000); ts += 10_000) {
      samples.push({ ts_ms: ts, gpus: Array.from({ length: 8 }, (_, i) => ({ index: i, uuid: `GPU-${i}`, name: 'H100', util: 70 + ((ts / 10_000 + i * 13) % 25), mem_used: (50 + i) * 2 ** 30, mem_total: 80 * 2 ** 30, temp: 70, power: 600, power_limit: 700 })) });
    }
    await srv.api('POST', '/api/2.0/sextant/gpu/samples', { node: 'node-0', run_id: run, node_rank: 0, samples });
  }
  log(`GPU samples in ${Date.now() - t} ms`);
  t = Date.now();
  // 50 checkpoint saves and 950 other events: 1,000.
  const events = [];
  for (let k = 0; k < 50; k++) {
    const at = start + (k + 0.5) * (DAY / 50);
    events.push({ kind: 'checkpoint_save', key: `save-${k}`, time_ms: Math.round(at), end_ms: Math.round(at + 120_000), step: k * 1700,
      checkpoint: { path: `/Volumes/main/ml/ckpt/run/step_${k * 1700}`, outcome: k % 17 === 5 ? 'failed' : 'complete', mode: 'process', staging: 'shared', blocked_ms: 800, ranks: 8, bytes: 40 * 2 ** 30 } });
  }
  const kinds = ['gpu_xid', 'gpu_throttle', 'gpu_ecc', 'note', 'idle', 'resume'];
  for (let k = 0; k < 950; k++) {
    const kind = kinds[k % kinds.length];
    const at = Math.round(start + (k / 950) * DAY);
    const span = kind === 'gpu_throttle' || kind === 'idle';
    events.push({ kind, key: `ev-${k}`, time_ms: at, ...(span ? { end_ms: at + 60_000 } : {}), severity: kind === 'gpu_xid' ? 'error' : 'warning', gpu: k % 8, node: 'node-0', message: `${kind} ${k}` });
  }
  for (let i = 0; i < events.length; i += 500) await srv.api('POST', '/api/2.0/sextant/events/append', { run_id: run, events: events.slice(i, i + 500) });
  log(`events in ${Date.now() - t} ms`);
  t = Date.now();
  const CH = 50_000;
  for (let first = 0; first < LOG_LINES; first += CH) {
    const lines = [];
    for (let i = first; i < Math.min(LOG_LINES, first + CH); i++) lines.push({ timestamp: start + Math.floor((i * DAY) / LOG_LINES), stream: 'stdout', text: `step=${i} loss=${(1 / (i + 1)).toFixed(6)} tokens/s=${90000 + (i % 977)}` });
    await srv.api('POST', '/api/2.0/sextant/logs/append', { run_id: run, source: 'bench', first_seq: first, lines });
  }
  log(`${LOG_LINES} log lines in ${Date.now() - t} ms`);
  await srv.api('POST', '/api/2.0/mlflow/runs/update', { run_id: run, status: 'FINISHED', end_time: now });

  const draws = [];
  for (let k = 0; k < 4; k++) {
    await page.goto('about:blank');
    await page.goto(`${srv.url}/runs/${run}?tab=timeline`);
    await page.waitForSelector('[data-testid="timeline"][data-draw-ms]', { timeout: 120_000 });
    const at = await page.evaluate(() => (window.__sextantPerf ?? []).find((e) => e.name === 'timeline-draw')?.at);
    const a = (n) => page.getAttribute('[data-testid="timeline"]', n).then(Number);
    draws.push({ draw_ms: await a('data-draw-ms'), fetch_ms: await a('data-fetch-ms'), render_ms: await a('data-render-ms'), page_ms: Math.round(at),
      fetch_done_ms: JSON.parse(await page.getAttribute('[data-testid="timeline"]', 'data-fetch-each')),
      events: await a('data-events'), gpus: await a('data-gpus'), log_lines: await a('data-log-lines') });
  }
  draws.shift(); // the first opens a cold page cache and connection
  const box = await page.locator('[data-testid="timeline-canvas"]').boundingBox();
  await page.mouse.move(box.x + 500, box.y + 60);
  await page.mouse.down();
  await page.mouse.move(box.x + 700, box.y + 60, { steps: 5 });
  await page.mouse.up();
  await page.waitForSelector('[data-testid="timeline"][data-zoom-ms]');
  const zoom = Number(await page.getAttribute('[data-testid="timeline"]', 'data-zoom-ms'));
  const best = Math.min(...draws.map((d) => d.draw_ms));
  const metricLanes = JSON.parse(await page.getAttribute('[data-testid="timeline"]', 'data-metrics'));
  out.timeline = { run_hours: 24, gpus: 8, gpu_samples: 8640, checkpoints: 50, events: events.length, log_lines: LOG_LINES, metric_keys: KEYS.length, metric_lanes: metricLanes, metric_points: 86_400 * KEYS.length,
    rounds: draws, zoom_redraw_ms: zoom, target_draw_ms: 500, ok: Math.max(...draws.map((d) => d.draw_ms)) < 500, best_draw_ms: best };
  out.problems = br.problems;
} finally {
  await br.close();
  await srv.stop();
}
console.log(JSON.stringify(out, null, 2));
