// The pages MLflow users live in, against a server filled by the real
// mlflow client (mlflow_ui.py under `sextant run`): the model registry and
// logged models, the experiment's chart view of a run with 3,000 metric
// keys, runs grouped by a param, the plots, compare, a run's GPU system
// metrics (samples of two 8-GPU nodes), the GPU pane's sparklines, a
// tqdm-style log shown as the terminal showed it, and the checkpoints a
// 2-rank torch job saved through VolumeWriter (tests/e2e/ckpt_job.py, in
// the ML environment). HTML and script in model
// names, tags, aliases, descriptions and run names must render as text.
//
//   cd web && SEXTANT_MLFLOW_PYTHON=~/.cache/sextant/venv/mlflow-3.17.2-.../bin/python \
//     SEXTANT_ML_PYTHON=~/.cache/sextant/venv/ml-.../bin/python node --test test/e2e/mlflow-ui.test.mjs

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import { canvasInk, createRun, finishRun, freePort, launch, mlflowPython, mlPython, repo, screenshot, sextantBin, sleep, startServer } from './harness.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const ALIAS = '<img\tsrc=x\tonerror=window.__xss=6>'; // the client refuses it; the server takes it
const RUN_NAME = '<b onmouseover="window.__xss=7">bold</b> run';

let srv;
let br;
let page;
let ids;
const enc = encodeURIComponent;
/** the messages of the dialogs (alert, confirm) any page opened: injected script that ran */
const dialogs = [];

before(async () => {
  srv = await startServer();
  const r = spawnSync(
    sextantBin(),
    ['run', '--experiment', '/Shared/ui-e2e', '--run-name', 'trainer', '--gpu-source', 'none', '--', mlflowPython(), join(here, 'mlflow_ui.py')],
    { env: { ...process.env, MLFLOW_TRACKING_URI: srv.url, MLFLOW_DISABLE_TELEMETRY: 'true', DO_NOT_TRACK: 'true' }, encoding: 'utf8', timeout: 400_000 },
  );
  const out = r.stdout + r.stderr;
  assert.equal(r.status, 0, 'sextant run with the mlflow client failed:\n' + out.slice(-4000));
  ids = JSON.parse(/^UI (\{.*\})$/m.exec(r.stdout)[1]);
  await srv.api('POST', '/api/2.0/mlflow/registered-models/alias', { name: ids.model, alias: ALIAS, version: '2' });
  br = await launch();
  page = br.page;
  page.on('dialog', (d) => {
    dialogs.push(d.message());
    void d.dismiss();
  });
  await page.addInitScript(() => {
    window.__xss = 0;
  });
});

after(async () => {
  await br?.close();
  await srv?.stop();
});

async function noXSS() {
  assert.equal(await page.evaluate(() => window.__xss), 0, 'injected script ran');
  assert.equal(await page.locator('img[src="x"]').count(), 0, 'injected HTML was rendered');
  assert.equal(await page.locator('main b[onmouseover]').count(), 0, 'injected HTML was rendered');
  assert.deepEqual(dialogs, [], 'injected script opened a dialog');
}

