// The UI benchmark: a real server built from this tree, seeded through the
// HTTP API, measured in Debian's Chromium. Prints one JSON object.
//
//   cd web && node bench/run.mjs            # full size (a few minutes: seeds 20 M points, 1 M log lines)
//   SEXTANT_BENCH_STEPS=100000 SEXTANT_BENCH_LOG_LINES=100000 node bench/run.mjs   # quicker
//
// What it measures (targets from the UI issue):
//   experiment_page: first meaningful paint of an experiment with 10,000 runs (< 1000 ms)
//   chart: 20 runs of a STEPS-step metric, drawn (fetch + draw, < 300 ms) and zoom redraw (< 200 ms)
//   logs: frames per second while scrolling a 1,000,000-line log (> 30)
//   runs_table: frames per second while scrolling the 10,000 runs
//   shipped: JavaScript + CSS, gzipped (< 300 KB)

import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { createExperiment, createRun, launch, repo, sleep, startServer } from '../test/e2e/harness.mjs';

const RUNS = Number(process.env.SEXTANT_BENCH_RUNS ?? 10_000);
const STEPS = Number(process.env.SEXTANT_BENCH_STEPS ?? 1_000_000);
const CHART_RUNS = 20;
const LOG_LINES = Number(process.env.SEXTANT_BENCH_LOG_LINES ?? 1_000_000);
const log = (...a) => console.error('[bench]', ...a);

async function pool(n, total, fn) {
  let next = 0;
  await Promise.all(Array.from({ length: n }, async () => {
    while (next < total) await fn(next++);
  }));
}

function shipped() {
  const dir = join(repo, 'internal', 'ui', 'dist', 'assets');
  let gz = 0;
  let raw = 0;
  for (const f of readdirSync(dir)) {
    if (!/\.(js|css)$/.test(f)) continue;
    const b = readFileSync(join(dir, f));
    raw += b.length;
    gz += gzipSync(b, { level: 9 }).length;
  }
  return { js_css_bytes: raw, js_css_gzip_bytes: gz, target_gzip_bytes: 300 * 1024, ok: gz < 300 * 1024 };
}

/** fps scrolls el by step px per frame for ms and returns frames per second and the worst frame. */
async function scrollFps(page, selector, ms, mode) {
  return page.evaluate(
    ({ selector, ms, mode }) =>
      new Promise((resolve) => {
        const el = document.querySelector(selector);
        const frames = [];
        const t0 = performance.now();
        let last = t0;
        let i = 0;
        const tick = (t) => {
          frames.push(t - last);
          last = t;
          i++;
          if (mode === 'jump') el.scrollTop = ((i * 7919) % 1000) / 1000 * (el.scrollHeight - el.clientHeight);
          else el.scrollTop += 240;
          if (t - t0 < ms) requestAnimationFrame(tick);
          else {
            frames.shift();
            const total = frames.reduce((a, b) => a + b, 0);
            frames.sort((a, b) => a - b);
            resolve({ fps: Math.round((frames.length / total) * 1000 * 10) / 10, frames: frames.length, p95_frame_ms: Math.round(frames[Math.floor(frames.length * 0.95)] * 10) / 10, worst_frame_ms: Math.round(frames.at(-1) * 10) / 10 });
          }
        };
        requestAnimationFrame(tick);
      }),
    { selector, ms, mode },
  );
}

const perfEntry = (page, name) => page.waitForFunction((n) => (window.__sextantPerf ?? []).find((e) => e.name === n), name, { timeout: 120_000 }).then((h) => h.jsonValue());

