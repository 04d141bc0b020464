import assert from 'node:assert/strict';
import { test } from 'node:test';
import { breakAtGaps, bucketMax, defaultMetricKeys, lineAt, LogDensity, nearestIndex, stepGap, stepRange, stepsPerSecond, ticks } from '../../src/lib/timeline';

test('steps per second from metric timestamps', () => {
  // Steps 0..4 a second apart, then 10 steps in one second, then a resumed
  // run that replays steps 3.. (no rate across the replay).
  const pts = [0, 1, 2, 3, 4].map((s) => ({ step: s, ts: 1000 * s })).concat([{ step: 14, ts: 5000 }, { step: 3, ts: 6000 }, { step: 5, ts: 7000 }]);
  assert.deepEqual(stepsPerSecond(pts), [[1000, 1], [2000, 1], [3000, 1], [4000, 1], [5000, 10], [7000, 2]]);
  assert.deepEqual(stepsPerSecond([{ step: 1, ts: 5 }, { step: 2, ts: 5 }]), []);
});

test('a time opens the log at the first line of its bucket, or the next bucket with lines', () => {
  const d: LogDensity = { from_ms: 1000, to_ms: 5000, bucket_ms: 1000, lines: [10, 0, 5, 0], first_lines: [1, 0, 11, 0], total_lines: 15 };
  assert.equal(lineAt(d, 1500), 1);
  assert.equal(lineAt(d, 2500), 11); // empty bucket: the next one
  assert.equal(lineAt(d, 3999), 11);
  assert.equal(lineAt(d, 4500), 15); // after the last lines: the last line
  assert.equal(lineAt(d, 0), 1);
  assert.equal(lineAt(null, 1), 1);
});

test('ticks are round and far enough apart', () => {
  const day = 86_400_000;
  const { step, times } = ticks(0, day, 1200);
  assert.ok(step >= (day * 90) / 1200, `step ${step}`);
  assert.ok(times.length >= 5 && times.length <= 14, `${times.length} ticks`);
  for (let i = 1; i < times.length; i++) assert.equal(times[i] - times[i - 1], step);
  assert.equal(ticks(0, 10_000, 1000).step, 1000);
});

test('bucketMax keeps the peak of each bucket', () => {
  const pts: [number, number][] = Array.from({ length: 100 }, (_, i) => [i, i === 37 ? 1000 : 1]);
  const out = bucketMax(pts, 0, 100, 10);
  assert.equal(out.length, 10);
  assert.equal(Math.max(...out.map((p) => p[1])), 1000);
  assert.equal(bucketMax(pts.slice(0, 5), 0, 100, 10).length, 5);
});

test('steps per second over a minimum step gap: a minmax sample\'s close pairs give no rate of their own', () => {
  // 1 step/s, sampled as minmax pairs a step apart with one jittery pair.
  const pts = [
    { step: 0, ts: 0 },
    { step: 1, ts: 100 }, // jitter: 10 steps/s over one step
    { step: 100, ts: 100_000 },
    { step: 101, ts: 101_000 },
    { step: 200, ts: 200_000 },
  ];
  assert.deepEqual(stepsPerSecond(pts, 50), [[100_000, 1], [200_000, 1]]);
  assert.equal(stepsPerSecond(pts)[0][1], 10, 'without a gap, every pair');
  // A replay (the step goes back) still starts a new segment.
  assert.deepEqual(stepsPerSecond([{ step: 0, ts: 0 }, { step: 100, ts: 10_000 }, { step: 50, ts: 20_000 }, { step: 150, ts: 30_000 }], 50), [[10_000, 10], [30_000, 10]]);
  assert.equal(stepGap(Array.from({ length: 10 }, (_, i) => ({ step: i * 10_000, ts: i }))), 90);
  assert.equal(stepGap([{ step: 3, ts: 0 }]), 1);
});

test('nearestIndex finds the point nearest a time', () => {
  const ts = [10, 20, 30, 40];
  assert.equal(nearestIndex(ts, 0), 0);
  assert.equal(nearestIndex(ts, 24), 1);
  assert.equal(nearestIndex(ts, 26), 2);
  assert.equal(nearestIndex(ts, 99), 3);
  assert.equal(nearestIndex([], 1), -1);
});

test('stepRange covers a time range with the points just outside it', () => {
  const pts = Array.from({ length: 11 }, (_, i) => ({ step: i * 100, ts: i * 1000 }));
  assert.deepEqual(stepRange(pts, 2500, 4500), { start: 200, end: 500 });
  assert.deepEqual(stepRange(pts, -5, 99_999), { start: 0, end: 1000 });
  assert.equal(stepRange([], 0, 1), null);
});

test('the metrics shown by default: a loss first, then natural order, no system metrics, at most n', () => {
  const keys = ['system/gpu_0_utilization_percentage', 'lr', 'layer_10', 'layer_2', 'train/loss', 'acc', 'lr'];
  assert.deepEqual(defaultMetricKeys(keys), ['train/loss', 'acc', 'layer_2', 'layer_10']);
  assert.deepEqual(defaultMetricKeys(keys, 2), ['train/loss', 'acc']);
  assert.deepEqual(defaultMetricKeys(['loss', 'val/loss', 'x']), ['loss', 'val/loss', 'x']);
  assert.deepEqual(defaultMetricKeys(['system/cpu']), []);
});

test('breakAtGaps stops a line at a gap far longer than the spacing, and nowhere else', () => {
  const pts: [number, number][] = [];
  for (let t = 0; t <= 100; t += 2) pts.push([t, 1]);
  for (let t = 400; t <= 500; t += 2) pts.push([t, 2]);
  const out = breakAtGaps(pts);
  const gaps = out.filter((p) => p[1] == null);
  assert.deepEqual(gaps, [[250, null]]);
  assert.equal(out.length, pts.length + 1);
  // Twice as slow for a while is not a gap.
  const slow: [number, number][] = [];
  for (let t = 0, i = 0; i < 100; i++) slow.push([(t += i > 40 && i < 60 ? 4 : 2), 1]);
  assert.equal(breakAtGaps(slow).filter((p) => p[1] == null).length, 0);
  assert.equal(breakAtGaps(pts, 5, 1_000).filter((p) => p[1] == null).length, 0, 'minGap');
});