describe('models', () => {
  test('the registry lists the model with its aliases and tags, as text', async () => {
    await page.goto(srv.url + '/models');
    const row = page.locator('[data-testid=models] tbody tr', { hasText: 'clf' });
    await row.waitFor();
    assert.equal(await row.locator('a').first().textContent(), ids.model, 'the name, HTML included, as text');
    assert.equal(await row.locator('a').nth(1).textContent(), 'Version 2');
    const aliases = await row.locator('.chip.alias').allTextContents();
    assert.deepEqual(aliases.sort(), ['@champion → v1', `@${ALIAS} → v2`].sort());
    assert.ok((await row.locator('.chip.tag').textContent()).includes('team=<img'));
    await screenshot(page, 'models-list');
    await noXSS();
  });

  test('a model: its versions with source runs and logged models, aliases, tags', async () => {
    await page.goto(srv.url + '/models/' + enc(ids.model));
    await page.waitForSelector('[data-testid=versions] tbody tr');
    assert.equal(await page.textContent('[data-testid=model-name]'), ids.model);
    const rows = page.locator('[data-testid=versions] tbody tr');
    assert.equal(await rows.count(), 2);
    // Version 2 first, made by pyfunc-run; version 1 by the trainer, both from logged models.
    await page.waitForSelector('[data-testid=versions] a.run-link:has-text("pyfunc-run")');
    await page.waitForSelector('[data-testid=versions] a.run-link:has-text("trainer")');
    await page.waitForSelector('[data-testid=versions] a[data-model-id][href*="/models/m-"]:has-text("tiny")');
    await page.waitForSelector('[data-testid=versions] a[data-model-id]:has-text("clf")');
    assert.deepEqual(await rows.nth(1).locator('.chip.alias').allTextContents(), ['@champion']);
    assert.ok(await page.getByText(`models:/${ids.model}@champion`).isVisible());
    assert.ok(await page.locator('.description', { hasText: 'A classifier. <img' }).isVisible());
    assert.equal(await page.textContent('[data-testid=tags] tbody td:nth-child(2)'), '<img src=x onerror="window.__xss=5">');
    await screenshot(page, 'model');
    await noXSS();
  });

  test('a version: its source run, experiment by name, logged model, and files to browse', async () => {
    await page.goto(srv.url + '/models/' + enc(ids.model) + '/versions/1');
    await page.waitForSelector('a:has-text("trainer")');
    await page.waitForSelector('a[href^="/experiments/"]:has-text("/Shared/ui-e2e")');
    await page.waitForSelector(`a[href="/experiments/${ids.experiment}/models/${ids.model_id}"]:has-text("clf")`);
    // The files are the logged model's (MLflow 3 keeps them with the model, not the run).
    await page.click('.art-item[data-path="MLmodel"]');
    await page.waitForSelector('pre.art-text[data-kind=yaml]');
    assert.match(await page.textContent('pre.art-text'), /sklearn/);
    await screenshot(page, 'model-version');
    await noXSS();
  });

  test('a logged model: status, source run, registration, linked metric, files', async () => {
    await page.goto(`${srv.url}/experiments/${ids.experiment}/models/${ids.model_id}`);
    await page.waitForSelector('[data-testid=logged-model-name]:has-text("clf")');
    await page.waitForSelector('.crumbs a:has-text("/Shared/ui-e2e")');
    await page.waitForSelector('a.run-link:has-text("trainer")');
    await page.waitForSelector(`a[href="/models/${enc(ids.model)}/versions/1"]`);
    assert.ok(await page.locator('td', { hasText: 'test_acc' }).isVisible(), 'the metric logged with model_id');
    await page.click('.art-item[data-path="MLmodel"]');
    await page.waitForSelector('pre.art-text[data-kind=yaml]');
    assert.match(await page.textContent('pre.art-text'), new RegExp('model_id: ' + ids.model_id));
    await screenshot(page, 'logged-model');
    await noXSS();
  });

  test('a logged model with HTML in its name, tags and params: text on its page and its run’s', async () => {
    await page.goto(`${srv.url}/experiments/${ids.experiment}/models/${ids.hostile_model_id}`);
    await page.waitForSelector('[data-testid=logged-model-name] .status');
    assert.equal(await page.evaluate(() => document.querySelector('[data-testid=logged-model-name]').firstChild.textContent), ids.hostile_model, 'the name, as text');
    assert.equal(await page.title(), ids.hostile_model + ' · Sextant');
    const html = '<img src=x onerror="window.__xss=5">';
    assert.deepEqual(await page.$$eval('[data-testid=tags] tbody tr', (trs) => trs.filter((tr) => tr.children[0].textContent === 'html').map((tr) => tr.children[1].textContent)), [html], 'the tag, as text');
    assert.ok(await page.locator('td', { hasText: html }).count() >= 2, 'the param and the tag, as text');
    await page.waitForSelector('a.run-link:has-text("pyfunc-run")');
    await screenshot(page, 'logged-model-hostile');
    await noXSS();
    // Its run lists it (beside the tiny pyfunc model) by name, as text.
    await page.goto(`${srv.url}/runs/${ids.pyfunc}?tab=artifacts`);
    await page.waitForSelector(`[data-testid=run-models] .model-row[data-model-id="${ids.hostile_model_id}"]`);
    assert.equal(await page.textContent(`[data-testid=run-models] .model-row[data-model-id="${ids.hostile_model_id}"] a`), ids.hostile_model);
    assert.equal(await page.locator('[data-testid=run-models] .model-row').count(), 2);
    await screenshot(page, 'run-models-hostile');
    await noXSS();
  });

  test('the run that called log_model shows its model and the model’s files, not "No artifacts"', async () => {
    await page.goto(`${srv.url}/runs/${ids.trainer}?tab=artifacts`);
    await page.waitForSelector(`[data-testid=run-models] .model-row[data-model-id="${ids.model_id}"]`);
    assert.ok(await page.locator('[data-testid=run-models] .chip a', { hasText: 'clf v1' }).isVisible());
    // One model: its files are open at once.
    await page.waitForSelector('[data-testid=run-models] .art-item[data-path="MLmodel"]');
    await screenshot(page, 'run-artifacts-models');
    await page.goto(`${srv.url}/runs/${ids.trainer}`);
    await page.waitForSelector(`[data-testid=run-models] .model-row[data-model-id="${ids.model_id}"]`);
    assert.ok(await page.getByText('<img src=x onerror="window.__xss=5">', { exact: true }).first().isVisible(), 'the HTML tag value as text');
    await noXSS();
  });
});

