// The chart benchmark (issue 19): a real server built from this tree,
// filled through log-batch with large batches, measured in Debian's
// Chromium. Prints one JSON object.
//
//   cd web && node bench/charts.mjs
//
// What it measures:
//   experiment_charts: the chart view of RUNS runs × KEYS metric keys:
//     first screen of charts drawn (< 1 s), requests for it, frames per
//     second scrolling through every key (> 30), the tab's memory (< 500 MB),
//     requests per screen scrolled;
//   run_page: the same run's Metrics tab (one run, the same keys), beside it;
//   group_by: GROUP_RUNS runs in 10 groups, a GROUP_STEPS-step metric,
//     grouped by a param with bands (< 500 ms);
//   compare: the compare page of 10 of those runs, every chart on screen
//     drawn (< 1 s);
//   shipped: JavaScript + CSS, gzipped (< 300 KB).
//
// Size. The full experiment (100 runs × 3,000 keys × 10,000 steps = 3·10^9
// points) takes about an hour of both cores of the 2-core project machine
// to ingest (at the 100,000-700,000 points/s it takes in, with other work
// on the machine) and 20 GB or more of disk. By default the keys on the
// first screens (FULL_KEYS, in the board's order) have the full STEPS_FULL
// steps and the others STEPS (250: a scale factor of 1/40 on those), which
// the JSON reports. The browser gets the same points per chart either way
// (a chart of 100 runs asks 200 points per run, and a run of 250 steps
// gives them all), so scrolling and memory are those of the full size,
// and the first screen's fetches read full-size series; what is smaller is
// the server's work for the charts scrolled to. Environment:
//   SEXTANT_BENCH_RUNS (100), _KEYS (3000), _STEPS (250), _STEPS_FULL (10000),
//   _FULL_KEYS (60), _GROUP_RUNS (1000), _GROUP_STEPS (100000), _TRIES (3)

import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { CHROMIUM, CHROMIUM_FLAGS, createExperiment, createRun, launch, repo, sleep, startServer } from '../test/e2e/harness.mjs';
import { bareBrowser } from './bare.mjs';

const env = (k, d) => Number(process.env['SEXTANT_BENCH_' + k] ?? d);
const RUNS = env('RUNS', 100);
const KEYS = env('KEYS', 3000);
const STEPS = env('STEPS', 250);
const STEPS_FULL = env('STEPS_FULL', 10_000);
const FULL_KEYS = env('FULL_KEYS', 60);
const GROUP_RUNS = env('GROUP_RUNS', 1000);
const GROUP_STEPS = env('GROUP_STEPS', 100_000);
const TRIES = env('TRIES', 3);
const log = (...a) => console.error('[bench]', ...a);
const T0 = 1_700_000_000_000;

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

/** batchBody is a log-batch body of one run: keys × [from, to) steps, built as a string (JSON.stringify of objects is the filler's bottleneck). */
function batchBody(runId, keys, from, to, value) {
  const parts = [];
  for (const k of keys) {
    for (let s = from; s < to; s++) parts.push(`{"key":"${k.name}","value":${value(k.i, s)},"timestamp":${T0 + s * 1000},"step":${s}}`);
  }
  return `{"run_id":"${runId}","metrics":[${parts.join(',')}]}`;
}

const round = (v) => Number(v.toPrecision(5));
/** median of the tries: what the targets are judged on. */
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)];

/** post sends a prepared JSON body. */
async function post(srv, path, body) {
  const r = await fetch(srv.url + path, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body });
  if (!r.ok) throw new Error(`${path}: ${r.status} ${await r.text()}`);
  await r.arrayBuffer();
}

function diskBytes(dir) {
  try {
    return Number(execFileSync('du', ['-sb', dir], { encoding: 'utf8' }).split('\t')[0]);
  } catch {
    return null;
  }
}

/**
 * tabMemory is the memory of the browser's largest renderer process (the
 * tab shown): resident, and private (what Chrome's task manager calls its
 * footprint: not shared with other processes), in bytes.
 */
function tabMemory(profile) {
  let best = { rss_bytes: 0, private_bytes: 0 };
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      const cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
      if (!cmd.includes('--type=renderer') || !cmd.includes(profile)) continue;
      const roll = readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8');
      const kb = (k) => Number(new RegExp(k + ':\\s+(\\d+) kB').exec(roll)?.[1] ?? 0) * 1024;
      const m = { rss_bytes: kb('Rss'), private_bytes: kb('Private_Clean') + kb('Private_Dirty') };
      if (m.rss_bytes > best.rss_bytes) best = m;
    } catch {
      /* gone */
    }
  }
  return best;
}

