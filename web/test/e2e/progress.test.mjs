// Browser test of the run page's Progress tab: a real server, a run seeded
// through the HTTP API with 8 ranks' progress reports (rank 5 slower in the
// second half of the run) and its straggler event, opened in Chromium.
// Screenshot: progress.png.
//
//   cd web && node --test test/e2e/progress.test.mjs

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { canvasInk, createExperiment, createRun, launch, logBatch, screenshot, startServer } from './harness.mjs';

let srv;
let br;
let page;
let run;
const STEPS = 300;
const now = Math.floor(Date.now() / 1000) * 1000;
const start = now - STEPS * 2000;

before(async () => {
  srv = await startServer();
  br = await launch();
  page = br.page;
  const exp = await createExperiment(srv, 'progress-test');
  run = await createRun(srv, exp, 'sft-progress', { start });
  await logBatch(srv, run, { metrics: [{ key: 'loss', value: 1, timestamp: start + 1000, step: 1 }] });
  const reports = [];
  for (let rank = 0; rank < 8; rank++)
    for (let step = 0; step < STEPS; step++) {
      const base = 0.3 + ((step * 7 + rank * 13) % 10) / 1000;
      reports.push({ rank, gpu: rank % 4, step, time_ms: start + step * 2000, step_time_s: rank === 5 && step >= STEPS / 2 ? base * 1.8 : base, data_wait_s: 0.01 });
    }
  for (let i = 0; i < reports.length; i += 1000) {
    await srv.api('POST', '/api/2.0/sextant/progress', { run_id: run, node: "gpu-07", reports: reports.slice(i, i + 1000) });
  }
  await srv.api('POST', '/api/2.0/sextant/events/append', { run_id: run, events: [{
    kind: 'straggler', key: 'straggler:5:1', severity: 'warning', time_ms: start + (STEPS / 2 + 60) * 2000, open: true, node: 'gpu-07', gpu: 1,
    message: 'rank 5 (node gpu-07, GPU 1) is a straggler: median step time 0.54 s against 0.30 s for the other ranks (+80%) for 2m0s', attrs: { rank: '5' },
  }] });
});

after(async () => {
  await br?.close();
  await srv?.stop();
});

test('the Progress tab shows each rank\'s step time, the slow rank in red, and the straggler event', async () => {
  await page.goto(`${srv.url}/runs/${run}?tab=progress`);
  const heat = page.locator('[data-testid="progress-heat"]');
  await heat.waitFor({ timeout: 30_000 });
  const rows = await heat.locator('tbody tr').allTextContents();
  assert.equal(rows.length, 8, rows.join('\n'));
  assert.match(rows[0], /rank 0\s*gpu-07\s*0/);
  assert.match(rows[5], /rank 5.*\+\d\d%/);
  for (const [i, r] of rows.entries()) if (i !== 5) assert.match(r, /[+-]?[0-9]%$|0%$/, `rank ${i} is near the median: ${r}`);
  assert.ok((await canvasInk(page, 'tr[data-rank="0"] canvas')) > 0, 'rank 0 drawn');
  // Rank 5's row is red in its second half and not in its first.
  const red = await page.evaluate(() => {
    const c = document.querySelector('tr[data-rank="5"] canvas');
    const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    const redAt = (x) => {
      const i = (Math.floor(c.height / 2) * c.width + x) * 4;
      return d[i] === 255 && d[i + 1] < 120 && d[i + 2] < 120;
    };
    return { first: redAt(Math.floor(c.width / 4)), second: redAt(Math.floor((3 * c.width) / 4)) };
  });
  assert.deepEqual(red, { first: false, second: true });
  const stragglers = await page.locator('[data-testid="stragglers"] tbody tr').allTextContents();
  assert.equal(stragglers.length, 1);
  assert.match(stragglers[0], /5\s*gpu-07\s*1\s*rank 5 \(node gpu-07, GPU 1\) is a straggler.*still going on/);
  await screenshot(page, 'progress');
  assert.deepEqual(br.problems, []);
});

test('the Metrics tab leaves the progress metrics to the Progress tab', async () => {
  await page.goto(`${srv.url}/runs/${run}?tab=metrics`);
  await page.locator('.board .chart').first().waitFor({ timeout: 30_000 });
  const text = await page.locator('.tab-content').textContent();
  assert.ok(text.includes('loss'));
  assert.ok(!text.includes('sextant/progress/'), 'a progress chart on the Metrics tab');
});