describe('charts', () => {
  test('a run with 3,000 keys: sections, search, collapse; only the charts on screen exist and are fetched', async () => {
    const requests = [];
    const onReq = (r) => r.url().includes('get-history-bulk-interval') && requests.push(new URL(r.url()).searchParams.get('metric_key'));
    page.on('request', onReq);
    try {
      await page.goto(`${srv.url}/runs/${ids.trainer}?tab=metrics`);
      await page.waitForSelector('.board[data-charts] .chart[data-draw-ms]');
      const board = page.locator('.board');
      assert.equal(Number(await board.getAttribute('data-charts')), 2000 + 1, 'train/ and val/ keys and test_acc (system/ is its own tab)');
      assert.deepEqual(await page.locator('.board-head .board-section').allTextContents(), ['Metrics', 'train']);
      const rendered = Number(await board.getAttribute('data-rendered'));
      assert.ok(rendered > 0 && rendered <= 15, 'charts in the DOM: ' + rendered);
      await sleep(500);
      assert.ok(requests.length <= 15, 'requests for the first screen: ' + requests.length);
      await screenshot(page, 'run-metrics-3000');

      // Scroll to the end at once: the charts passed by are never fetched.
      requests.length = 0;
      await page.evaluate(() => (document.querySelector('.board-scroll').scrollTop = 1e9));
      await page.waitForSelector('.chart[data-metric="val/m_2998"][data-draw-ms]');
      assert.ok(requests.length <= 15, 'requests after the jump: ' + requests.join(', '));
      assert.ok((await canvasInk(page, '.chart[data-metric="val/m_2998"] canvas')) > 200);

      // Search narrows the board to the matching keys.
      await page.fill('.board-search', 'm_004');
      await page.waitForFunction(() => document.querySelector('.board').dataset.shown === '7');
      assert.match(await page.textContent('[data-testid=chart-count]'), /7 of 2,001 charts/);
      await page.waitForSelector('.chart[data-metric="train/m_0042"][data-draw-ms]');
      await page.fill('.board-search', '');
      await page.waitForFunction(() => document.querySelector('.board').dataset.shown === '2001');

      // Collapsing a section leaves its header only.
      await page.evaluate(() => (document.querySelector('.board-scroll').scrollTop = 0));
      const height = () => page.evaluate(() => document.querySelector('.board-spacer').offsetHeight);
      const full = await height();
      await page.click('.board-head[data-section="train"]');
      await page.waitForSelector('.board-head[data-section="train"][aria-expanded="false"]');
      // 1,000 train/ charts in rows of 3 (or fewer) are gone.
      assert.ok(full - (await height()) >= 330 * 300, `height ${full} -> ${await height()}`);
      await page.click('.board-head[data-section="train"]');
      await noXSS();
    } finally {
      page.off('request', onReq);
    }
  });

  test('the experiment chart view: the first runs of the table, every key of them', async () => {
    await page.goto(`${srv.url}/experiments/${ids.experiment}?view=charts`);
    await page.waitForSelector('.exp-charts .chart[data-draw-ms]');
    assert.match(await page.textContent('[data-testid=charts-runs]'), /first 10 runs/);
    assert.equal(await page.locator('.exp-charts .run-chips .legend-item').count(), 10);
    assert.equal(await page.getAttribute('.board', 'data-charts'), '2', 'the 10 newest are sweep runs: train/loss and val/acc');
    await page.selectOption('select[name=first-runs]', '20');
    await page.waitForFunction(() => document.querySelector('.board').dataset.charts === String(3000 + 4));
    assert.equal(await page.locator('.exp-charts .run-chips .legend-item').count(), 14);
    // (The trainer's 3,000 keys, the sweep's two, the pyfunc run's loss, test_acc.)
    await page.waitForSelector('.exp-charts .chart[data-draw-ms]');
    await screenshot(page, 'experiment-charts');
  });

  test('grouped by a param: one line per group over a band, in the chart view, its plots and compare', async () => {
    await page.goto(`${srv.url}/experiments/${ids.experiment}?view=charts&group=params.lr`);
    await page.fill('.board-search', 'train/loss');
    // The search applies after a short pause and lays the board out again: a
    // chart drawn before that is replaced, so wait for the search to apply.
    await page.waitForFunction(() => document.querySelector('.board')?.dataset.shown === '1');
    const sel = '.chart[data-metric="train/loss"]';
    await page.waitForSelector(sel + '[data-draw-ms]');
    assert.deepEqual(await page.locator(sel + ' .legend-name').allTextContents(), ['lr=0.001', 'lr=0.01', 'lr=0.1', 'lr=(none)']);
    // 4 sweep runs in each lr group; the trainer logged lr=0.01 too, without train/loss; pyfunc-run has no lr.
    assert.deepEqual(await page.locator(sel + ' .legend-group').allTextContents(), ['4 runs', '5 runs', '4 runs', '1 run']);
    assert.ok((await canvasInk(page, sel + ' canvas')) > 3000);
    await screenshot(page, 'experiment-charts-grouped');

    await page.goto(`${srv.url}/experiments/${ids.experiment}?view=plots`);
    // Every run of the experiment (none is selected): 14 lines once the runs have come.
    await page.waitForFunction(() => document.querySelector('canvas[aria-label="Parallel coordinates"]')?.dataset.lines === '14');
    assert.ok((await page.getAttribute('canvas[aria-label="Parallel coordinates"]', 'data-axes')).includes('params.lr'));
    await page.selectOption('select[aria-label="Scatter x axis"]', 'params.seed');
    await page.selectOption('select[aria-label="Scatter y axis"]', 'metrics.train/loss');
    await page.waitForFunction(() => document.querySelector('canvas[aria-label="Scatter plot"]').dataset.points === '12');
    assert.ok((await canvasInk(page, 'canvas[aria-label="Scatter plot"]')) > 500);
    // Pointing at a point names its run.
    const box = await page.locator('canvas[aria-label="Scatter plot"]').boundingBox();
    const pts = await page.evaluate(() => {
      const c = document.querySelector('canvas[aria-label="Scatter plot"]');
      const ctx = c.getContext('2d');
      const d = ctx.getImageData(0, 0, c.width, c.height).data;
      for (let y = 0; y < c.height; y++) for (let x = 80; x < c.width; x++) { const i = (y * c.width + x) * 4; if (d[i + 2] > 200 && d[i] < 80 && d[i + 3] > 200) return [x, y]; }
      return null;
    });
    assert.ok(pts, 'a point drawn');
    await page.mouse.move(box.x + pts[0] + 2, box.y + pts[1] + 2);
    await page.waitForSelector('.plot-tip:not([hidden]) strong:has-text("sweep-")');
    await screenshot(page, 'experiment-plots');

    await page.goto(`${srv.url}/compare?runs=${ids.sweep.slice(0, 10).join(',')}&group=params.lr`);
    await page.waitForSelector(sel + '[data-draw-ms]');
    assert.deepEqual(await page.locator(sel + ' .legend-name').allTextContents(), ['lr=0.001', 'lr=0.01', 'lr=0.1']);
    await noXSS();
  });

  test('compare of 10 runs draws every chart', async (t) => {
    await page.goto('about:blank');
    await page.goto(`${srv.url}/compare?runs=${[...ids.sweep.slice(0, 8), ids.trainer, ids.pyfunc].join(',')}`);
    await page.waitForSelector('.chart[data-metric="train/loss"][data-draw-ms]');
    const drawn = await page.waitForFunction(
      () => {
        const cs = [...document.querySelectorAll('.board .chart')];
        return cs.length > 0 && cs.every((c) => c.dataset.drawMs) && { ms: performance.now(), charts: cs.length };
      },
      null,
      { timeout: 60_000, polling: 'raf' },
    );
    // Loose, for a loaded 2-core CI machine (the benchmark's target is 1 s):
    // the regression it catches left two of three charts loading after 10 s.
    const { ms, charts } = await drawn.jsonValue();
    t.diagnostic(`${charts} charts drawn ${Math.round(ms)} ms after navigation`);
    assert.ok(charts >= 3, 'charts on screen: ' + charts);
    assert.ok(ms < 10_000, `every chart on screen drawn ${Math.round(ms)} ms after navigation (bound 10 s)`);
    await page.waitForSelector('a:has-text("/Shared/ui-e2e")');
    await screenshot(page, 'compare-10');
  });
});