/** chartsDrawn (run in the page) is, once every chart on screen has drawn, what the first screen cost; else false. */
function chartsDrawn() {
  const sc = document.querySelector('.board-scroll');
  if (!sc) return false;
  const r = sc.getBoundingClientRect();
  const vis = [...document.querySelectorAll('.board .chart')].filter((c) => {
    const b = c.getBoundingClientRect();
    return b.bottom > r.top && b.top < Math.min(r.bottom, innerHeight);
  });
  if (vis.length === 0 || !vis.every((c) => c.dataset.drawMs)) return false;
  const runs = (window.__sextantPerf ?? []).find((e) => e.name === 'runs-table-paint');
  return { ms: Math.round(performance.now()), runs_arrived_ms: runs ? Math.round(runs.at) : null, charts: vis.length, points: vis.reduce((a, c) => a + Number(c.dataset.points), 0), slowest_chart_ms: Math.max(...vis.map((c) => Number(c.dataset.drawMs))), slowest_fetch_ms: Math.max(...vis.map((c) => Number(c.dataset.fetchMs))) };
}

/** firstScreen waits until every chart on screen has drawn; returns ms since navigation start. */
async function firstScreen(page, timeout = 120_000) {
  const h = await page.waitForFunction(chartsDrawn, null, { timeout, polling: 'raf' });
  return h.jsonValue();
}

/** scrollBoard (run in the page) scrolls the board from top to bottom by px per frame; frames per second and the worst frames. */
function scrollBoard({ px, maxMs }) {
  return new Promise((resolve) => {
    const el = document.querySelector('.board-scroll');
    el.scrollTop = 0;
    const frames = [];
    const t0 = performance.now();
    let last = t0;
    const tick = (t) => {
      frames.push(t - last);
      last = t;
      el.scrollTop += px;
      const end = el.scrollTop + el.clientHeight >= el.scrollHeight - 2;
      if (!end && t - t0 < maxMs) requestAnimationFrame(tick);
      else {
        frames.shift();
        const total = frames.reduce((a, b) => a + b, 0);
        const sorted = [...frames].sort((a, b) => a - b);
        resolve({
          px_per_frame: px,
          scrolled_px: Math.round(el.scrollTop),
          screens: Math.round((el.scrollTop / el.clientHeight) * 10) / 10,
          reached_end: end,
          fps: Math.round((frames.length / total) * 1000 * 10) / 10,
          frames: frames.length,
          p95_frame_ms: Math.round(sorted[Math.floor(sorted.length * 0.95)] * 10) / 10,
          worst_frame_ms: Math.round(sorted.at(-1) * 10) / 10,
        });
      }
    };
    requestAnimationFrame(tick);
  });
}

/** cpuSeconds is the CPU time (user + system) process pid has used. */
function cpuSeconds(pid) {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(f[11]) + Number(f[12])) / 100; // utime, stime in clock ticks (100 Hz)
}

/**
 * settle waits until process pid has used under 5% of a core for 6 s (at
 * most 120 s): longer than the server's idle sweep (every 5 s, merging
 * fresh small chunks), which a 2 s window could fall between. Returns the
 * CPU seconds it used meanwhile.
 */
async function settle(pid) {
  const start = cpuSeconds(pid);
  const deadline = Date.now() + 120_000;
  for (;;) {
    const c = cpuSeconds(pid);
    await sleep(6000);
    if (cpuSeconds(pid) - c < 0.3 || Date.now() > deadline) return Math.round((cpuSeconds(pid) - start) * 10) / 10;
  }
}