const out = { machine: { cpus: (await import('node:os')).cpus().length }, shipped: shipped() };
const srv = await startServer();
const br = await launch();
const page = br.page;
try {
  // ---- 10,000 runs ----
  let t = Date.now();
  const exp = await createExperiment(srv, 'bench-10k-runs');
  await pool(8, RUNS, async (i) => {
    const id = await createRun(srv, exp, `run-${i}`, { start: Date.now() - i * 1000 });
    await srv.api('POST', '/api/2.0/mlflow/runs/log-batch', {
      run_id: id,
      metrics: [{ key: 'loss', value: Math.random(), timestamp: Date.now(), step: 10 }, { key: 'acc', value: Math.random(), timestamp: Date.now(), step: 10 }],
      params: [{ key: 'lr', value: String([0.1, 0.01, 0.001][i % 3]) }, { key: 'batch', value: '64' }],
    });
  });
  log(`seeded ${RUNS} runs in ${Date.now() - t} ms`);
  const fmp = [];
  for (let k = 0; k < 3; k++) {
    await page.goto('about:blank');
    await page.goto(srv.url + '/experiments/' + exp);
    const e = await perfEntry(page, 'runs-table-paint');
    fmp.push(Math.round(e.at));
  }
  await page.waitForSelector('.runs-body[data-loaded="true"]', { timeout: 120_000 });
  const all = await perfEntry(page, 'runs-table-complete');
  const tableFps = await scrollFps(page, '.runs-table', 3000, 'step');
  out.experiment_page = { runs: RUNS, first_meaningful_paint_ms: fmp, all_runs_loaded_ms: Math.round(all.at), target_ms: 1000, ok: Math.min(...fmp) < 1000 };
  out.runs_table_scroll = tableFps;

  // ---- 20 runs x STEPS steps ----
  t = Date.now();
  const cexp = await createExperiment(srv, 'bench-chart');
  const ids = [];
  for (let r = 0; r < CHART_RUNS; r++) ids.push(await createRun(srv, cexp, `big-${r}`));
  const BATCH = 1000;
  const perRun = Math.ceil(STEPS / BATCH);
  await pool(8, CHART_RUNS * perRun, async (j) => {
    const r = j % CHART_RUNS;
    const b = Math.floor(j / CHART_RUNS);
    const metrics = [];
    const ts = 1_700_000_000_000;
    for (let s = b * BATCH; s < Math.min(STEPS, (b + 1) * BATCH); s++) metrics.push({ key: 'loss', value: 2 / Math.sqrt(s + 1) + r * 0.01 + (s % 9973 === 0 ? 5 : 0), timestamp: ts + s * 50, step: s });
    await srv.api('POST', '/api/2.0/mlflow/runs/log-batch', { run_id: ids[r], metrics });
  });
  log(`seeded ${CHART_RUNS} x ${STEPS} points in ${Date.now() - t} ms`);
  const draws = [];
  const zooms = [];
  for (let k = 0; k < 3; k++) {
    await page.goto('about:blank');
    await page.goto(srv.url + '/compare?runs=' + ids.join(','));
    const sel = '.chart[data-metric="loss"]';
    await page.waitForSelector(sel + '[data-draw-ms]', { timeout: 120_000 });
    draws.push(Number(await page.getAttribute(sel, 'data-draw-ms')));
    const box = await page.locator(sel + ' .u-over').boundingBox();
    await page.mouse.move(box.x + box.width * (0.3 + 0.1 * k), box.y + 40);
    await page.mouse.down();
    await page.mouse.move(box.x + box.width * (0.4 + 0.1 * k), box.y + 40, { steps: 4 });
    await page.mouse.up();
    await page.waitForSelector(sel + '[data-zoom-ms]', { timeout: 60_000 });
    zooms.push(Number(await page.getAttribute(sel, 'data-zoom-ms')));
    if (k === 0) out.chart_points_drawn = Number(await page.getAttribute(sel, 'data-points'));
  }
  out.chart = { runs: CHART_RUNS, steps_per_run: STEPS, draw_ms: draws, zoom_redraw_ms: zooms, target_draw_ms: 300, target_zoom_ms: 200, ok: Math.min(...draws) < 300 && Math.min(...zooms) < 200 };

  // ---- 1,000,000 log lines ----
  t = Date.now();
  const lexp = await createExperiment(srv, 'bench-logs');
  const lrun = await createRun(srv, lexp, 'chatty');
  const CH = 50_000;
  for (let first = 0; first < LOG_LINES; first += CH) {
    const lines = [];
    for (let i = first; i < Math.min(LOG_LINES, first + CH); i++) {
      lines.push({ timestamp: 1_700_000_000_000 + i, stream: i % 50 === 0 ? 'stderr' : 'stdout', text: i % 100 === 0 ? `\x1b[32mepoch ${i / 100}\x1b[0m step=${i} loss=${(1 / (i + 1)).toFixed(6)} lr=3e-4` : `step=${i} loss=${(1 / (i + 1)).toFixed(6)} tokens/s=${90000 + (i % 977)}`, node: i % 2, local_rank: i % 8 });
    }
    await srv.api('POST', '/api/2.0/sextant/logs/append', { run_id: lrun, source: 'bench', first_seq: first, lines });
  }
  await srv.api('POST', '/api/2.0/mlflow/runs/update', { run_id: lrun, status: 'FINISHED', end_time: Date.now() });
  log(`seeded ${LOG_LINES} log lines in ${Date.now() - t} ms`);
  await page.goto(srv.url + '/runs/' + lrun + '?tab=logs');
  await page.waitForFunction((n) => document.querySelector('.logs')?.dataset.total === String(n), LOG_LINES, { timeout: 60_000 });
  await sleep(300);
  await page.evaluate(() => (document.querySelector('.log-list').scrollTop = 0));
  const smooth = await scrollFps(page, '.log-list', 3000, 'step');
  const jumpy = await scrollFps(page, '.log-list', 3000, 'jump');
  out.logs = { lines: LOG_LINES, scroll: smooth, random_jumps: jumpy, target_fps: 30, ok: smooth.fps > 30 && jumpy.fps > 30 };
  out.problems = br.problems;
} finally {
  await br.close();
  await srv.stop();
}
console.log(JSON.stringify(out, null, 2));
