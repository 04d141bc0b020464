import assert from 'node:assert/strict';
import { test } from 'node:test';
import { breakdownText, fmtPct, Goodput, goodputLine, goodputText } from '../../src/lib/goodput';

const g: Goodput = {
  run_id: 'r',
  goodput: 3.75 / 16,
  breakdown: { wall_s: 16, productive_s: 3.75, data_wait_s: 0.25, checkpoint_s: 0.5, lost_s: 2, hung_s: 3, idle_s: 2.5, startup_s: 2, other_s: 2 },
  reference_rank: 0,
  throughput: { samples_per_s: 96 / 6.5, tokens_per_s: null },
  recent_throughput: { samples_per_s: null, tokens_per_s: null },
  mfu: { mfu: 0.4123, dtype: 'bf16', devices: 2 },
  series: [{ time_ms: 1000, step: 1, goodput: 0.375 }, { time_ms: 2000, step: 2, goodput: 0.5 }],
};

test('goodput text: goodput, MFU and throughput; parts left out when unknown', () => {
  assert.equal(goodputText(g), '23.4% goodput · MFU 41.2% · 14.8 samples/s');
  assert.equal(goodputText({ ...g, goodput: null, mfu: { ...g.mfu, mfu: null }, throughput: { samples_per_s: 1234.4, tokens_per_s: 5e5 } }), '1234 samples/s · 500000 tokens/s');
  assert.equal(goodputText({ ...g, goodput: null, mfu: { ...g.mfu, mfu: null }, throughput: { samples_per_s: null, tokens_per_s: null } }), '');
  assert.equal(fmtPct(1), '100.0%');
});

test('breakdown text: each category with time, as a share of the wall, in order', () => {
  assert.equal(breakdownText(g.breakdown),
    'productive 23.4%, data wait 1.6%, checkpoint 3.1%, lost 12.5%, hung 18.8%, idle 15.6%, start-up 12.5%, other 12.5%');
  assert.equal(breakdownText({ ...g.breakdown, wall_s: 0 }), '');
  assert.equal(breakdownText({ wall_s: 4, productive_s: 3, data_wait_s: 0, checkpoint_s: 0, lost_s: 1, hung_s: 0, idle_s: 0, startup_s: 0, other_s: 0 }), 'productive 75.0%, lost 25.0%');
});

test('goodput line: a point per step end', () => {
  assert.deepEqual(goodputLine(g), [[1000, 0.375], [2000, 0.5]]);
  assert.deepEqual(goodputLine(null), []);
});
