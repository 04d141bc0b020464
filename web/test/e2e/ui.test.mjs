// Browser tests of the web UI: a real sextant server (built from this
// tree) with data seeded through its HTTP API, and Debian's Chromium
// driven by playwright-core. Each page is checked and screenshotted into
// $SEXTANT_SCREENSHOTS (default web/test-results/screenshots).
//
//   cd web && node --test test/e2e/

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { canvasInk, createExperiment, createRun, finishRun, launch, logBatch, screenshot, sleep, startServer } from './harness.mjs';

const XSS_NAME = '<img src=x onerror="window.__xss=1">run';
const XSS_KEY = '<script>window.__xss=2</script>';

let srv;
let br;
let page;
/** the messages of the dialogs (alert, confirm) any page opened: injected script that ran */
const dialogs = [];

before(async () => {
  srv = await startServer();
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
  assert.deepEqual(dialogs, [], 'injected script opened a dialog');
}

/** bulkRequests records the get-history-bulk-interval requests of the page: their metric key and run ids. */
function bulkRequests() {
  const list = [];
  const on = (r) => {
    if (!r.url().includes('get-history-bulk-interval')) return;
    const u = new URL(r.url());
    list.push({ key: u.searchParams.get('metric_key'), runs: u.searchParams.getAll('run_ids') });
  };
  page.on('request', on);
  return { list, stop: () => page.off('request', on) };
}

/**
 * hoverPlot points at a line or point of a run plot (the first pixel, right
 * of x0, of the scatter plot's blue when blue, else of any saturated colour:
 * the parallel coordinates' lines, not their grey axes and labels) and
 * returns the tooltip it opens: the run's name, its lines, its elements.
 */
async function hoverPlot(canvas, blue, x0 = 70) {
  const at = await page.evaluate(
    ({ canvas, blue, x0 }) => {
      const c = document.querySelector(canvas);
      const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
      for (let x = x0; x < c.width - 70; x++) {
        for (let y = 20; y < c.height - 20; y++) {
          const i = (y * c.width + x) * 4;
          const [r, g, b, a] = [d[i], d[i + 1], d[i + 2], d[i + 3]];
          if (a > 150 && (blue ? b > 200 && r < 80 : Math.max(r, g, b) - Math.min(r, g, b) > 60)) return [x, y];
        }
      }
      return null;
    },
    { canvas, blue, x0 },
  );
  assert.ok(at, 'nothing drawn in ' + canvas);
  const box = await page.locator(canvas).boundingBox();
  await page.mouse.move(box.x + at[0] + 0.5, box.y + at[1] + 0.5);
  await page.waitForSelector('.plot-tip:not([hidden])');
  return page.evaluate(() => {
    const t = document.querySelector('.plot-tip');
    return { name: t.querySelector('strong').textContent, lines: [...t.querySelectorAll('div')].map((d) => d.textContent), tags: [...t.querySelectorAll('*')].map((e) => e.tagName) };
  });
}

describe('experiments and runs', () => {
  let exp;
  const runIds = [];

  before(async () => {
    exp = await createExperiment(srv, 'vision-sweep');
    // 60 runs: lr and loss vary; one run named with HTML, one with NaN,
    // Infinity and a huge value, one empty.
    for (let i = 0; i < 60; i++) {
      const id = await createRun(srv, exp, i === 7 ? XSS_NAME : `run-${String(i).padStart(2, '0')}`, { start: Date.now() - (60 - i) * 60_000 });
      runIds.push(id);
      if (i === 59) continue; // empty run
      const loss = i === 13 ? 'NaN' : i === 14 ? 'Infinity' : i === 15 ? 1e300 : 1 / (i + 1);
      await logBatch(srv, id, {
        metrics: [
          { key: 'loss', value: loss, timestamp: Date.now(), step: 100 },
          { key: 'acc', value: i / 60, timestamp: Date.now(), step: 100 },
          ...(i === 7 ? [{ key: 'weird: key/with spaces', value: 1, timestamp: Date.now(), step: 0 }] : []),
        ],
        params: [
          { key: 'lr', value: String([0.1, 0.01, 0.001][i % 3]) },
          { key: 'batch', value: String(32 << i % 2) },
          ...(i === 7 ? [{ key: 'note', value: XSS_KEY }] : []),
        ],
        tags: [{ key: 'team', value: i % 2 ? 'vision' : 'nlp' }, ...(i === 7 ? [{ key: 'html', value: XSS_NAME }] : [])],
      });
      if (i % 4 !== 0) await finishRun(srv, id);
    }
  });

  test('runs table shows, filters and sorts runs', async () => {
    await page.goto(srv.url + '/experiments/' + exp);
    await page.waitForSelector('.runs-body[data-loaded="true"]');
    assert.match(await page.textContent('[data-testid=run-count]'), /^60 runs/);
    assert.ok((await page.locator('.rt-row[data-run-id]').count()) >= 10);
    await noXSS();

    // Filter with the MLflow grammar.
    await page.fill('input.filter', 'metrics.loss < 0.05');
    await page.press('input.filter', 'Enter');
    await page.waitForFunction(() => /^\d+ runs?/.test(document.querySelector('[data-testid=run-count]').textContent) && document.querySelector('.runs-body').dataset.loaded);
    await page.waitForFunction(() => document.querySelector('[data-testid=run-count]').textContent.startsWith('39 runs'));
    const names = await page.locator('.rt-row[data-run-id] .rt-attr a').allTextContents();
    assert.ok(names.length > 0 && !names.includes('run-00') && !names.includes('run-05'), 'filtered rows: ' + names.slice(0, 5));

    // A filter that does not parse: the server's message, the position marked.
    await page.fill('input.filter', "params.lr = '0.1' AND metrics.loss <");
    await page.press('input.filter', 'Enter');
    await page.waitForSelector('.filter-error:has-text("position")');
    assert.equal(await page.locator('.filter-view .tok-error').count(), 1);
    await screenshot(page, 'experiment-filter-error');

    // Clear the filter and sort by the loss column (descending first).
    await page.fill('input.filter', "params.lr = '0.1'");
    await page.press('input.filter', 'Enter');
    await page.waitForFunction(() => document.querySelector('[data-testid=run-count]').textContent.startsWith('20 runs'));
    await page.click('.rt-head [data-col="metric:loss"]');
    await page.waitForFunction(() => document.querySelector('.rt-head .sorted'));
    await page.waitForFunction(() => document.querySelector('.runs-body').dataset.loaded === 'true');
    await sleep(200);
    const col = await page.evaluate(() => {
      const cols = [...document.querySelectorAll('.rt-head .rt-cell')].map((c) => c.dataset.col);
      const at = cols.indexOf('metric:loss');
      return [...document.querySelectorAll('.rt-row[data-run-id]')]
        .sort((a, b) => new DOMMatrix(getComputedStyle(a).transform).m42 - new DOMMatrix(getComputedStyle(b).transform).m42)
        .map((r) => r.children[at]?.textContent);
    });
    const nums = col.filter((v) => v && v !== 'NaN' && v !== '∞').map(Number);
    assert.ok(nums.length >= 5, 'sorted values: ' + col);
    for (let i = 1; i < nums.length; i++) assert.ok(nums[i - 1] >= nums[i], 'descending: ' + nums);
    await screenshot(page, 'experiment-runs-table');
    await noXSS();
  });

  test('column headers resize by dragging their edge, the width kept; long values have tooltips', async () => {
    await page.goto(srv.url + '/experiments/' + exp);
    await page.waitForSelector('.runs-body[data-loaded="true"]');
    const head = page.locator('.rt-head [data-col="attr:start_time"]');
    const w0 = (await head.boundingBox()).width;
    // Timestamps fit their column.
    const cell = await page.evaluate(() => {
      const cols = [...document.querySelectorAll('.rt-head .rt-cell')].map((c) => c.dataset.col);
      const el = document.querySelector('.rt-row[data-run-id]').children[cols.indexOf('attr:start_time')];
      return { scroll: el.scrollWidth, client: el.clientWidth, text: el.textContent };
    });
    assert.match(cell.text, /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$/);
    assert.ok(cell.scroll <= cell.client, `the timestamp is cut: ${cell.scroll} > ${cell.client}`);
    const grip = await head.locator('.col-resize').boundingBox();
    await page.mouse.move(grip.x + grip.width / 2, grip.y + grip.height / 2);
    await page.mouse.down();
    await page.mouse.move(grip.x + 120, grip.y + grip.height / 2, { steps: 5 });
    await page.mouse.up();
    const w1 = (await head.boundingBox()).width;
    assert.ok(w1 > w0 + 100, `dragged: ${w0} -> ${w1}`);
    // The rows follow, and a reload keeps the width; sorting did not fire.
    const rowCell = await page.evaluate(() => {
      const cols = [...document.querySelectorAll('.rt-head .rt-cell')].map((c) => c.dataset.col);
      return document.querySelector('.rt-row[data-run-id]').children[cols.indexOf('attr:start_time')].getBoundingClientRect().width;
    });
    assert.ok(Math.abs(rowCell - w1) < 2, `row cell ${rowCell}, header ${w1}`);
    assert.equal(await page.locator('.rt-head .sorted').count(), 0);
    await page.reload();
    await page.waitForSelector('.runs-body[data-loaded="true"]');
    assert.ok(Math.abs((await page.locator('.rt-head [data-col="attr:start_time"]').boundingBox()).width - w1) < 2, 'kept after a reload');
    // Headers and long values carry their whole text as a tooltip.
    assert.match(await page.getAttribute('.rt-head [data-col="param:lr"]', 'title'), /^params\.lr/);
    await page.evaluate(() => localStorage.clear());
  });

  test('run page overview shows params, description edit and comments', async () => {
    await page.goto(srv.url + '/runs/' + runIds[7]);
    await page.waitForSelector('.overview');
    await noXSS();
    assert.ok(await page.getByText(XSS_KEY).first().isVisible(), 'HTML in a param is shown as text');
    assert.ok(await page.locator('h1', { hasText: XSS_NAME }).isVisible(), 'HTML in a run name is shown as text');
    await page.click('text=Edit description');
    await page.fill('textarea[aria-label=Description]', 'Baseline <b>not bold</b>');
    await page.click('button:has-text("Save")');
    await page.waitForSelector('.desc-text:has-text("Baseline <b>not bold</b>")');
    await page.fill('textarea[aria-label=Comment]', 'Looks good <i>x</i>');
    await page.click('button:has-text("Comment")');
    await page.waitForSelector('.comment-body:has-text("Looks good <i>x</i>")');
    const run = await srv.api('GET', '/api/2.0/mlflow/runs/get?run_id=' + runIds[7]);
    assert.equal(run.run.data.tags.find((t) => t.key === 'mlflow.note.content').value, 'Baseline <b>not bold</b>');
    await screenshot(page, 'run-overview');
    await noXSS();
  });

  test('charts draw, name their runs, zoom refetches at full resolution, compare overlays runs', async () => {
    // Three runs with 6,000 steps each, one with a spike.
    const ids = [];
    for (let r = 0; r < 3; r++) {
      const id = await createRun(srv, exp, `curve-${r}`, { start: Date.now() - 600_000 });
      ids.push(id);
      const metrics = [];
      for (let s = 0; s < 6000; s++) metrics.push({ key: 'train/loss', value: s === 4321 && r === 0 ? 50 : 2 / Math.sqrt(s + 1) + r * 0.1 + 0.02 * Math.sin(s / 50), timestamp: Date.now() - 600_000 + s * 100, step: s });
      await logBatch(srv, id, { metrics, params: [{ key: 'lr', value: r < 2 ? '0.01' : '0.1' }] });
    }
    await page.goto(srv.url + '/runs/' + ids[0] + '?tab=metrics');
    await page.waitForSelector('.chart[data-metric="train/loss"][data-draw-ms]');
    const ink = await canvasInk(page, '.chart[data-metric="train/loss"] canvas');
    assert.ok(ink > 2000, 'chart canvas has ink: ' + ink);
    assert.equal(await page.textContent('.chart[data-metric="train/loss"] .legend-name'), 'curve-0');

    // Zoom: drag across the middle of the plot; a request for the step range follows.
    const zoomReq = page.waitForRequest((r) => r.url().includes('get-history-bulk-interval') && r.url().includes('start_step='));
    const box = await page.locator('.chart[data-metric="train/loss"] .u-over').boundingBox();
    await page.mouse.move(box.x + box.width * 0.5, box.y + box.height / 2);
    await page.mouse.down();
    await page.mouse.move(box.x + box.width * 0.75, box.y + box.height / 2, { steps: 5 });
    await page.mouse.up();
    const req = await zoomReq;
    const u = new URL(req.url());
    const start = Number(u.searchParams.get('start_step'));
    const end = Number(u.searchParams.get('end_step'));
    assert.ok(start > 2000 && end < 5000 && end > start, `zoom range ${start}-${end}`);
    await page.waitForSelector('.chart[data-metric="train/loss"][data-zoom-count]');
    await screenshot(page, 'run-metrics-zoomed');

    // Smoothing and log scale redraw without breaking.
    await page.locator('input[name=smoothing]').fill('0.9');
    await page.check('input[name=log-scale]');
    await page.selectOption('select[name=x-axis]', 'relative');
    await sleep(300);
    assert.ok((await canvasInk(page, '.chart[data-metric="train/loss"] canvas')) > 1000);
    await page.locator('input[name=smoothing]').fill('0');
    await page.uncheck('input[name=log-scale]');
    await page.selectOption('select[name=x-axis]', 'step');

    // Compare: three runs overlaid; grouped by lr, one line per group.
    await page.goto(srv.url + '/compare?runs=' + ids.join(','));
    await page.waitForSelector('.chart[data-metric="train/loss"][data-draw-ms]');
    assert.deepEqual(await page.locator('.chart[data-metric="train/loss"] .legend-name').allTextContents(), ['curve-0', 'curve-1', 'curve-2']);
    await page.goto(srv.url + '/compare?runs=' + ids.join(',') + '&group=params.lr');
    await page.waitForSelector('.chart[data-metric="train/loss"][data-draw-ms]');
    assert.deepEqual(await page.locator('.chart[data-metric="train/loss"] .legend-name').allTextContents(), ['lr=0.01', 'lr=0.1']);
    assert.deepEqual(await page.locator('.chart[data-metric="train/loss"] .legend-group').allTextContents(), ['2 runs', '1 run']);
    assert.ok((await canvasInk(page, '.chart[data-metric="train/loss"] canvas')) > 3000);
    assert.ok(await page.locator('table.diff tr.differs').count() >= 1, 'params diff shows lr');
    await screenshot(page, 'compare-runs');

    // A metric logged once (a final score) draws its point: a line needs two.
    await page.goto(srv.url + '/runs/' + runIds[3] + '?tab=metrics');
    await page.waitForSelector('.chart[data-metric="acc"][data-draw-ms]');
    const lone = await page.evaluate(() => {
      const chart = document.querySelector('.chart[data-metric="acc"]');
      const [r, g, b] = getComputedStyle(chart.querySelector('.swatch')).backgroundColor.match(/\d+/g).map(Number);
      const c = chart.querySelector('canvas');
      const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
      let n = 0;
      for (let i = 0; i < d.length; i += 4) if (d[i + 3] > 200 && Math.abs(d[i] - r) + Math.abs(d[i + 1] - g) + Math.abs(d[i + 2] - b) < 60) n++;
      return n;
    });
    assert.ok(lone >= 9, `the lone point of acc is drawn (${lone} pixels of its colour)`);
    await screenshot(page, 'run-metrics-single-point');

    // Bad values: NaN, Infinity and huge values and an empty run chart without errors.
    await page.goto(srv.url + '/compare?runs=' + [runIds[13], runIds[14], runIds[15], runIds[59], runIds[7]].join(','));
    await page.waitForSelector('.chart[data-metric="loss"][data-draw-ms]');
    await noXSS();
    await screenshot(page, 'compare-bad-values');
  });

  test('the chart and plots views of runs selected in the table show those runs only', async () => {
    await page.goto(srv.url + '/experiments/' + exp);
    await page.waitForSelector('.runs-body[data-loaded="true"]');
    const pick = [58, 57, 55];
    const picked = pick.map((i) => runIds[i]);
    const names = pick.map((i) => `run-${i}`);
    for (const id of picked) await page.check(`.rt-row[data-run-id="${id}"] input[aria-label="Select run"]`);
    assert.equal(await page.textContent('button.primary:has-text("Compare")'), 'Compare 3 runs');
    const req = bulkRequests();
    try {
      // Charts: a chart per key of the three runs, a line per run, and nothing fetched for the others.
      await page.click('[role=tab][data-view=charts]');
      await page.waitForSelector('.exp-charts .chart[data-metric="loss"][data-draw-ms]');
      await page.waitForSelector('.exp-charts .chart[data-metric="acc"][data-draw-ms]');
      assert.match(new URL(page.url()).search, /view=charts/);
      assert.equal(await page.textContent('[data-testid=charts-runs]'), 'Showing 3 selected runs');
      assert.deepEqual(await page.locator('.exp-charts .run-chips .legend-name').allTextContents(), names);
      assert.equal(await page.isDisabled('select[name=first-runs]'), true, 'the first N do not apply to a selection');
      assert.equal(await page.getAttribute('.board', 'data-charts'), '2');
      for (const key of ['loss', 'acc']) {
        assert.deepEqual((await page.locator(`.chart[data-metric="${key}"] .legend-name`).allTextContents()).sort(), [...names].sort(), key);
        assert.equal(await page.getAttribute(`.chart[data-metric="${key}"]`, 'data-runs'), '3');
        assert.ok((await canvasInk(page, `.chart[data-metric="${key}"] canvas`)) > 100, key + ' drawn');
      }
      assert.ok(req.list.length >= 2, 'requests: ' + JSON.stringify(req.list));
      assert.deepEqual([...new Set(req.list.flatMap((r) => r.runs))].sort(), [...picked].sort(), 'only the selected runs are fetched');
      await screenshot(page, 'experiment-charts-selected');

      // Plots: a line and a point per selected run.
      await page.click('[role=tab][data-view=plots]');
      await page.waitForFunction(() => document.querySelector('canvas[aria-label="Parallel coordinates"]')?.dataset.lines === '3');
      assert.equal(await page.textContent('[data-testid=plots-runs]'), '3 selected runs');
      await page.selectOption('select[aria-label="Scatter x axis"]', 'params.lr');
      await page.selectOption('select[aria-label="Scatter y axis"]', 'metrics.loss');
      await page.waitForFunction(() => document.querySelector('canvas[aria-label="Scatter plot"]').dataset.points === '3');
      const tip = await hoverPlot('canvas[aria-label="Scatter plot"]', true, 60);
      assert.ok(names.includes(tip.name), 'the point under the pointer is a selected run: ' + tip.name);
      await screenshot(page, 'experiment-plots-selected');

      // Back to the table, one run fewer: the views follow the selection.
      await page.click('[role=tab][data-view=table]');
      await page.uncheck(`.rt-row[data-run-id="${picked[2]}"] input[aria-label="Select run"]`);
      req.list.length = 0;
      await page.click('[role=tab][data-view=charts]');
      await page.waitForSelector('.exp-charts .chart[data-metric="loss"][data-draw-ms]');
      assert.equal(await page.textContent('[data-testid=charts-runs]'), 'Showing 2 selected runs');
      assert.deepEqual((await page.locator('.chart[data-metric="loss"] .legend-name').allTextContents()).sort(), names.slice(0, 2).sort());
      assert.equal(await page.getAttribute('.chart[data-metric="loss"]', 'data-runs'), '2');
      // (Their overviews are cached: a request now, if any, is for these two.)
      assert.ok(req.list.every((r) => r.runs.every((id) => picked.slice(0, 2).includes(id))), 'requests: ' + JSON.stringify(req.list));
      await page.click('[role=tab][data-view=plots]');
      await page.waitForFunction(() => document.querySelector('canvas[aria-label="Parallel coordinates"]')?.dataset.lines === '2');
    } finally {
      req.stop();
    }
  });
});

describe('the experiment chart view at scale', () => {
  const RUNS = 50;
  const KEYS = 300;
  // train/k_000 ... train/k_149, val/k_150 ... val/k_299: the board's order.
  const key = (k) => `${k < KEYS / 2 ? 'train' : 'val'}/k_${String(k).padStart(3, '0')}`;
  const index = (name) => Number(/k_(\d+)$/.exec(name)[1]);
  let exp;
  let ids;

  before(async () => {
    exp = await createExperiment(srv, 'many-keys');
    ids = [];
    const t = Date.now() - 3_600_000;
    for (let r = 0; r < RUNS; r++) {
      const id = await createRun(srv, exp, `wide-${String(r).padStart(2, '0')}`, { start: t + r * 1000 });
      ids.push(id);
      const metrics = [];
      for (let k = 0; k < KEYS; k++) for (let s = 0; s < 3; s++) metrics.push({ key: key(k), value: Math.sin(k + s) + r / RUNS, timestamp: t + s * 1000, step: s });
      await logBatch(srv, id, { metrics });
      await finishRun(srv, id);
    }
  });

  test('50 runs × 300 keys: only the charts on screen are drawn and fetched, each for every run', async () => {
    const req = bulkRequests();
    try {
      await page.goto(`${srv.url}/experiments/${exp}?view=charts&first=50`);
      await page.waitForFunction((n) => document.querySelector('.board')?.dataset.charts === String(n), KEYS);
      await page.waitForSelector('.exp-charts .chart[data-metric="train/k_000"][data-draw-ms]');
      assert.equal(await page.textContent('[data-testid=charts-runs]'), 'Showing the first 50 runs of the table (select runs to choose)');
      assert.equal(await page.locator('.exp-charts .run-chips .legend-item').count(), RUNS);
      assert.deepEqual(await page.locator('.board-head .board-section').allTextContents(), ['train'], 'the headers on screen');
      await sleep(1000);
      const rendered = Number(await page.getAttribute('.board', 'data-rendered'));
      const inDom = await page.locator('.board .chart').count();
      assert.ok(rendered > 0 && rendered <= 15 && inDom === rendered, `charts in the DOM: ${inDom}, rendered ${rendered}`);
      assert.ok((await page.locator('.board .chart[data-draw-ms]').count()) <= rendered);
      const first = req.list.map((r) => r.key);
      assert.ok(first.length > 0 && first.length <= 15, 'requests for the first screen: ' + first.join(', '));
      assert.ok(first.every((k) => index(k) < rendered), 'only charts in the DOM are fetched: ' + first.join(', '));
      // One request per chart carries every run (50 runs share the point budget).
      for (const r of req.list) assert.equal(new Set(r.runs).size, RUNS, r.key + ': ' + r.runs.length + ' runs');
      assert.equal(await page.getAttribute('.chart[data-metric="train/k_000"]', 'data-runs'), String(RUNS));
      assert.ok((await canvasInk(page, '.chart[data-metric="train/k_000"] canvas')) > 500);
      await screenshot(page, 'experiment-charts-50x300');

      // Jump to the end: the charts passed by are never created nor fetched.
      req.list.length = 0;
      await page.evaluate(() => (document.querySelector('.board-scroll').scrollTop = 1e9));
      await page.waitForSelector(`.chart[data-metric="${key(KEYS - 1)}"][data-draw-ms]`);
      await sleep(1000);
      const after = req.list.map((r) => r.key);
      assert.ok(after.length > 0 && after.length <= 15, 'requests after the jump: ' + after.join(', '));
      assert.ok(after.every((k) => index(k) >= KEYS - 20), 'only the last charts are fetched: ' + after.join(', '));
      for (const r of req.list) assert.equal(new Set(r.runs).size, RUNS, r.key);
      const metrics = await page.$$eval('.board .chart', (cs) => cs.map((c) => c.dataset.metric));
      assert.ok(metrics.length <= 15 && metrics.every((m) => index(m) >= KEYS - 20), 'charts in the DOM: ' + metrics.join(', '));
      assert.equal(await page.getAttribute(`.chart[data-metric="${key(KEYS - 1)}"]`, 'data-runs'), String(RUNS));
      assert.ok((await canvasInk(page, `.chart[data-metric="${key(KEYS - 1)}"] canvas`)) > 500);
      await screenshot(page, 'experiment-charts-50x300-end');
    } finally {
      req.stop();
    }
  });
});

describe('hostile values in groups, plots and tooltips', () => {
  // Run names and param values with HTML; the group legend, the chips, the
  // plots' tooltips and the compare page must show them as text.
  const CFG = ['<img src=x onerror=alert(1)>', '<script>alert(3)</script>'];
  const NAME = (i) => `<img src=x onerror=alert(2)>r${i}`;
  let exp;
  const ids = [];

  before(async () => {
    exp = await createExperiment(srv, 'hostile-groups');
    const t = Date.now() - 600_000;
    for (let i = 0; i < 4; i++) {
      const id = await createRun(srv, exp, NAME(i), { start: t + i * 1000 });
      ids.push(id);
      const metrics = [];
      for (let s = 0; s < 50; s++) metrics.push({ key: 'loss', value: (1 + (i % 2)) / (s + 1) + 0.01 * i, timestamp: t + s * 1000, step: s });
      await logBatch(srv, id, { metrics, params: [{ key: 'cfg', value: CFG[i % 2] }, { key: 'seed', value: String(i) }] });
      await finishRun(srv, id);
    }
  });

  test('a param with HTML as the group legend, and in the plots’ tooltips, as text', async () => {
    await page.goto(`${srv.url}/experiments/${exp}?view=charts&group=params.cfg`);
    const sel = '.chart[data-metric="loss"]';
    await page.waitForFunction((s) => document.querySelector(s)?.dataset.runs === '4' && document.querySelector(s).dataset.drawMs, sel);
    const groups = CFG.map((v) => 'cfg=' + v).sort();
    assert.deepEqual((await page.locator(sel + ' .legend-name').allTextContents()).sort(), groups, 'the legend, as text');
    assert.deepEqual(await page.locator(sel + ' .legend-group').allTextContents(), ['2 runs', '2 runs']);
    assert.deepEqual((await page.locator('.exp-charts .run-chips .legend-name').allTextContents()).sort(), groups, 'the chips, as text');
    assert.ok((await canvasInk(page, sel + ' canvas')) > 1000);
    await screenshot(page, 'hostile-group-legend');
    await noXSS();

    // The plots: the tooltip of a parallel-coordinates line and of a scatter point.
    await page.goto(`${srv.url}/experiments/${exp}?view=plots`);
    await page.waitForFunction(() => document.querySelector('canvas[aria-label="Parallel coordinates"]')?.dataset.lines === '4');
    assert.ok((await page.getAttribute('canvas[aria-label="Parallel coordinates"]', 'data-axes')).includes('params.cfg'));
    const names = ids.map((_, i) => NAME(i));
    const cfgLine = (tip) => tip.lines.find((l) => l.startsWith('params.cfg = '));
    let tip = await hoverPlot('canvas[aria-label="Parallel coordinates"]', false, 80);
    assert.ok(names.includes(tip.name), 'the run name, as text: ' + tip.name);
    assert.ok(CFG.map((v) => 'params.cfg = ' + v).includes(cfgLine(tip)), 'the param, as text: ' + tip.lines);
    assert.ok(tip.tags.every((t) => t === 'STRONG' || t === 'DIV'), 'only the tooltip’s own elements: ' + tip.tags);
    await screenshot(page, 'hostile-parallel-tooltip');
    await page.mouse.move(5, 5);
    await page.selectOption('select[aria-label="Scatter x axis"]', 'params.cfg');
    await page.selectOption('select[aria-label="Scatter y axis"]', 'metrics.loss');
    await page.waitForFunction(() => document.querySelector('canvas[aria-label="Scatter plot"]').dataset.points === '4');
    tip = await hoverPlot('canvas[aria-label="Scatter plot"]', true, 60);
    assert.ok(names.includes(tip.name), 'the run name, as text: ' + tip.name);
    assert.ok(CFG.map((v) => 'params.cfg = ' + v).includes(cfgLine(tip)), 'the param, as text: ' + tip.lines);
    assert.ok(tip.tags.every((t) => t === 'STRONG' || t === 'DIV'), 'only the tooltip’s own elements: ' + tip.tags);
    await screenshot(page, 'hostile-scatter-tooltip');
    await noXSS();

    // Compare, grouped by it: the legend and the params diff, as text.
    await page.goto(`${srv.url}/compare?runs=${ids.join(',')}&group=params.cfg`);
    await page.waitForSelector(sel + '[data-draw-ms]');
    assert.deepEqual((await page.locator(sel + ' .legend-name').allTextContents()).sort(), groups);
    for (const v of CFG) assert.ok((await page.locator('table.diff td', { hasText: v }).count()) >= 1, 'the diff shows ' + v);
    await screenshot(page, 'hostile-compare-grouped');
    await noXSS();
    assert.equal(await page.locator('main script').count(), 0, 'injected HTML was rendered');
  });
});

describe('compare', () => {
  test('the compare page: charts never cut by a nested scroll, a metrics table, a scatter plot of what varies with its labels inside', async () => {
    const cmp = await createExperiment(srv, 'compare-layout');
    const ids = [];
    for (let i = 0; i < 4; i++) {
      const id = await createRun(srv, cmp, `cmp-${i}`);
      ids.push(id);
      const metrics = [{ key: 'loss', value: [123456.789, 0.000012, 42.5, 7][i], timestamp: Date.now(), step: 10 }];
      for (let k = 0; k < 8; k++) metrics.push({ key: `val/metric_${k}`, value: i * k, timestamp: Date.now(), step: 10 });
      await logBatch(srv, id, {
        metrics,
        // "arch" sorts first and is the same for every run: not a useful axis.
        params: [{ key: 'arch', value: 'resnet50' }, { key: 'lr', value: String([0.1, 0.01, 0.001, 0.0001][i]) }],
      });
      await finishRun(srv, id);
    }
    await page.goto(srv.url + '/compare?runs=' + ids.join(','));
    await page.waitForSelector('.board-item canvas');
    // Nine charts: the board does not scroll inside the page (the page
    // scrolls), and every chart drawn is wholly inside it.
    const cut = await page.evaluate(() => {
      const el = document.querySelector('.compare .board-scroll');
      const sc = el.getBoundingClientRect();
      const out = [];
      if (el.scrollHeight > el.clientHeight + 1) out.push(`the board scrolls inside the page: ${el.scrollHeight} px in ${el.clientHeight}`);
      for (const el of document.querySelectorAll('.compare .board-item')) {
        const b = el.getBoundingClientRect();
        if (b.top < sc.bottom - 1 && b.bottom > sc.bottom + 1) out.push(`a chart row ${b.top}..${b.bottom} is cut by the board's bottom at ${sc.bottom}`);
      }
      return out;
    });
    assert.deepEqual(cut, []);
    await screenshot(page, 'compare');
    // The metrics table: a row per metric, a column per run.
    const table = page.locator('[data-testid=compare-metrics]');
    assert.equal(await table.locator('tbody tr').count(), 9);
    assert.equal(await table.locator('thead th').count(), 5);
    assert.match(await table.locator('tbody tr').first().textContent(), /loss/);
    // The scatter plot: x is a param that varies (lr), not the constant arch; y the loss.
    const sc = 'canvas[aria-label="Scatter plot"]';
    assert.equal(await page.inputValue('select[aria-label="Scatter x axis"]'), 'params.lr');
    assert.equal(await page.inputValue('select[aria-label="Scatter y axis"]'), 'metrics.loss');
    await page.locator(sc).scrollIntoViewIfNeeded();
    await page.waitForFunction((s) => document.querySelector(s).dataset.points === '4', sc);
    const { labels, w, h } = await page.evaluate((s) => {
      const c = document.querySelector(s);
      return { labels: JSON.parse(c.dataset.labels), w: c.clientWidth, h: c.clientHeight };
    }, sc);
    assert.ok(labels.length >= 4, 'no labels recorded');
    for (const [x0, y0, x1, y1] of labels) assert.ok(x0 >= 0 && y0 >= 0 && x1 <= w && y1 <= h, `label box ${[x0, y0, x1, y1]} outside the ${w}×${h} canvas`);
    await screenshot(page, 'compare-scatter');
  });
});

describe('run page details', () => {
  test('?line=40 opens the log with line 40 in view and highlighted; system metrics are plotted against time', async () => {
    const exp = await createExperiment(srv, 'details-exp');
    const run = await createRun(srv, exp, 'details-run');
    const lines = [];
    for (let i = 0; i < 300; i++) lines.push({ timestamp: Date.now(), stream: 'stdout', text: `line text ${i + 1}` });
    await srv.api('POST', '/api/2.0/sextant/logs/append', { run_id: run, source: 'test-src', first_seq: 0, lines });
    const t0 = Date.now() - 600_000;
    const metrics = [];
    for (let k = 0; k < 20; k++) metrics.push({ key: 'system/cpu_utilization_percentage', value: 10 + k, timestamp: t0 + k * 10_000, step: k }, { key: 'loss', value: 1 / (k + 1), timestamp: t0 + k * 10_000, step: k });
    await logBatch(srv, run, { metrics });
    await finishRun(srv, run);
    await page.goto(srv.url + '/runs/' + run + '?tab=logs&line=40');
    const hit = page.locator('.log-line.hit');
    await hit.waitFor({ timeout: 20_000 });
    assert.equal(await hit.getAttribute('data-line'), '40');
    const inView = await page.evaluate(() => {
      const row = document.querySelector('.log-line.hit').getBoundingClientRect();
      let sc = document.querySelector('.log-line.hit').parentElement;
      while (sc && getComputedStyle(sc).overflowY !== 'auto' && getComputedStyle(sc).overflowY !== 'scroll') sc = sc.parentElement;
      const box = sc.getBoundingClientRect();
      return { row: [row.top, row.bottom], box: [box.top, box.bottom], win: window.innerHeight };
    });
    assert.ok(inView.row[0] >= inView.box[0] && inView.row[1] <= inView.box[1] && inView.row[1] <= inView.win, 'line 40 is not in view: ' + JSON.stringify(inView));
    await screenshot(page, 'logs-line-40');
    // Line 40 a progress-bar redraw (lines 30-45, \r), hidden by the terminal view: the row it became is highlighted, in view.
    const bars = await createRun(srv, exp, 'bars-run');
    const blines = [];
    for (let i = 1; i <= 300; i++) blines.push({ timestamp: Date.now(), stream: 'stdout', text: i >= 30 && i <= 45 ? `epoch 0: ${(i - 29) * 6}%|###` : `line text ${i}`, ...(i >= 30 && i < 45 ? { cr: true } : {}) });
    await srv.api('POST', '/api/2.0/sextant/logs/append', { run_id: bars, source: 'test-src', first_seq: 0, lines: blines });
    await finishRun(srv, bars);
    await page.goto(srv.url + '/runs/' + bars + '?tab=logs&line=40');
    await hit.waitFor({ timeout: 20_000 });
    assert.equal(await hit.getAttribute('data-line'), '45');
    assert.match(await page.textContent('[data-testid=log-status]'), /line 40 was redrawn over: its row is line 45/);
    // System metrics: against wall-clock time; the Metrics tab stays on steps.
    await page.goto(srv.url + '/runs/' + run + '?tab=system');
    await page.waitForSelector('.chart[data-x-mode]');
    assert.deepEqual([...new Set(await page.$$eval('.chart[data-x-mode]', (els) => els.map((e) => e.dataset.xMode)))], ['wall']);
    assert.equal(await page.inputValue('select[aria-label="X axis"]'), 'wall');
    await page.goto(srv.url + '/runs/' + run + '?tab=metrics');
    await page.waitForSelector('.chart[data-x-mode]');
    assert.equal(await page.getAttribute('.chart[data-x-mode]', 'data-x-mode'), 'step');
  });

  test('the "Logged models" breadcrumb of a logged model leads to the experiment\'s logged models', async () => {
    const exp = await createExperiment(srv, 'models-crumb');
    const run = await createRun(srv, exp, 'model-run');
    const model = (await srv.api('POST', '/api/2.0/mlflow/logged-models', { experiment_id: exp, name: 'crumb-model', source_run_id: run })).model.info.model_id;
    await page.goto(`${srv.url}/experiments/${exp}/models/${model}`);
    await page.waitForSelector('[data-testid=logged-model-name]:has-text("crumb-model")');
    await page.click('.crumbs a:text-is("Logged models")');
    await page.waitForSelector('[data-testid=logged-models] a:text-is("crumb-model")');
    assert.equal(new URL(page.url()).pathname, `/experiments/${exp}/models`);
    await page.waitForSelector('[data-testid=logged-models] a.run-link:text-is("model-run")');
    await screenshot(page, 'logged-models');
    await page.click('[data-testid=logged-models] a:text-is("crumb-model")');
    await page.waitForSelector('[data-testid=logged-model-name]:has-text("crumb-model")');
  });
});

describe('logs', () => {
  test('logs tab renders ANSI colours, tails new lines, searches and jumps', async () => {
    const exp = await createExperiment(srv, 'logs-exp');
    const run = await createRun(srv, exp, 'live-run');
    const lines = [];
    for (let i = 0; i < 3000; i++) {
      const text = i === 100 ? '\x1b[31mERROR\x1b[0m something \x1b[1;32mgreen bold\x1b[0m' : i === 101 ? '<script>window.__xss=3</script><b>bold?</b>' : `step ${i} loss=${(1 / (i + 1)).toFixed(5)}`;
      lines.push({ timestamp: Date.now(), stream: i % 10 === 9 ? 'stderr' : 'stdout', text, node: i % 2, local_rank: i % 4 });
    }
    const append = (first, ls) => srv.api('POST', '/api/2.0/sextant/logs/append', { run_id: run, source: 'test-src', first_seq: first, lines: ls });
    await append(0, lines);
    await page.goto(srv.url + '/runs/' + run + '?tab=logs');
    await page.waitForFunction(() => document.querySelector('.logs')?.dataset.total === '3000');
    // Follow puts the end in view; new lines arrive through the tail.
    await page.waitForSelector('.log-line[data-line="3000"]');
    await append(3000, [0, 1, 2, 3, 4].map((i) => ({ timestamp: Date.now(), stream: 'stdout', text: `tailed line ${i}`, node: 0, local_rank: 0 })));
    await page.waitForSelector('.log-line:has-text("tailed line 4")', { timeout: 30_000 });
    assert.match(await page.textContent('[data-testid=log-status]'), /3,005 lines/);

    // Jump to a line, with ANSI colours as spans and HTML as text.
    await page.fill('input[aria-label="Jump to line"]', '101');
    await page.press('input[aria-label="Jump to line"]', 'Enter');
    await page.waitForSelector('.log-line[data-line="101"] .f1');
    assert.equal(await page.textContent('.log-line[data-line="101"] .f1'), 'ERROR');
    assert.ok(await page.locator('.log-line[data-line="101"] .f10.ab').count(), 'bold green');
    assert.equal(await page.textContent('.log-line[data-line="102"] .lt'), '<script>window.__xss=3</script><b>bold?</b>');
    await noXSS();

    // Search jumps to the first match.
    await page.fill('input[aria-label="Search logs"]', 'loss=0.00050');
    await page.press('input[aria-label="Search logs"]', 'Enter');
    await page.waitForSelector('.log-results li');
    await page.waitForSelector('.log-line.hit');
    assert.match(await page.textContent('.log-line.hit'), /loss=0\.00050/);
    await screenshot(page, 'run-logs');

    // Node and rank filter.
    await page.fill('input[aria-label=Node]', '1');
    await page.fill('input[aria-label=Rank]', '3');
    await page.waitForFunction(() => /matching lines/.test(document.querySelector('[data-testid=log-status]').textContent));
    const ranks = await page.locator('.log-line .lr').allTextContents();
    assert.ok(ranks.length > 0 && ranks.every((r) => r === '1:3'), 'filtered: ' + ranks.slice(0, 5));
    await finishRun(srv, run);
  });
});

describe('artifacts', () => {
  test('artifact tree previews text, JSON, YAML and images and offers downloads', async () => {
    const exp = await createExperiment(srv, 'artifacts-exp');
    const run = await createRun(srv, exp, 'with-artifacts');
    const info = (await srv.api('GET', '/api/2.0/mlflow/runs/get?run_id=' + run)).run.info;
    const base = '/api/2.0/mlflow-artifacts/artifacts/' + info.artifact_uri.replace(/^mlflow-artifacts:\/*/, '');
    const png = Buffer.from(
      'iVBORw0KGgoAAAANSUhEUgAAABAAAAAQCAIAAACQkWg2AAAAKklEQVR4nGP8z4AfMBGQZ2BhYGBgYPiPQx0jAxEmjCoYVTCqYFTBqAJ0AAD+6gMdkyq9JQAAAABJRU5ErkJggg==',
      'base64',
    );
    await srv.api('PUT', base + '/config.json', JSON.stringify({ lr: 0.001, layers: [64, 64], name: '<b>x</b>' }));
    await srv.api('PUT', base + '/model/MLmodel', 'flavors:\n  pytorch:\n    version: 2.5\n');
    await srv.api('PUT', base + '/notes.txt', 'hello <script>window.__xss=4</script>');
    await srv.api('PUT', base + '/plots/curve.png', new Uint8Array(png));
    await page.goto(srv.url + '/runs/' + run + '?tab=artifacts');
    await page.click('.art-item[data-path="config.json"]');
    await page.waitForSelector('pre.art-text[data-kind=json]');
    assert.match(await page.textContent('pre.art-text'), /"layers": \[\n\s+64,/);
    await page.click('.art-item[data-path="notes.txt"]');
    await page.waitForSelector('pre.art-text:has-text("hello <script>")');
    await page.click('.art-item[data-path="model"]');
    await page.click('.art-item[data-path="model/MLmodel"]');
    await page.waitForSelector('pre.art-text[data-kind=yaml]');
    await page.click('.art-item[data-path="plots"]');
    await page.click('.art-item[data-path="plots/curve.png"]');
    await page.waitForSelector('img.art-img');
    await page.waitForFunction(() => document.querySelector('img.art-img').naturalWidth === 16);
    const dl = await page.getAttribute('.art-head a[download]', 'href');
    const r = await srv.api('GET', dl, undefined, { raw: true });
    assert.equal(r.status, 200);
    await screenshot(page, 'run-artifacts');
    await noXSS();
  });
});

describe('GPU pane', () => {
  test('updates from agents, groups nodes, shows at most 2 hours, pauses when idle and resumes', async () => {
    const now = Date.now();
    const gpu = (i, util) => ({ index: i, uuid: 'GPU-' + i, name: 'Simulated H100', util, mem_used: (20 + i) * 2 ** 30, mem_total: 80 * 2 ** 30, temp: 50 + i, power: 300 + i, power_limit: 700 });
    // node-a: 4 GPUs, node-b: 2 GPUs, with history from (almost) the 2 hours the server keeps.
    for (const [node, rank, n] of [['node-a', 0, 4], ['node-b', 1, 2]]) {
      const samples = [];
      for (let t = now - 2 * 3600_000 + 120_000; t <= now; t += 60_000) samples.push({ ts_ms: t, gpus: Array.from({ length: n }, (_, i) => gpu(i, 50 + 40 * Math.sin(t / 600_000 + i))) });
      for (let i = 0; i < samples.length; i += 60) await srv.api('POST', '/api/2.0/sextant/gpu/samples', { node, node_rank: rank, num_nodes: 2, samples: samples.slice(i, i + 60) });
    }
    await page.goto(srv.url + '/gpu?gpu_poll_ms=300&gpu_idle_ms=2500');
    await page.waitForSelector('.gpu-node[data-node="node-b"] .gpu-card');
    assert.equal(await page.locator('.gpu-node').count(), 2);
    assert.equal(await page.locator('.gpu-node[data-node="node-a"] .gpu-card').count(), 4);
    assert.equal(await page.locator('.gpu-node[data-node="node-b"] .gpu-card').count(), 2);
    const span = Number(await page.getAttribute('.gpu-pane', 'data-span-ms'));
    assert.ok(span > 60 * 60_000 && span <= 2 * 3600_000 + 60_000, 'history span ' + span);
    assert.ok((await canvasInk(page, '.gpu-node[data-node="node-a"] .gpu-card[data-gpu="0"] .gpu-metric[data-field=util] canvas')) > 50);

    // A new sample shows up by itself.
    await page.mouse.move(10, 10);
    await srv.api('POST', '/api/2.0/sextant/gpu/samples', { node: 'node-a', node_rank: 0, samples: [{ ts_ms: Date.now(), gpus: [gpu(0, 77), gpu(1, 1), gpu(2, 2), gpu(3, 3)] }] });
    await page.waitForSelector('.gpu-node[data-node="node-a"] .gpu-card[data-gpu="0"] .gpu-metric[data-field=util] .gpu-value:has-text("77%")', { timeout: 30_000 });
    await screenshot(page, 'gpu-pane');

    // No interaction for the idle time: polling stops and the pane says so.
    await page.waitForSelector('.gpu-pane[data-paused="true"]', { timeout: 30_000 });
    assert.match(await page.textContent('[data-testid=gpu-state]'), /Paused/);
    const polls = Number(await page.getAttribute('.gpu-pane', 'data-polls'));
    await sleep(1000);
    assert.equal(Number(await page.getAttribute('.gpu-pane', 'data-polls')), polls, 'no polls while paused');
    await screenshot(page, 'gpu-pane-paused');
    // Interaction resumes it.
    await page.mouse.move(200, 200);
    await page.waitForSelector('.gpu-pane[data-paused="false"]');
    await page.waitForFunction((p) => Number(document.querySelector('.gpu-pane').dataset.polls) > p, polls);

    // The run page's panel, fed by the simulated agent when it exists.
    const exp = await createExperiment(srv, 'gpu-exp');
    const run = await createRun(srv, exp, 'gpu-run');
    const { spawn } = await import('node:child_process');
    const { sextantBin } = await import('./harness.mjs');
    const agent = spawn(sextantBin(), ['agent', '--gpu-source=sim:4', '--interval', '200ms', '--server', srv.url, '--run-id', run, '--node', 'sim-node', '--spool-dir', srv.dataDir + '/spool'], { stdio: 'ignore' });
    try {
      await page.goto(srv.url + '/runs/' + run + '?tab=gpu&gpu_poll_ms=300&gpu_idle_ms=60000');
      await page.waitForSelector('.gpu-node[data-node="sim-node"] .gpu-card[data-gpu="3"]', { timeout: 30_000 });
      await page.waitForFunction(() => Number(document.querySelector('.gpu-pane').dataset.polls) >= 3);
      await screenshot(page, 'run-gpu-panel');
    } finally {
      agent.kill('SIGTERM');
    }
  });
});

describe('volumes and the server', () => {
  test('volumes page browses catalogs to a volume and uploads into it, and workspace files', async () => {
    await srv.api('POST', '/api/2.1/unity-catalog/catalogs', { name: 'main' });
    await srv.api('POST', '/api/2.1/unity-catalog/schemas', { catalog_name: 'main', name: 'vision' });
    await srv.api('POST', '/api/2.1/unity-catalog/volumes', { catalog_name: 'main', schema_name: 'vision', name: 'ckpt', volume_type: 'MANAGED' });
    await page.goto(srv.url + '/volumes');
    await page.click('a:has-text("main")');
    await page.click('a:has-text("vision")');
    await page.click('a:has-text("ckpt")');
    await page.waitForSelector('.file-browser');
    await page.setInputFiles('input[type=file]', { name: 'weights.bin', mimeType: 'application/octet-stream', buffer: Buffer.from('0123456789') });
    await page.waitForSelector('.file-browser td:has-text("weights.bin")');
    const v = await srv.api('GET', '/api/2.0/fs/files/Volumes/main/vision/ckpt/weights.bin', undefined, { raw: true });
    assert.equal(await v.text(), '0123456789');
    await screenshot(page, 'volumes-files');

    await page.goto(srv.url + '/volumes');
    await page.click('a:has-text("/Workspace/Shared")');
    await page.waitForSelector('.file-browser');
    await page.setInputFiles('input[type=file]', { name: 'hello.txt', mimeType: 'text/plain', buffer: Buffer.from('hi there') });
    await page.waitForSelector('.file-browser td:has-text("hello.txt")');
    const r = await srv.api('GET', '/api/2.0/fs/files/Workspace/Shared/hello.txt', undefined, { raw: true });
    assert.equal(await r.text(), 'hi there');
    await screenshot(page, 'volumes-workspace-files');
  });

  test('UI pages carry security headers; API paths never fall back to the UI', async () => {
    const r = await fetch(srv.url + '/experiments/1', { headers: { 'Accept-Encoding': 'gzip' } });
    assert.equal(r.status, 200);
    assert.match(r.headers.get('content-type'), /text\/html/);
    assert.match(r.headers.get('content-security-policy'), /script-src 'self'/);
    assert.match(r.headers.get('content-security-policy'), /frame-ancestors 'none'/);
    assert.equal(r.headers.get('x-content-type-options'), 'nosniff');
    const html = await r.text();
    assert.doesNotMatch(html, /<script>(?!<\/)/, 'no inline script');
    const asset = html.match(/src="(\/assets\/[^"]+\.js)"/)[1];
    const a = await fetch(srv.url + asset);
    assert.match(a.headers.get('cache-control'), /immutable/);
    for (const p of ['/api/2.0/mlflow/nope', '/ajax-api/2.0/nope', '/assets/app-NOPE.js']) {
      const x = await fetch(srv.url + p);
      assert.equal(x.status, 404, p);
      assert.doesNotMatch(await x.text(), /<html/i, p);
    }
  });

  test('workspace browser lists experiments and searches by name', async () => {
    await page.goto(srv.url + '/');
    await page.waitForSelector('.experiment-row');
    await page.fill('input[aria-label="Search experiments"]', 'sweep');
    await page.waitForSelector('.search-results a:has-text("vision-sweep")');
    await screenshot(page, 'workspace-single-user');
  });

  test("the README's experiment is reached by browsing from the root; every breadcrumb leads somewhere", async () => {
    const name = '/Users/alice@example.com/mnist';
    const exp = await createExperiment(srv, name);
    const run = await createRun(srv, exp, 'readme-run', { start: Date.now() });
    await finishRun(srv, run);
    // A workspace file in a folder nobody created.
    await srv.api('PUT', '/api/2.0/fs/files/Workspace/Users/alice@example.com/helpers/util.py', 'print(1)\n');
    await page.goto(srv.url + '/');
    // The root offers the recent experiments and runs.
    await page.waitForSelector(`[data-testid=recent-experiments] a:has-text("${name}")`);
    await page.waitForSelector('[data-testid=recent-runs] a:has-text("readme-run")');
    await screenshot(page, 'workspace-root-recent');
    await page.click('.folder-row a:text-is("Users")');
    await page.waitForSelector('.page-head h1:text-is("Users")');
    await page.click('.folder-row a:text-is("alice@example.com")');
    await page.waitForSelector('.page-head h1:text-is("alice@example.com")');
    assert.equal(await page.locator('.empty').count(), 0, 'the folder says it is empty');
    await screenshot(page, 'workspace-implicit-folder');
    await page.click('.folder-row a:text-is("helpers")');
    await page.waitForSelector('.file-row a:text-is("util.py")');
    await page.goBack();
    await page.waitForSelector('.experiment-row a:text-is("mnist")');
    await page.click('.experiment-row a:text-is("mnist")');
    await page.waitForSelector(`.page.experiment h1:has-text("${name}")`);
    // The experiment's breadcrumb and the run's lead back to the folder.
    await page.waitForSelector('[data-testid=experiment-crumbs] a:text-is("alice@example.com")');
    await page.goto(srv.url + '/runs/' + run);
    await page.click('[data-testid=run-crumbs] a:text-is("alice@example.com")');
    await page.waitForSelector('.experiment-row a:text-is("mnist")');
    assert.equal(await page.locator('.error').count(), 0);
    await page.click('[data-testid=folder-crumbs] a:text-is("Users")');
    await page.waitForSelector('.folder-row a:text-is("alice@example.com")');
  });

  test('no CSP violations or script errors on any page', () => {
    assert.deepEqual(br.problems, []);
  });
});

describe('multi-user', () => {
  test('login, folders, experiments and the permissions dialog (CSRF header on changes)', async () => {
    const mu = await startServer({ auth: 'on', extraArgs: ['--admin-email', 'admin@example.com'] });
    const b = await launch();
    try {
      const pw = /one-time password (\S+)/.exec(mu.stderr)?.[1];
      assert.ok(pw, 'one-time password printed');
      const p = b.page;
      await p.goto(mu.url + '/');
      await p.waitForSelector('form.login');
      await screenshot(p, 'login');
      await p.fill('input[name=email]', 'admin@example.com');
      await p.fill('input[name=password]', 'wrong password');
      await p.click('button[type=submit]');
      await p.waitForSelector('.login .error-text:not(:empty)');
      await p.fill('input[name=password]', pw);
      await p.click('button[type=submit]');
      await p.waitForSelector('.folder-row a:has-text("Users")');
      assert.ok(await p.locator('.folder-row a:has-text("Shared")').count());
      await p.click('.folder-row a:has-text("Shared")');
      await p.waitForSelector('.page-head h1:has-text("Shared")');
      await p.fill('input[aria-label=Name]', 'team-a');
      await p.click('button:has-text("New folder")');
      await p.waitForSelector('.page-head h1:has-text("team-a")');
      await p.fill('input[aria-label=Name]', 'resnet');
      await p.click('button:has-text("New experiment")');
      await p.waitForSelector('.page.experiment h1:has-text("/Shared/team-a/resnet")');
      await p.click('button:has-text("Permissions")');
      await p.waitForSelector('.modal');
      await p.fill('.modal input[aria-label=Principal]', 'admin@example.com');
      await p.click('.modal button:has-text("Grant")');
      await p.waitForSelector('.modal td:has-text("admin@example.com")');
      await screenshot(p, 'permissions-dialog');
      assert.deepEqual(b.problems.filter((x) => !/401|403/.test(x)), []);
    } finally {
      await b.close();
      await mu.stop();
    }
  });
});