describe('system metrics and the GPU pane', () => {
  test('one chart per GPU field and node with a line per GPU; sparklines use their width', async () => {
    const run = await createRun(srv, ids.experiment, RUN_NAME);
    const now = Date.now();
    for (const [node, rank] of [['node-a', 0], ['node-b', 1]]) {
      const samples = [];
      for (let t = now - 10 * 60_000; t <= now; t += 15_000) {
        samples.push({ ts_ms: t, gpus: Array.from({ length: 8 }, (_, i) => ({ index: i, uuid: `GPU-${node}-${i}`, name: 'Simulated H100', util: 50 + 40 * Math.sin(t / 60_000 + i), mem_used: (20 + i) * 2 ** 30, mem_total: 80 * 2 ** 30, temp: 50 + i, power: 300 + 10 * i, power_limit: 700 })) });
      }
      await srv.api('POST', '/api/2.0/sextant/gpu/samples', { node, run_id: run, node_rank: rank, num_nodes: 2, samples });
    }
    await page.goto(`${srv.url}/runs/${run}?tab=system`);
    await page.waitForSelector('.chart[data-metric="system/node_1/gpu_*_utilization_percentage"][data-draw-ms]');
    // 6 fields × 2 nodes, not 6 × 16.
    assert.equal(await page.getAttribute('.board', 'data-charts'), '12');
    assert.deepEqual(await page.locator('.board-head .board-section').allTextContents(), ['GPUs · node_0', 'GPUs · node_1']);
    const legend = await page.locator('.chart[data-metric="system/node_1/gpu_*_utilization_percentage"] .legend-name').allTextContents();
    assert.deepEqual(legend, Array.from({ length: 8 }, (_, i) => `node_1 GPU ${i}`));
    assert.ok(await page.locator('h1', { hasText: RUN_NAME }).isVisible(), 'the run name, HTML included, as text');
    await screenshot(page, 'run-system-gpus');

    // 10 minutes of history: the sparkline starts at its left edge, not squeezed to the right.
    await page.goto(`${srv.url}/runs/${run}?tab=gpu&gpu_poll_ms=60000`);
    const spark = '.gpu-node[data-node="node-a"] .gpu-card[data-gpu="0"] .gpu-metric[data-field=util] canvas';
    await page.waitForSelector(spark);
    await sleep(300);
    const left = await page.evaluate((sel) => {
      const c = document.querySelector(sel);
      const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
      for (let x = 0; x < c.width; x++) for (let y = 0; y < c.height; y++) if (d[(y * c.width + x) * 4 + 3] > 0) return x / c.width;
      return 1;
    }, spark);
    assert.ok(left < 0.05, 'the line starts at ' + Math.round(left * 100) + '% of the width');
    assert.match(await page.textContent('[data-testid=gpu-span]'), /last 10m/);
    await screenshot(page, 'run-gpu-short-history');
    await finishRun(srv, run);
    await noXSS();
  });
});

