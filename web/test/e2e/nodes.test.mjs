// Browser test of node health: a real server fed GPU samples through the
// agents' API (as `sextant agent` posts them) with an Xid error, a lost GPU
// and a throttle span on node gpu-07 while a run held it, and a healthy
// node gpu-08. The GPU pane flags gpu-07 with the reason and links it to
// its node page, which lists the faults with the run. Screenshots:
// gpu-pane-flagged.png, node-page.png.
//
//   cd web && node --test test/e2e/nodes.test.mjs

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { createExperiment, createRun, launch, screenshot, startServer } from './harness.mjs';

let srv;
let br;
let page;
let run;

const gpu = (i, extra = {}) => ({ index: i, uuid: 'GPU-' + i, name: 'Simulated H100', util: 80, mem_used: 20 * 2 ** 30, mem_total: 80 * 2 ** 30, temp: 60, power: 400, power_limit: 700, sm_clock: 1980, sm_clock_max: 1980, throttle_reasons: 0, ...extra });

before(async () => {
  srv = await startServer();
  br = await launch();
  page = br.page;
  const exp = await createExperiment(srv, 'nodes-test');
  run = await createRun(srv, exp, 'pretrain');
  const t0 = Date.now() - 45_000; // the last sample is recent: the nodes are not stale
  const steps = [
    {},
    { 1: { xid: 79 } }, // Xid 79 on GPU 1
    { 2: { throttle_reasons: 0x40, sm_clock: 1100, temp: 91 } }, // GPU 2 slows down for heat
    { 2: { throttle_reasons: 0x40, sm_clock: 1100, temp: 92 } },
    { 3: { error: 'GPU has fallen off the bus' } }, // GPU 3 lost; GPU 2's span ends
  ];
  const samples = steps.map((s, k) => ({ ts_ms: t0 + k * 10_000, gpus: [0, 1, 2, 3].map((i) => (s[i]?.error ? { index: i, uuid: 'GPU-' + i, name: 'Simulated H100', error: s[i].error } : gpu(i, s[i] ?? {}))) }));
  await srv.api('POST', '/api/2.0/sextant/gpu/samples', { node: 'gpu-07', run_id: run, node_rank: 0, num_nodes: 1, samples });
  // Sent again (an agent's spool replay): nothing is stored twice.
  await srv.api('POST', '/api/2.0/sextant/gpu/samples', { node: 'gpu-07', run_id: run, node_rank: 0, num_nodes: 1, samples });
  await srv.api('POST', '/api/2.0/sextant/gpu/samples', { node: 'gpu-08', samples: samples.map((s) => ({ ts_ms: s.ts_ms, gpus: [gpu(0), gpu(1)] })) });
});

after(async () => {
  await br?.close();
  await srv?.stop();
});

test('the GPU pane flags a node with repeated faults and its page lists them with the run', async () => {
  await page.goto(srv.url + '/gpu?gpu_poll_ms=1000&gpu_idle_ms=60000');
  const flag = '.gpu-node[data-node="gpu-07"] .node-flag';
  await page.waitForSelector(flag);
  assert.match(await page.textContent(flag), /lost a GPU/);
  assert.equal(await page.getAttribute(flag, 'title'), 'lost a GPU in the last 24 hours; 2 faults in 7 days (1 Xid, 1 lost GPU)');
  await page.waitForSelector('.gpu-node[data-node="gpu-08"] .gpu-card');
  assert.equal(await page.locator('.gpu-node[data-node="gpu-08"] .node-flag').count(), 0);
  await screenshot(page, 'gpu-pane-flagged');

  await page.click('.gpu-node[data-node="gpu-07"] h3 a.node-link');
  await page.waitForSelector('.node-page[data-node="gpu-07"] .node-history[data-events]');
  assert.equal(new URL(page.url()).pathname, '/gpu/node/gpu-07');
  assert.match(await page.textContent('[data-testid=node-flag]'), /Flagged: lost a GPU/);
  const kinds = await page.$$eval('.node-event', (rows) => rows.map((r) => r.dataset.kind + ':' + r.dataset.gpu));
  assert.deepEqual(kinds, ['lost:3', 'throttle:2', 'xid:1']);
  const xid = await page.textContent('.node-event[data-kind=xid]');
  assert.match(xid, /Xid error 79/);
  assert.match(xid, /fallen off the bus/);
  assert.match(await page.textContent('.node-event[data-kind=throttle]'), /20s/);
  for (const row of await page.$$('.node-event')) assert.equal(await row.$eval('.node-event-runs a', (a) => a.getAttribute('href')), '/runs/' + run);
  assert.equal(await page.textContent('.node-counts tr[data-window="Last 24 hours"] td:nth-of-type(1)'), '1');
  // The node's GPUs now: the GPU pane for the node only.
  await page.waitForSelector('.node-page .gpu-node[data-node="gpu-07"] .gpu-card[data-gpu="3"]');
  assert.equal(await page.locator('.node-page .gpu-node').count(), 1);
  await screenshot(page, 'node-page');
});
