import assert from 'node:assert/strict';
import { test } from 'node:test';
import { binAlign, groupBands } from '../../src/lib/bins';

test('binAlign keeps each bin’s lowest and highest point in order, on one x axis for every series', () => {
  const a = { xs: [0, 1, 2, 3, 10, 11], ys: [5, 1, 9, 4, 2, 2] };
  const b = { xs: [0.5, 10.5], ys: [7, 8] };
  const [xs, ya, yb] = binAlign([a, b], 0, 12, 2);
  // Bins [0,6) and [6,12]: two slots each, at 1.5, 4.5, 7.5 and 10.5;
  // the last is left out, as no series needs it (a's second bin is flat).
  assert.deepEqual(xs, [1.5, 4.5, 7.5]);
  // a's first bin: the lowest (1, at x=1) comes before the highest (9, at x=2).
  assert.deepEqual(ya, [1, 9, 2]);
  assert.deepEqual(yb, [7, null, 8]);
});

test('binAlign keeps a single spike among many points', () => {
  const xs = Array.from({ length: 10000 }, (_, i) => i);
  const ys = xs.map((x) => (x === 7777 ? 1e6 : Math.sin(x)));
  const [bx, by] = binAlign([{ xs, ys }], 0, 9999, 100);
  assert.ok(bx.length <= 200);
  assert.ok(by.includes(1e6), 'the spike survives');
});

test('binAlign leaves out non-finite values and keeps one point beyond each edge of a zoom', () => {
  const s = { xs: [0, 5, 10, 15, 20], ys: [1, NaN, 3, null, 5] };
  const [xs, ys] = binAlign([s], 8, 12, 4);
  assert.deepEqual(xs[0], 5); // the last point before the range, at its own x
  assert.equal(xs[xs.length - 1], 15);
  assert.equal(ys[0], null, 'NaN at the left edge is no value');
  assert.ok(ys.includes(3));
});

test('binAlign of many runs is bounded by the bins, not the runs', () => {
  const series = Array.from({ length: 100 }, (_, r) => {
    const xs = Array.from({ length: 500 }, (_, i) => i * 20 + r); // each run at its own steps
    return { xs, ys: xs.map((x) => x * r) };
  });
  const out = binAlign(series, 0, 10099, 400);
  assert.equal(out.length, 101);
  assert.ok(out[0].length <= 800, 'x slots: ' + out[0].length);
  for (let i = 1; i < out[0].length; i++) assert.ok(out[0][i] > out[0][i - 1], 'ascending');
});

test('groupBands gives the mean of the runs and the lowest and highest of them per bin', () => {
  const g1 = [
    { xs: [0, 1, 2, 3], ys: [1, 1, 1, 1] },
    { xs: [0, 1, 2, 3], ys: [3, 3, 5, 5] },
  ];
  const g2 = [{ xs: [2, 3], ys: [10, 20] }];
  const { xs, bands } = groupBands([g1, g2], 0, 3, 2);
  assert.deepEqual(xs, [0.75, 2.25]);
  assert.deepEqual(bands[0].mean, [2, 3]); // (1 + 3) / 2, (1 + 5) / 2
  assert.deepEqual(bands[0].lo, [1, 1]);
  assert.deepEqual(bands[0].hi, [3, 5]);
  assert.deepEqual(bands[0].runs, [2, 2]);
  assert.deepEqual(bands[1].mean, [null, 15]);
  assert.deepEqual(bands[1].runs, [0, 1]);
});

test('groupBands averages runs, not points: a run with more points in a bin weighs as one', () => {
  const { bands } = groupBands([[{ xs: [0, 0.1, 0.2, 0.3], ys: [10, 10, 10, 10] }, { xs: [0.5], ys: [0] }]], 0, 1, 1);
  assert.deepEqual(bands[0].mean, [5]);
});

import { enqueue, plan } from '../../src/lib/fetchq';

test('plan splits runs of medium length so each request is sampled exactly, and leaves long or unknown ones 100 a request', () => {
  const ids = Array.from({ length: 100 }, (_, i) => 'r' + i);
  // 100 runs of 2,000 points: 200,000 in all, in 4 requests of at most 65,536.
  const p = plan(ids, 200, () => 2_000);
  assert.equal(p.length, 4);
  assert.deepEqual(p.flat().sort(), [...ids].sort());
  for (const r of p) assert.ok(r.length * 2_000 <= 64 * 1024, `${r.length} runs of 2,000 points in one request`);
  // 100 runs of 10,000 points would need 16 requests: one, from sketches.
  assert.equal(plan(ids, 200, () => 10_000).length, 1);
  // Long runs: summaries give the points asked; unknown: as before.
  assert.equal(plan(ids, 200, () => 1_000_000).length, 1);
  assert.equal(plan(ids, 200).length, 1);
  // Too many requests needed (100,000 points each): summaries it is.
  assert.equal(plan(ids, 200, () => 100_000).length, 1);
  // Few points in all: one request; a few more: two.
  assert.equal(plan(ids, 200, () => 500).length, 1);
  assert.equal(plan(ids, 200, () => 1000).length, 2);
  assert.equal(plan([...ids, ...ids.map((x) => x + 'b')], 200).length, 2);
});

test('a prefetch (an off-screen chart) waits until the on-screen requests are done, then runs', async () => {
  const order: string[] = [];
  let release!: () => void;
  const onScreen = enqueue(
    () =>
      new Promise<void>((r) => {
        order.push('on-screen start');
        release = () => (order.push('on-screen end'), r());
      }),
    () => 0,
  );
  let off = true;
  const prefetch = enqueue(async () => void order.push('prefetch start'), () => 900, undefined, () => off);
  await new Promise((r) => setTimeout(r, 20));
  assert.deepEqual(order, ['on-screen start']);
  release();
  await Promise.all([onScreen, prefetch]);
  assert.deepEqual(order, ['on-screen start', 'on-screen end', 'prefetch start']);
  // Scrolled into view while it waits: it no longer waits.
  order.length = 0;
  const busy = enqueue(() => new Promise<void>((r) => ((release = r), order.push('busy'))), () => 0);
  const later = enqueue(async () => void order.push('later'), () => 900, undefined, () => off);
  await new Promise((r) => setTimeout(r, 20));
  assert.deepEqual(order, ['busy']);
  off = false;
  const nudge = enqueue(async () => void order.push('nudge'), () => 1000); // any enqueue pumps the queue
  await Promise.all([later, nudge]);
  assert.deepEqual(order, ['busy', 'later', 'nudge']);
  release();
  await busy;
  // An off-screen chart nearer than one on screen still waits for it.
  order.length = 0;
  const first = enqueue(() => new Promise<void>((r) => ((release = r), order.push('first'))), () => 0);
  const near = enqueue(async () => void order.push('near, off screen'), () => 10, undefined, () => true);
  const far = enqueue(async () => void order.push('far, on screen'), () => 500);
  await far;
  assert.deepEqual(order, ['first', 'far, on screen']);
  release();
  await Promise.all([first, near]);
  assert.deepEqual(order, ['first', 'far, on screen', 'near, off screen']);
});
