import assert from 'node:assert/strict';
import { test } from 'node:test';
import { countsText, eventDuration, kindLabel, nodeHref } from '../../src/lib/nodehealth';

test('node health: counts in words, faults before throttling; empty when none', () => {
  assert.equal(countsText({ xid: 0, ecc: 0, throttle: 0, lost: 0 }), '');
  assert.equal(countsText(undefined), '');
  assert.equal(countsText({ xid: 2, ecc: 1, throttle: 3, lost: 1 }), '2 Xid · 1 ECC · 1 lost · 3 throttling');
  assert.equal(countsText({ xid: 0, ecc: 0, throttle: 4, lost: 0 }), '4 throttling');
});

test('node health: a throttle span lasts from its start to its end, or is ongoing', () => {
  const base = { kind: 'throttle', gpu: 0, message: '', run_ids: [] };
  assert.equal(eventDuration({ ...base, time_ms: 1000, end_ms: 91_000 }, 0), '1m 30s');
  assert.equal(eventDuration({ ...base, time_ms: 1000, open: true }, 11_000), 'ongoing, 10s');
  assert.equal(eventDuration({ ...base, kind: 'xid', time_ms: 1000 }, 5000), '');
});

test('node health: kinds and node links', () => {
  assert.equal(kindLabel('lost'), 'Lost GPU');
  assert.equal(kindLabel('new-kind'), 'new-kind');
  assert.equal(nodeHref('rack 1/gpu-07'), '/gpu/node/rack%201%2Fgpu-07');
});