describe('logs', () => {
  test('a tqdm-style log shows as the terminal did, raw on request; Follow is off for a finished run; Download', async () => {
    await page.goto(`${srv.url}/runs/${ids.trainer}?tab=logs`);
    await page.waitForSelector('.log-line[data-line]');
    await page.evaluate(() => (document.querySelector('.log-list').scrollTop = 0));
    await sleep(200);
    const shown = await page.locator('.log-line .lt').allTextContents();
    for (let e = 0; e < 3; e++) assert.ok(shown.includes(`epoch ${e}: 100%|##########| 100/100`), 'the last redraw of epoch ' + e);
    assert.ok(!shown.some((t) => /\b50%\|/.test(t)), 'no intermediate redraw: ' + shown.slice(0, 8).join(' / '));
    assert.ok(shown.includes('waiting for the evaluator... ready'), 'the two pieces of a line as one');
    assert.equal(await page.isChecked('input[aria-label=Follow]'), false);
    assert.equal(await page.isDisabled('input[aria-label=Follow]'), true);
    await screenshot(page, 'logs-terminal');

    const dl = page.waitForEvent('download');
    await page.click('button:has-text("Download")');
    const file = readFileSync(await (await dl).path(), 'utf8');
    const fileLines = file.split('\n');
    for (let e = 0; e < 3; e++) assert.ok(fileLines.includes(`epoch ${e}: 100%|##########| 100/100`) && fileLines.includes(`epoch ${e} loss=${(1 / (e + 1)).toFixed(3)}`), 'epoch ' + e);
    assert.ok(fileLines.includes('waiting for the evaluator... ready'));
    assert.ok(!file.includes('\r') && !file.includes(' 50/100'), 'no redraws in the terminal view');

    await page.check('input[name=raw]');
    await page.evaluate(() => (document.querySelector('.log-list').scrollTop = 0));
    await sleep(200);
    const raw = await page.locator('.log-line .lt').allTextContents();
    assert.ok(raw.includes('epoch 0:  50%|#####     | 50/100'), 'the redraws, raw');
    assert.ok((await page.locator('.log-line.cr').count()) > 5);
    await screenshot(page, 'logs-raw');
    const dl2 = page.waitForEvent('download');
    await page.click('button:has-text("Download")');
    const rawFile = readFileSync(await (await dl2).path(), 'utf8');
    assert.ok(rawFile.includes('epoch 0:  50%|#####     | 50/100\r'), 'a redraw ends with \\r: ' + JSON.stringify(rawFile.slice(0, 200)));
    assert.ok(rawFile.includes('waiting for the evaluator... ready\n'), 'pieces joined: nothing between them');
    await page.uncheck('input[name=raw]');
  });
});

