import assert from 'node:assert/strict';
import { test } from 'node:test';
import { align, envelope, mergeRange, parseValue, plottable, Point } from '../../src/lib/series';

const pts = (steps: number[], v = (s: number) => s): Point[] => steps.map((s) => ({ step: s, ts: s * 10, value: v(s) }));

test('mergeRange replaces the zoomed range with the full-resolution points', () => {
  const base = pts([0, 100, 200, 300, 400, 500]);
  const detail = pts([200, 210, 220, 230, 290, 300]);
  const out = mergeRange(base, detail, 200, 300);
  assert.deepEqual(out.map((p) => p.step), [0, 100, 200, 210, 220, 230, 290, 300, 400, 500]);
});

test('mergeRange keeps a spike the overview had outside the range and drops detail outside it', () => {
  const base = pts([0, 50, 100], (s) => (s === 50 ? 1e6 : 1));
  const out = mergeRange(base, pts([90, 95, 100, 150]), 90, 100);
  assert.deepEqual(out.map((p) => p.step), [0, 50, 90, 95, 100]);
  assert.equal(out[1].value, 1e6);
});

test('mergeRange with an empty detail (no points in range) empties the range only', () => {
  assert.deepEqual(mergeRange(pts([1, 2, 3, 4]), [], 2, 3).map((p) => p.step), [1, 4]);
});

test('envelope gives each point its bucket minimum and maximum', () => {
  const xs = [0, 1, 2, 3, 4, 5, 6, 7];
  const ys = [1, 9, 2, 3, 5, 5, null, -4];
  const { lo, hi } = envelope(xs, ys, 4);
  assert.deepEqual(lo, [1, 1, 2, 2, 5, 5, null, -4]);
  assert.deepEqual(hi, [9, 9, 3, 3, 5, 5, null, -4]);
});

test('align puts runs with different steps on one axis, null where a run has no point', () => {
  const [xs, a, b] = align([
    { xs: [0, 2, 4], ys: [1, 2, 3] },
    { xs: [1, 2, 5], ys: [10, 20, 30] },
  ]);
  assert.deepEqual(xs, [0, 1, 2, 4, 5]);
  assert.deepEqual(a, [1, null, 2, 3, null]);
  assert.deepEqual(b, [null, 10, 20, null, 30]);
});

test('align keeps the first of duplicate x values and reuses shared axes', () => {
  const [xs, a] = align([{ xs: [0, 1, 1, 2], ys: [5, 6, 7, 8] }]);
  assert.deepEqual(xs, [0, 1, 2]);
  assert.deepEqual(a, [5, 6, 8]);
  const same = align([
    { xs: [1, 2, 3], ys: [1, 1, 1] },
    { xs: [1, 2, 3], ys: [2, 2, 2] },
  ]);
  assert.deepEqual(same, [[1, 2, 3], [1, 1, 1], [2, 2, 2]]);
});

test('values from the API: NaN and infinities as strings; non-finite values are not plotted', () => {
  assert.ok(Number.isNaN(parseValue('NaN')));
  assert.equal(parseValue('Infinity'), Infinity);
  assert.equal(parseValue('-Infinity'), -Infinity);
  assert.equal(parseValue(1e308), 1e308);
  assert.equal(plottable(NaN, false), null);
  assert.equal(plottable(Infinity, false), null);
  assert.equal(plottable(0, true), null);
  assert.equal(plottable(1e308, false), 1e308);
});

test('aligning 20 runs of 2,500 points each is fast', () => {
  const runs = Array.from({ length: 20 }, (_, r) => {
    const xs = Array.from({ length: 2500 }, (_, i) => i * 400 + r);
    return { xs, ys: xs.map((x) => Math.sin(x)) };
  });
  const t0 = performance.now();
  const out = align(runs);
  assert.equal(out.length, 21);
  assert.ok(performance.now() - t0 < 500);
});