/** bareRun measures the chart view at url in a browser without DevTools domains (first screens, scrolling, the tab's memory). */
async function bareRun(url, serverPid) {
  // A foreground tab laid out as Playwright's: what its own flags also ask
  // for (hidden scrollbars: the board has 3 columns at 1,400 px, not 2).
  const b = await bareBrowser(CHROMIUM, [...CHROMIUM_FLAGS, '--hide-scrollbars', '--disable-background-timer-throttling', '--disable-backgrounding-occluded-windows', '--disable-renderer-backgrounding']);
  try {
    const tries = [];
    for (let k = 0; k < TRIES; k++) {
      await b.goto('about:blank');
      const cpu0 = cpuSeconds(serverPid);
      await b.goto(url);
      tries.push({ ...(await b.waitFor(chartsDrawn)), server_cpu_ms: Math.round((cpuSeconds(serverPid) - cpu0) * 1000) });
    }
    const mem0 = tabMemory(b.profile);
    const fast = await b.evaluate(scrollBoard, { px: 240, maxMs: 120_000 });
    await sleep(1500);
    const slow = await b.evaluate(scrollBoard, { px: 25, maxMs: 20_000 });
    await sleep(1500);
    const mem1 = tabMemory(b.profile);
    const heap1 = await b.heapUsage();
    await b.collectGarbage();
    await sleep(1000);
    return {
      first_screen: tries,
      first_screen_ms: tries.map((x) => x.ms),
      scroll_all_keys_fast: fast,
      scroll_reading: slow,
      tab_memory_before_scroll: mem0,
      tab_memory_after_scroll: mem1,
      tab_memory_after_scroll_and_gc: tabMemory(b.profile),
      page_heap_after_scroll: heap1,
      page_heap_after_scroll_and_gc: await b.heapUsage(),
    };
  } finally {
    await b.close();
  }
}

async function scrollAll(page, px, maxMs = 120_000) {
  return page.evaluate(scrollBoard, { px, maxMs });
}

