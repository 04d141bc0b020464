import assert from 'node:assert/strict';
import { test } from 'node:test';
import { emaDebiased } from '../../src/lib/smooth';

test('weight 0 returns the values unchanged', () => {
  assert.deepEqual(emaDebiased([1, 2, null, 4], 0), [1, 2, null, 4]);
});

test('the debiased EMA starts at the first value, not at 0', () => {
  const out = emaDebiased([10, 20, 30], 0.6);
  assert.equal(out[0], 10);
  // last = 10*.4 = 4 -> 4/(1-.6) = 10; then 4*.6 + 20*.4 = 10.4 -> 10.4/(1-.36) = 16.25
  assert.ok(Math.abs((out[1] as number) - 16.25) < 1e-9, String(out[1]));
  assert.ok((out[2] as number) > (out[1] as number) && (out[2] as number) < 30);
});

test('a constant series stays constant', () => {
  assert.deepEqual(emaDebiased([3, 3, 3, 3], 0.9), [3, 3, 3, 3]);
});

test('missing and non-finite values keep their place and stay out of the average', () => {
  const out = emaDebiased([1, null, NaN, Infinity, 1, 2], 0.5);
  assert.equal(out[1], null);
  assert.ok(Number.isNaN(out[2] as number));
  assert.equal(out[3], Infinity);
  assert.equal(out[4], 1); // only finite 1s seen so far
  assert.ok((out[5] as number) > 1 && (out[5] as number) < 2);
});

test('a million points smooth in well under a second', () => {
  const ys = Float64Array.from({ length: 1_000_000 }, (_, i) => Math.sin(i / 100));
  const t0 = performance.now();
  emaDebiased(ys, 0.9);
  assert.ok(performance.now() - t0 < 1000);
});
