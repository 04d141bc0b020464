import assert from 'node:assert/strict';
import { test } from 'node:test';
import { heatmap, median, shade } from '../../src/lib/progress';

test('median of odd and even counts, and of none', () => {
  assert.equal(median([3, 1, 2]), 2);
  assert.equal(median([4, 1, 3, 2]), 2.5);
  assert.equal(median([]), null);
});

test('heatmap puts each rank in a row and each report in its time bucket', () => {
  const t0 = 1_800_000_000_000;
  const fast = { rank: 0, node: 'a', gpu: 0, step_time_s: [0, 1, 2, 3].map((i) => [i, t0 + i * 1000, 0.1] as [number, number, number]) };
  const slow = { rank: 1, node: 'a', step_time_s: [[0, t0, 0.5], [1, t0 + 3000, 0.7]] as [number, number, number][] };
  const m = heatmap([slow, fast], 2);
  assert.deepEqual(m.rows.map((r) => r.rank), [0, 1]);
  assert.equal(m.fromMs, t0);
  assert.equal(m.bucketMs, 1501);
  assert.deepEqual(m.rows[0].cells, [0.1, 0.1]);
  assert.deepEqual(m.rows[1].cells, [0.5, 0.7]);
  assert.equal(m.rows[1].gpu, null);
  assert.equal(m.median, (0.1 + 0.6) / 2);
  assert.deepEqual(heatmap([], 10).rows, []);
});

test('shade is white at the median, red when slower, blue when faster', () => {
  assert.equal(shade(1, 1), 'rgb(255,255,255)');
  assert.equal(shade(4, 1), 'rgb(255,0,0)');
  assert.equal(shade(0.5, 1), 'rgb(0,0,255)');
  assert.equal(shade(null, 1), 'transparent');
});
