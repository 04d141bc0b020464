import assert from 'node:assert/strict';
import { test } from 'node:test';
import { checkpointRows, fmtMs, RunEvent, stateText, uploadMs } from '../../src/lib/checkpoints';

const save = (seq: number, step: number | undefined, path: string, outcome: string, at: number, end: number | undefined, extra: Record<string, unknown> = {}): RunEvent => ({
  seq,
  key: 'ckpt-save:' + seq,
  kind: 'checkpoint_save',
  time_ms: at,
  ...(end ? { end_ms: end } : { open: true }),
  ...(step != null ? { step } : {}),
  checkpoint: { path, outcome, ...extra },
});

test('a row per save event: step, size, ranks, mode/staging, blocked, upload, outcome', () => {
  const evs: RunEvent[] = [
    save(1, 1, '/Volumes/m/s/v/run/step_1', 'complete', 1000, 3000, { mode: 'sync', blocked_ms: 2000, bytes: 4096, files: 3, ranks: 2 }),
    save(2, 2, '/Volumes/m/s/v/run/step_2', 'complete', 10_000, 15_000, { mode: 'thread', staging: 'copy', blocked_ms: 800, bytes: 8192, ranks: 2 }),
    save(3, 3, '/Volumes/m/s/v/run/step_3', 'failed', 20_000, 21_000, { mode: 'process', staging: 'pinned', blocked_ms: 300, error: '<img src=x onerror=alert(1)> shard did not land', ranks: 2 }),
    { seq: 4, key: 'ckpt-load:a', kind: 'checkpoint_load', time_ms: 30_000, end_ms: 30_500, step: 2, checkpoint: { path: '/Volumes/m/s/v/run/step_2', outcome: 'complete', bytes: 8192, ranks: 2 } },
    { seq: 5, key: 'x', kind: 'gpu_xid', time_ms: 1 },
  ];
  const { rows, loads } = checkpointRows(evs, [], 'FINISHED');
  assert.deepEqual(rows.map((r) => r.step), [3, 2, 1], 'newest step first');
  const [s3, s2, s1] = rows;
  assert.equal(s1.mode, 'sync');
  assert.equal(s1.blockedMs, 2000);
  assert.equal(s1.uploadMs, undefined, 'a synchronous save blocked all along: no upload after it');
  assert.equal(s1.bytes, 4096);
  assert.equal(s1.files, 3);
  assert.equal(s2.mode, 'thread/copy');
  assert.equal(s2.uploadMs, 15_000 - 10_000 - 800);
  assert.equal(s2.landed, 15_000);
  assert.equal(s2.ranks, 2);
  assert.equal(s3.state, 'failed');
  assert.equal(stateText(s3), 'failed: <img src=x onerror=alert(1)> shard did not land');
  assert.equal(s3.mode, 'process/pinned');
  assert.ok(s2.latest && !s1.latest && !s3.latest, 'the newest complete save is the latest');
  assert.equal(loads.length, 1);
  assert.equal(loads[0].tookMs, 500);
  assert.equal(loads[0].uploadMs, undefined);
});

test('a save still writing: writing while the run runs, incomplete (cut off) after', () => {
  const evs = [save(1, 6, '/Volumes/m/s/v/run/step_6', 'writing', 1000, undefined, { mode: 'thread', blocked_ms: 100 })];
  const running = checkpointRows(evs, [], 'RUNNING').rows[0];
  assert.equal(running.state, 'writing');
  assert.equal(running.landed, 0);
  assert.equal(running.uploadMs, undefined);
  assert.equal(checkpointRows(evs, [], 'KILLED').rows[0].state, 'incomplete');
  assert.equal(checkpointRows(evs, [], 'FAILED').rows[0].latest, undefined, 'no complete save, no latest');
});