/** fmtBytesKiB is the UI's size format for sizes under a GiB (web/src/lib/format.ts). */
function fmtBytesKiB(n) {
  if (n < 1024) return n + ' B';
  const [v, u] = n < 2 ** 20 ? [n / 1024, 'KiB'] : [n / 2 ** 20, 'MiB'];
  return v.toFixed(v < 10 ? 2 : 1) + ' ' + u;
}

/** fmtTime is the UI's time format, in local time (web/src/lib/format.ts); Chromium runs in this process's time zone. */
function fmtTime(ms) {
  const d = new Date(ms);
  const p = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

/** snippet is the Checkpoints tab's code to load a checkpoint and resume the run (web/src/pages/checkpoints.ts). */
function snippet(run, path) {
  return [
    'import torch.distributed.checkpoint as dcp',
    'from sextant.checkpoint import VolumeReader',
    '',
    `dcp.load(state_dict, storage_reader=VolumeReader("${path}"))`,
    '',
    '# or resume this run from it, or from its newest complete checkpoint:',
    `#   sextant run --run-id ${run} --resume "${path}" -- python train.py`,
    `#   sextant run --run-id ${run} --resume latest -- python train.py`,
    `#   path = sextant.checkpoint.latest_complete("${path.replace(/\/[^/]*$/, '')}")`,
  ].join('\n');
}

/** fmtMs is the Checkpoints tab's duration format (web/src/lib/checkpoints.ts). */
function fmtMs(v) {
  if (v < 1000) return Math.round(v) + ' ms';
  if (v < 60_000) return (v / 1000).toFixed(1) + ' s';
  const s = Math.floor(v / 1000);
  return `${Math.floor(s / 60)}m ${s % 60}s`;
}

describe('checkpoints', () => {
  const ckpt = '/Volumes/main/ml/ckpt/ui-run';
  let run;
  const cells = () => page.$$eval('[data-testid=checkpoints] tbody tr', (trs) => trs.map((tr) => [...tr.children].map((td) => td.textContent)));

  test('the checkpoints a 2-rank job saved through VolumeWriter, complete or not, linked to the volume browser', async () => {
    const UC = '/api/2.1/unity-catalog';
    await srv.api('POST', UC + '/catalogs', { name: 'main' });
    await srv.api('POST', UC + '/schemas', { catalog_name: 'main', name: 'ml' });
    await srv.api('POST', UC + '/volumes', { catalog_name: 'main', schema_name: 'ml', name: 'ckpt', volume_type: 'MANAGED' });
    const out = mkdtempSync(join(tmpdir(), 'sextant-ui-ckpt-'));
    try {
      const r = spawnSync(mlPython(), [join(repo, 'tests', 'e2e', 'ckpt_job.py'), 'save', '--world', '2', '--port', String(await freePort()), '--out', out, '--ckpt', ckpt, '--mlflow'], {
        env: { ...process.env, MLFLOW_TRACKING_URI: srv.url, MLFLOW_EXPERIMENT_ID: ids.experiment, PYTHONPATH: join(repo, 'python'), SEXTANT_STAGING_DIR: join(out, 'staging'), MLFLOW_DISABLE_TELEMETRY: 'true' },
        encoding: 'utf8',
        timeout: 300_000,
      });
      assert.equal(r.status, 0, 'the checkpoint job failed:\n' + (r.stdout + r.stderr).slice(-3000));
      run = JSON.parse(readFileSync(join(out, 'result0.json'), 'utf8')).run_id;
      // A save that did not finish, tagged as an older client did (no event): a shard, no .metadata.
      await srv.api('PUT', '/api/2.0/fs/files' + ckpt + '/step_3/__0_0.distcp', new Uint8Array(1000));
      await srv.api('POST', '/api/2.0/mlflow/runs/set-tag', { run_id: run, key: 'sextant.checkpoint.step.3', value: ckpt + '/step_3' });

      await page.goto(`${srv.url}/runs/${run}?tab=checkpoints`);
      await page.waitForSelector('[data-testid=checkpoints] tr[data-step="1"][data-state]');
      await page.waitForSelector('[data-testid=checkpoints] tr[data-step="3"][data-state]');
      const rows = await cells();
      assert.deepEqual(await page.$$eval('[data-testid=checkpoints] thead th', (ths) => ths.map((th) => th.textContent)), ['Step', 'Path', 'Saved', 'Size', 'Ranks', 'Mode', 'Blocked', 'Upload', 'State', '']);
      assert.deepEqual(rows.map((x) => x[0]), ['3', '2latest', '1'], 'newest step first, the latest marked');
      assert.deepEqual(rows.map((x) => x[8]), ['incomplete', 'complete', 'complete']);
      assert.deepEqual(rows.map((x) => x[4]), ['1', '2', '2'], 'ranks: the .distcp shards, or the ranks the save event names');
      assert.ok(rows[1][3].match(/KiB|MiB/), 'size: ' + rows[1][3]);
      // Steps 1 and 2 come from the run's checkpoint_save events, step 3 from its tag alone.
      assert.deepEqual(await page.$$eval('[data-testid=checkpoints] tbody tr', (trs) => trs.map((tr) => tr.dataset.source)), ['tag', 'event', 'event']);
      const { events } = await srv.api('GET', `/api/2.0/sextant/events/list?run_id=${run}&kind=checkpoint_save`);
      const ev = (step) => events.find((e) => e.step === step);
      assert.ok(ev(1) && ev(2), 'VolumeWriter recorded both saves: ' + JSON.stringify(events));
      // dcp.save: synchronous, training blocked all along, no upload after it.
      assert.equal(rows[2][5], 'sync');
      assert.equal(rows[2][6], fmtMs(ev(1).checkpoint.blocked_ms));
      assert.equal(rows[2][7], '', 'no upload time for a synchronous save');
      // dcp.async_save: a thread with a staging copy; blocked while staging, then the upload.
      assert.equal(rows[1][5], `thread/${ev(2).checkpoint.staging}`);
      assert.equal(rows[1][6], fmtMs(ev(2).checkpoint.blocked_ms));
      assert.equal(rows[1][7], fmtMs(Math.max(0, ev(2).end_ms - ev(2).time_ms - ev(2).checkpoint.blocked_ms)), 'upload = landed - began - blocked');
      assert.match(rows[1][2], /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$/, 'when it landed');
      // Saved: when each landed (end_ms); hovering, when it began and landed.
      const saved = (step) => page.getAttribute(`[data-testid=checkpoints] tr[data-step="${step}"] td:nth-child(3)`, 'title');
      for (const [row, step] of [[1, 2], [2, 1]]) {
        assert.ok(ev(step).end_ms >= ev(step).time_ms && ev(step).time_ms > 0, 'the event: ' + JSON.stringify(ev(step)));
        assert.equal(rows[row][2], fmtTime(ev(step).end_ms), 'step ' + step + ' landed');
        assert.equal(await saved(step), `began ${fmtTime(ev(step).time_ms)}, landed ${fmtTime(ev(step).end_ms)}`);
      }
      // The tagged save: when its directory was last written, as the Files API lists it.
      const dir = await srv.api('GET', '/api/2.0/fs/directories' + ckpt + '/step_3');
      assert.equal(rows[0][2], fmtTime(Math.max(...dir.contents.map((f) => f.last_modified))), 'step 3: its files’ time');
      assert.equal(rows[1][3], fmtBytesKiB(ev(2).checkpoint.bytes), 'size: the bytes the save event names');
      // The tagged save: nothing about how it was saved.
      assert.deepEqual(rows[0].slice(5, 8), ['', '', '']);
      // The snippet loads the newest complete checkpoint.
      await page.waitForSelector('[data-testid=ckpt-snippet][data-ready]');
      assert.match(await page.textContent('[data-testid=ckpt-snippet]'), new RegExp(`VolumeReader\\("${ckpt}/step_2"\\)`));
      // ... and resumes this run from it, or from its latest: the whole snippet.
      assert.equal(await page.textContent('[data-testid=ckpt-snippet]'), snippet(run, ckpt + '/step_2'));
      await screenshot(page, 'run-checkpoints');
      // Load… on an older save: the snippet loads and resumes from that one.
      await page.click('[data-testid=checkpoints] tr[data-step="1"] button:has-text("Load…")');
      assert.equal(await page.textContent('[data-testid=ckpt-snippet]'), snippet(run, ckpt + '/step_1'));
      await page.click(`[data-testid=checkpoints] a[href="/volumes/main/ml/ckpt/ui-run/step_2"]`);
      await page.waitForSelector('td:has-text(".metadata")');
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  });

  test('a failed save shows its error as text; a load is listed', async () => {
    assert.ok(run, 'the job of the test before saved');
    const ERR = 'OSError: shard __1_0.distcp did not land <img src=x onerror="window.__xss=8"><script>window.__xss=9</script> & more';
    const now = Date.now();
    await srv.api('POST', '/api/2.0/sextant/events/append', { run_id: run, events: [
      { kind: 'checkpoint_save', key: 'ckpt-save:ui-failed', time_ms: now - 5000, end_ms: now - 1000, step: 4, severity: 'error', message: 'save failed',
        checkpoint: { path: ckpt + '/step_4', outcome: 'failed', error: ERR, mode: 'process', staging: 'pinned', blocked_ms: 250, ranks: 2, bytes: 3 * 2 ** 20 } },
      { kind: 'checkpoint_load', key: 'ckpt-load:ui', time_ms: now - 800, end_ms: now - 500, step: 2,
        checkpoint: { path: ckpt + '/step_2', outcome: 'complete', bytes: 2 ** 20, ranks: 2 } },
    ] });
    await page.goto(`${srv.url}/runs/${run}?tab=checkpoints`);
    await page.waitForSelector('[data-testid=checkpoints] tr[data-step="3"][data-state]');
    await page.waitForSelector('[data-testid=ckpt-snippet][data-ready]');
    const rows = await cells();
    assert.deepEqual(rows.map((x) => x[0]), ['4', '3', '2latest', '1'], 'the failed save is listed, not the latest');
    const failed = rows[0];
    assert.equal(failed[2], fmtTime(now - 1000), 'when the failed save ended');
    assert.equal(await page.getAttribute('[data-testid=checkpoints] tr[data-step="4"] td:nth-child(3)', 'title'), `began ${fmtTime(now - 5000)}, landed ${fmtTime(now - 1000)}`);
    assert.equal(failed[8], 'failed: ' + ERR, 'the error, as text');
    assert.equal(await page.textContent('[data-testid=checkpoints] tr[data-step="4"] .ckpt-err-text'), ERR);
    assert.deepEqual(failed.slice(3, 8), ['3.00 MiB', '2', 'process/pinned', '250 ms', fmtMs(4000 - 250)]);
    assert.equal(await page.getAttribute('[data-testid=checkpoints] tr[data-step="4"]', 'data-state'), 'failed');
    // The snippet still loads the newest complete save.
    assert.match(await page.textContent('[data-testid=ckpt-snippet]'), new RegExp(`VolumeReader\\("${ckpt}/step_2"\\)`));
    const loads = await page.$$eval('[data-testid=checkpoint-loads] tbody tr', (trs) => trs.map((tr) => [...tr.children].map((td) => td.textContent)));
    assert.equal(loads.length, 1);
    assert.deepEqual(loads[0], [fmtTime(now - 800), '2', ckpt + '/step_2', '1.00 MiB', '2', '300 ms', 'complete']);
    assert.equal(await page.textContent('[data-testid=ckpt-snippet]'), snippet(run, ckpt + '/step_2'));
    await screenshot(page, 'run-checkpoints-failed');
    await noXSS();
    assert.equal(await page.locator('main script').count(), 0, 'injected HTML was rendered');
  });

  test('a running run lists its saves as they begin and land, without a reload', async () => {
    const { run: r } = await srv.api('POST', '/api/2.0/mlflow/runs/create', { experiment_id: ids.experiment, start_time: Date.now(), run_name: 'live-ckpt' });
    const id = r.info.run_id;
    const now = Date.now();
    const save = (step, extra) => srv.api('POST', '/api/2.0/sextant/events/append', { run_id: id, events: [
      { kind: 'checkpoint_save', key: 'ckpt-save:live-' + step, time_ms: now + step, step,
        ...extra, checkpoint: { path: `${ckpt}/live_${step}`, mode: 'thread', staging: 'copy', ranks: 1, bytes: 2 ** 20, blocked_ms: 40, ...extra.checkpoint } },
    ] });
    await page.goto(`${srv.url}/runs/${id}?tab=checkpoints&run_poll_ms=250`);
    await page.waitForSelector('.checkpoints p.empty');
    await save(7, { open: true, checkpoint: { outcome: 'writing' } });
    await page.waitForSelector('[data-testid=checkpoints] tr[data-step="7"][data-state="writing"]');
    assert.equal(await page.textContent('.checkpoints h2'), 'Checkpoints (1)');
    // The save fails; another begins.
    await save(7, { end_ms: now + 900, checkpoint: { outcome: 'failed', error: 'disk full' } });
    await save(8, { open: true, checkpoint: { outcome: 'writing' } });
    await page.waitForSelector('[data-testid=checkpoints] tr[data-step="7"][data-state="failed"]');
    await page.waitForSelector('[data-testid=checkpoints] tr[data-step="8"][data-state="writing"]');
    assert.equal(await page.textContent('[data-testid=checkpoints] tr[data-step="7"] .ckpt-err-text'), 'disk full');
    // The run ends with the save still open: it was cut off.
    await srv.api('POST', '/api/2.0/mlflow/runs/update', { run_id: id, status: 'KILLED', end_time: Date.now() });
    await page.waitForSelector('[data-testid=checkpoints] tr[data-step="8"][data-state="incomplete"]');
  });
});