const out = { machine: { cpus: cpus().length }, shipped: shipped() };
const srv = await startServer({ extraArgs: ['--max-batch-metrics', '200000', '--max-batch-total', '200000', '--max-request-bytes', String(64 << 20), '--max-metric-steps-per-run', '100000000'] });
const br = await launch();
const page = br.page;
const cdp = await page.context().newCDPSession(page);
await cdp.send('Performance.enable');
const requests = [];
page.on('request', (r) => r.url().includes('get-history-bulk-interval') && requests.push(Date.now()));
try {
  // ---- fill: RUNS runs × KEYS keys ----
  let t = Date.now();
  const exp = await createExperiment(srv, 'bench-charts');
  const ids = [];
  for (let r = 0; r < RUNS; r++) ids.push(await createRun(srv, exp, `run-${String(r).padStart(3, '0')}`, { start: T0 - r * 1000 }));
  const sections = ['train', 'val', 'eval'];
  const keys = Array.from({ length: KEYS }, (_, i) => ({ i, name: `${sections[Math.floor((i * sections.length) / KEYS)]}/metric_${String(i).padStart(4, '0')}` }));
  // The board sorts sections and keys naturally: the first FULL_KEYS in that order get full length.
  const full = new Set(keys.slice(0, FULL_KEYS).map((k) => k.i));
  const value = (r) => (k, s) => round(2 / Math.sqrt(s + 1) + ((k * 7919) % 97) / 97 + r * 0.003 + 0.05 * Math.sin(s / 40 + k));
  const BATCH = 100_000;
  const jobs = [];
  for (let r = 0; r < RUNS; r++) {
    for (const group of [keys.filter((k) => full.has(k.i)), keys.filter((k) => !full.has(k.i))]) {
      if (!group.length) continue;
      const steps = full.has(group[0].i) ? STEPS_FULL : STEPS;
      const per = Math.max(1, Math.floor(BATCH / steps));
      for (let j = 0; j < group.length; j += per) jobs.push({ r, keys: group.slice(j, j + per), steps });
    }
  }
  let points = 0;
  await pool(3, jobs.length, async (j) => {
    const job = jobs[j];
    await post(srv, '/api/2.0/mlflow/runs/log-batch', batchBody(ids[job.r], job.keys, 0, job.steps, value(job.r)));
    points += job.keys.length * job.steps;
    if (j % 500 === 0) log(`filled ${j}/${jobs.length} batches, ${(points / 1e6).toFixed(0)} M points`);
  });
  for (const id of ids) await srv.api('POST', '/api/2.0/mlflow/runs/update', { run_id: id, status: 'FINISHED', end_time: T0 + STEPS_FULL * 1000 });
  const fillMs = Date.now() - t;
  log(`filled ${points} points in ${fillMs} ms`);
  out.fill = {
    runs: RUNS,
    keys: KEYS,
    full_size_keys: FULL_KEYS,
    steps_of_full_size_keys: STEPS_FULL,
    steps_of_other_keys: STEPS,
    scale_factor_of_other_keys: STEPS / STEPS_FULL,
    points,
    full_size_points: RUNS * KEYS * STEPS_FULL,
    ms: fillMs,
    points_per_s: Math.round(points / (fillMs / 1000)),
    batch_points: BATCH,
    data_dir_bytes: diskBytes(srv.dataDir),
  };
  t = performance.now();
  const search = await srv.api('POST', '/api/2.0/mlflow/runs/search', { experiment_ids: [exp], max_results: 200 });
  out.fill.runs_search_ms = Math.round(performance.now() - t);
  out.fill.runs_search_bytes = JSON.stringify(search).length;

  // The server's background work after the fill (merging, the search
  // index) is done before anything is timed.
  out.fill.server_cpu_s_while_settling = await settle(srv.pid);

  // ---- the experiment chart view of the 100 runs ----
  // First in a browser with no DevTools domain enabled (bench/bare.mjs):
  // what a user's tab costs; then driven by Playwright, which also counts
  // the requests (and keeps a copy of every response body).
  const bareFirst = await bareRun(`${srv.url}/experiments/${exp}?view=charts&first=100`, srv.pid);
  const tries = [];
  for (let k = 0; k < TRIES; k++) {
    await page.goto('about:blank');
    requests.length = 0;
    await page.goto(`${srv.url}/experiments/${exp}?view=charts&first=100`);
    const fs = await firstScreen(page);
    tries.push({ ...fs, requests: requests.length });
  }
  const mem0 = tabMemory(br.profile);
  requests.length = 0;
  const fast = await scrollAll(page, 240);
  const fastReq = requests.length;
  await sleep(1500);
  requests.length = 0;
  await page.evaluate(() => (document.querySelector('.board-scroll').scrollTop = 0));
  const slow = await scrollAll(page, 25, 20_000);
  await sleep(1500);
  const slowReq = requests.length;
  const metrics = Object.fromEntries((await cdp.send('Performance.getMetrics')).metrics.map((m) => [m.name, m.value]));
  const mem1 = tabMemory(br.profile);
  const heap1 = await cdp.send('Runtime.getHeapUsage');
  // The same after a full garbage collection of the page: what the tab
  // holds, apart from what is only waiting for the collector.
  await cdp.send('HeapProfiler.collectGarbage');
  await sleep(1000);
  const mem2 = tabMemory(br.profile);
  const heap2 = await cdp.send('Runtime.getHeapUsage');
  out.experiment_charts = {
    runs: RUNS,
    keys: KEYS,
    first_screen: tries,
    first_screen_ms: tries.map((x) => x.ms),
    target_first_screen_ms: 1000,
    scroll_all_keys_fast: { ...fast, requests: fastReq, requests_per_screen: Math.round((fastReq / Math.max(1, fast.screens)) * 10) / 10 },
    scroll_reading: { ...slow, requests: slowReq, requests_per_screen: Math.round((slowReq / Math.max(1, slow.screens)) * 10) / 10 },
    target_fps: 30,
    js_heap_used_bytes: metrics.JSHeapUsedSize,
    js_heap_total_bytes: metrics.JSHeapTotalSize,
    dom_nodes: metrics.Nodes,
    tab_memory_before_scroll: mem0,
    tab_memory_after_scroll: mem1,
    tab_memory_after_scroll_and_gc: mem2,
    page_heap_after_scroll: heap1,
    page_heap_after_scroll_and_gc: heap2,
    target_memory_bytes: 500 * 2 ** 20,
  };
  const ec = out.experiment_charts;
  // The same in a browser with no DevTools domain enabled (bench/bare.mjs):
  // what a user's tab costs. The figures above are a Playwright-driven tab's,
  // which also keeps a copy of every response body for the inspector.
  ec.measured_above_with = 'Playwright (DevTools Network domain enabled: Chromium keeps a copy of every response body)';
  ec.without_devtools = bareFirst;
  const bare = ec.without_devtools;
  ec.ok = median(bare.first_screen_ms) < 1000 && bare.scroll_all_keys_fast.fps > 30 && bare.scroll_reading.fps > 30 && bare.tab_memory_after_scroll.private_bytes < 500 * 2 ** 20;

  // ---- the run page of one of them, beside it ----
  const runTries = [];
  for (let k = 0; k < TRIES; k++) {
    await page.goto('about:blank');
    requests.length = 0;
    await page.goto(`${srv.url}/runs/${ids[0]}?tab=metrics`);
    runTries.push({ ...(await firstScreen(page)), requests: requests.length });
  }
  const runFast = await scrollAll(page, 240);
  out.run_page = { keys: KEYS, first_screen: runTries, first_screen_ms: runTries.map((x) => x.ms), scroll_all_keys_fast: runFast };

  // ---- compare 10 runs ----
  const cmp = [];
  for (let k = 0; k < TRIES; k++) {
    await page.goto('about:blank');
    requests.length = 0;
    await page.goto(`${srv.url}/compare?runs=${ids.slice(0, 10).join(',')}`);
    cmp.push({ ...(await firstScreen(page)), requests: requests.length });
  }
  out.compare = { runs: 10, keys: KEYS, steps_of_charts_on_screen: STEPS_FULL, every_chart_on_screen_drawn_ms: cmp.map((x) => x.ms), tries: cmp, target_ms: 1000, ok: median(cmp.map((x) => x.ms)) < 1000 };

  // ---- group by: GROUP_RUNS runs, 10 groups, a GROUP_STEPS-step metric ----
  t = Date.now();
  const gexp = await createExperiment(srv, 'bench-group');
  const gids = [];
  await pool(4, GROUP_RUNS, async (r) => {
    const id = await createRun(srv, gexp, `g-${r}`, { start: T0 - r * 1000 });
    gids[r] = id;
    await srv.api('POST', '/api/2.0/mlflow/runs/log-batch', { run_id: id, params: [{ key: 'lr', value: String([1, 2, 3, 5, 8, 13, 21, 34, 55, 89][r % 10] / 1000) }] });
  });
  const per = Math.min(GROUP_STEPS, 100_000);
  const gjobs = [];
  for (let r = 0; r < GROUP_RUNS; r++) for (let s = 0; s < GROUP_STEPS; s += per) gjobs.push({ r, from: s, to: Math.min(GROUP_STEPS, s + per) });
  await pool(3, gjobs.length, async (j) => {
    const { r, from, to } = gjobs[j];
    const g = r % 10;
    await post(srv, '/api/2.0/mlflow/runs/log-batch', batchBody(gids[r], [{ i: 0, name: 'train/loss' }], from, to, (_k, s) => round((1 + g * 0.2) / Math.sqrt(s / 100 + 1) + 0.02 * Math.sin(s / 500 + r))));
    if (j % 100 === 0) log(`group fill ${j}/${gjobs.length}`);
  });
  out.group_fill = { runs: GROUP_RUNS, steps: GROUP_STEPS, points: GROUP_RUNS * GROUP_STEPS, ms: Date.now() - t };
  log(`group: filled in ${out.group_fill.ms} ms`);
  const gt = [];
  for (let k = 0; k < TRIES; k++) {
    await page.goto('about:blank');
    requests.length = 0;
    await page.goto(`${srv.url}/experiments/${gexp}?view=charts&group=params.lr`);
    // Every run must have arrived before the grouped chart is the final one.
    await page.waitForFunction((n) => document.querySelector('.chart[data-metric="train/loss"]')?.dataset.runs === String(n) && document.querySelector('.chart[data-metric="train/loss"]').dataset.drawMs, GROUP_RUNS, { timeout: 120_000, polling: 'raf' });
    const v = await page.evaluate(() => {
      const c = document.querySelector('.chart[data-metric="train/loss"]');
      const e = (window.__sextantPerf ?? []).filter((x) => x.name === 'chart-draw' && x.detail === 'train/loss').at(-1);
      return { chart_draw_ms: Number(c.dataset.drawMs), fetch_ms: Number(c.dataset.fetchMs), points: Number(c.dataset.points), groups: c.querySelectorAll('.legend-item').length, from_navigation_ms: Math.round(e.at), all_runs_loaded_ms: Math.round((window.__sextantPerf ?? []).find((x) => x.name === 'runs-table-complete')?.at ?? -1) };
    });
    gt.push({ ...v, requests: requests.length });
  }
  out.group_by = { runs: GROUP_RUNS, groups: 10, steps: GROUP_STEPS, tries: gt, chart_draw_ms: gt.map((x) => x.chart_draw_ms), target_ms: 500, ok: median(gt.map((x) => x.chart_draw_ms)) < 500 };
  out.problems = br.problems;
} finally {
  await br.close();
  await srv.stop();
}
console.log(JSON.stringify(out, null, 2));
