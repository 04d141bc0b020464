import assert from 'node:assert/strict';
import { test } from 'node:test';
import { fmtAmount, gpuHoursText } from '../../src/lib/gpuhours';

test('GPU-hours text: hours, attempts and cost; empty without GPUs', () => {
  assert.equal(gpuHoursText({ gpu_hours: 0 }), '');
  assert.equal(gpuHoursText({ gpu_hours: 3 }), '3.00 GPU-hours');
  assert.equal(gpuHoursText({ gpu_hours: 3, cost: 12 }, 2), '3.00 GPU-hours in 2 attempts · cost 12.00');
  assert.equal(gpuHoursText({ gpu_hours: 0.001, cost: 0 }, 1), '0.0010 GPU-hours · cost 0');
  assert.equal(fmtAmount(0.005), '0.0050');
});
