import assert from 'node:assert/strict';
import { test } from 'node:test';
import { gpuKey, keyPrefix, naturalCompare, sections, systemCharts } from '../../src/lib/keys';
import { groupRuns, parseGroupBy } from '../../src/lib/groups';

test('sections by prefix: unprefixed first, system last, natural order', () => {
  const keys = ['val/loss', 'system/cpu', 'loss', 'train/layer_10', 'train/layer_2', 'acc'];
  const secs = sections([...keys].sort(naturalCompare), (k) => k);
  assert.deepEqual(secs.map((s) => s.name), ['', 'train', 'val', 'system']);
  assert.deepEqual(secs[1].items, ['train/layer_2', 'train/layer_10']);
  assert.equal(keyPrefix('/odd'), '');
});

test('gpuKey reads MLflow GPU system metrics with and without a node', () => {
  assert.deepEqual(gpuKey('system/gpu_3_utilization_percentage'), { node: '', gpu: 3, field: 'utilization_percentage' });
  assert.deepEqual(gpuKey('system/node_1/gpu_0_power_usage_watts'), { node: 'node_1', gpu: 0, field: 'power_usage_watts' });
  assert.equal(gpuKey('system/cpu_utilization_percentage'), null);
  assert.equal(gpuKey('train/gpu_0_x'), null);
});

test('systemCharts: one chart per GPU field and node with a line per GPU, in GPU order', () => {
  const keys: string[] = [];
  for (const node of ['node_0', 'node_1']) for (let g = 9; g >= 0; g--) for (const f of ['utilization_percentage', 'memory_usage_megabytes']) keys.push(`system/${node}/gpu_${g}_${f}`);
  keys.push('system/cpu_utilization_percentage');
  const charts = systemCharts(keys);
  assert.equal(charts.length, 2 * 2 + 1); // 40 keys of GPUs, 4 charts
  const util = charts.find((c) => c.id === 'system/node_1/gpu_*_utilization_percentage')!;
  assert.deepEqual(util.keys.map((k) => k.label), Array.from({ length: 10 }, (_, i) => 'node_1 GPU ' + i));
});

const run = (id: string, params: Record<string, string>, tags: Record<string, string> = {}) =>
  ({ info: { run_id: id, run_name: id, experiment_id: '1', status: 'FINISHED' }, data: { metrics: [], params: Object.entries(params).map(([key, value]) => ({ key, value })), tags: Object.entries(tags).map(([key, value]) => ({ key, value })) } }) as any;

test('groupRuns groups by a param or tag, values in natural order, missing last', () => {
  const runs = [run('a', { lr: '10' }), run('b', { lr: '2' }), run('c', {}), run('d', { lr: '2' }, { team: 'x' })];
  const g = groupRuns(runs, parseGroupBy('params.lr')!);
  assert.deepEqual(g.map((x) => [x.value, x.runs.map((r) => r.info.run_id)]), [['2', ['b', 'd']], ['10', ['a']], ['(none)', ['c']]]);
  assert.deepEqual(groupRuns(runs, parseGroupBy('tags.team')!).map((x) => x.value), ['x', '(none)']);
  assert.equal(parseGroupBy('metrics.loss'), null);
});