test('tags of an older client fill in the saves no event names', () => {
  const tags = [
    { key: 'sextant.checkpoint.step.1', value: '/Volumes/m/s/v/run/step_1' },
    { key: 'sextant.checkpoint.step.2', value: '/Volumes/m/s/v/run/step_2' },
    { key: 'sextant.checkpoint.step.3', value: '/Volumes/m/s/v/run/step_3' },
    { key: 'sextant.checkpoint.latest', value: '/Volumes/m/s/v/run/step_2' },
    { key: 'other', value: 'x' },
  ];
  // Tags only: every tagged save, to be read from its directory; the latest tag marked.
  const only = checkpointRows([], tags, 'FINISHED').rows;
  assert.deepEqual(only.map((r) => [r.step, r.source, r.state]), [[3, 'tag', 'pending'], [2, 'tag', 'pending'], [1, 'tag', 'pending']]);
  assert.deepEqual(only.map((r) => !!r.latest), [false, true, false]);
  // Events for 1 and 2: the tag of 3 only adds its row.
  const evs = [save(1, 1, '/Volumes/m/s/v/run/step_1', 'complete', 1000, 2000), save(2, 2, '/Volumes/m/s/v/run/step_2', 'complete', 3000, 4000)];
  const both = checkpointRows(evs, tags, 'FINISHED').rows;
  assert.deepEqual(both.map((r) => [r.step, r.source]), [[3, 'tag'], [2, 'event'], [1, 'event']]);
  assert.deepEqual(both.map((r) => !!r.latest), [false, true, false]);
  // A latest tag naming a path without a step tag: a row of unknown step, first.
  const odd = checkpointRows([], [{ key: 'sextant.checkpoint.latest', value: '/Volumes/m/s/v/run/final' }], 'FINISHED').rows;
  assert.equal(odd.length, 1);
  assert.ok(Number.isNaN(odd[0].step));
  assert.ok(odd[0].latest);
});

test('the latest complete save: by step, then by when it landed', () => {
  const evs = [
    save(1, 5, '/Volumes/m/s/v/a/step_5', 'complete', 1000, 2000),
    save(2, 5, '/Volumes/m/s/v/b/step_5', 'complete', 5000, 9000), // a resumed run saved step 5 again
    save(3, 7, '/Volumes/m/s/v/b/step_7', 'failed', 10_000, 11_000),
  ];
  const { rows } = checkpointRows(evs, [], 'FINISHED');
  assert.deepEqual(rows.map((r) => r.path), ['/Volumes/m/s/v/b/step_7', '/Volumes/m/s/v/b/step_5', '/Volumes/m/s/v/a/step_5']);
  assert.deepEqual(rows.map((r) => !!r.latest), [false, true, false]);
});

test('upload time and durations', () => {
  assert.equal(uploadMs({ time_ms: 0, end_ms: 5000, checkpoint: { path: 'p', mode: 'process', blocked_ms: 800 } }), 4200);
  assert.equal(uploadMs({ time_ms: 0, end_ms: 5000, checkpoint: { path: 'p', mode: 'process' } }), undefined, 'blocked time unknown');
  assert.equal(uploadMs({ time_ms: 0, end_ms: 500, checkpoint: { path: 'p', mode: 'thread', blocked_ms: 800 } }), 0, 'never negative');
  assert.equal(uploadMs({ time_ms: 0, checkpoint: { path: 'p', mode: 'thread', blocked_ms: 800 } }), undefined, 'not landed');
  assert.equal(fmtMs(900), '900 ms');
  assert.equal(fmtMs(2400), '2.4 s');
  assert.equal(fmtMs(119_000), '1m 59s');
  assert.equal(fmtMs(7_500_000), '2h 5m');
  assert.equal(fmtMs(undefined), '');
});

test('a save cut off has no upload time and did not land; a failed one ended', () => {
  const evs = [
    save(1, 7, '/Volumes/m/s/v/run/step_7', 'incomplete', 1000, 9000, { mode: 'process', blocked_ms: 100 }),
    save(2, 8, '/Volumes/m/s/v/run/step_8', 'failed', 1000, 9000, { mode: 'process', blocked_ms: 100 }),
  ];
  const [failed, cut] = checkpointRows(evs, [], 'KILLED').rows;
  assert.equal(cut.state, 'incomplete');
  assert.equal(cut.uploadMs, undefined);
  assert.equal(cut.landed, 0);
  assert.equal(cut.started, 1000);
  assert.equal(failed.state, 'failed');
  assert.equal(failed.landed, 9000);
  assert.equal(failed.uploadMs, 9000 - 1000 - 100);
});
