// The run's checkpoints as the Checkpoints tab lists them
// (pages/checkpoints.ts): from the run's checkpoint_save and
// checkpoint_load events (docs/api.md, run events), which VolumeWriter and
// VolumeReader record, and from the sextant.checkpoint.* tags older
// clients set (saves with no event of their own). Pure functions,
// unit-tested.

import type { KV } from '../api';

/** The checkpoint of a run event, as events/list answers it. */
export interface EventCheckpoint {
  path: string;
  outcome?: string;
  error?: string;
  bytes?: number;
  files?: number;
  ranks?: number;
  mode?: string;
  blocked_ms?: number;
  staging?: string;
}

/** A run event (internal/wire/events.go). */
export interface RunEvent {
  seq: number;
  key: string;
  kind: string;
  severity?: string;
  time_ms: number;
  end_ms?: number;
  open?: boolean;
  node?: string;
  gpu?: number;
  step?: number;
  message?: string;
  checkpoint?: EventCheckpoint;
  attrs?: Record<string, string>;
}

/**
 * What a row says of its checkpoint. From an event: complete, writing (the
 * save is in progress), incomplete (cut off: still writing when the run
 * ended, or marked so by `sextant run`), failed (with the error), deleted
 * (recorded complete, its .metadata no longer on the volume). From a tag,
 * once its directory was read: complete, incomplete (no .metadata),
 * missing, error; pending until then.
 */
export type CkptState = 'complete' | 'writing' | 'incomplete' | 'failed' | 'deleted' | 'missing' | 'error' | 'pending';

export interface CkptRow {
  /** event: from a checkpoint event; tag: from a sextant.checkpoint.* tag only. */
  source: 'event' | 'tag';
  /** The training step; NaN when unknown. */
  step: number;
  path: string;
  /** When the save (or load) began, ms; 0 when unknown. */
  started: number;
  /** When it landed (end_ms), or when the directory was last written (tags); 0 when not. */
  landed: number;
  bytes?: number;
  files?: number;
  ranks?: number;
  /** mode/staging: "thread/copy", "process/pinned", "sync". */
  mode?: string;
  /** How long training was blocked (the staging copy of an async save, the whole of a synchronous one). */
  blockedMs?: number;
  /** The upload after the staging: end_ms - time_ms - blocked_ms (async saves that ended). */
  uploadMs?: number;
  /** The whole of it, end_ms - time_ms (loads; saves that ended). */
  tookMs?: number;
  state: CkptState;
  error?: string;
  /** The newest complete save: what `sextant run --resume latest` loads. */
  latest?: boolean;
  seq: number;
}

/**
 * uploadMs is how long an async save uploaded after training went on:
 * end_ms - time_ms - blocked_ms; undefined for a synchronous save (it
 * blocked all along), a save that has not ended, or one whose blocked
 * time is unknown.
 */
export function uploadMs(e: Pick<RunEvent, 'time_ms' | 'end_ms' | 'checkpoint'>): number | undefined {
  const ck = e.checkpoint;
  if (!ck || !e.end_ms || ck.blocked_ms == null || ck.blocked_ms < 0 || ck.mode === 'sync') return undefined;
  return Math.max(0, e.end_ms - e.time_ms - ck.blocked_ms);
}

/** modeText is "mode/staging" ("thread/copy"), the mode alone, or "". */
export function modeText(ck: EventCheckpoint | undefined): string {
  if (!ck?.mode) return ck?.staging ?? '';
  return ck.staging ? `${ck.mode}/${ck.staging}` : ck.mode;
}

/** fmtMs formats a short duration: "900 ms", "2.4 s", "1m 59s", "2h 5m". */
export function fmtMs(v: number | null | undefined): string {
  if (v == null || !Number.isFinite(v) || v < 0) return '';
  if (v < 1000) return Math.round(v) + ' ms';
  if (v < 60_000) return (v / 1000).toFixed(1) + ' s';
  const s = Math.floor(v / 1000);
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${s % 60}s`;
  const hh = Math.floor(m / 60);
  return `${hh}h ${m % 60}m`;
}

function eventRow(e: RunEvent, running: boolean): CkptRow {
  const ck = e.checkpoint ?? { path: '' };
  const outcome = ck.outcome || 'complete';
  let state: CkptState;
  switch (outcome) {
    case 'writing':
      // A save still writing when the run is over was cut off (what `sextant ckpt ls --run` says too).
      state = running ? 'writing' : 'incomplete';
      break;
    case 'complete':
    case 'incomplete':
    case 'failed':
      state = outcome;
      break;
    default:
      state = 'incomplete';
  }
  const blocked = ck.blocked_ms != null && ck.blocked_ms >= 0 ? ck.blocked_ms : undefined;
  // A save cut off (or still writing) did not land: no landing or upload
  // time (its end, if any, is when it stopped). A failed save ended.
  const done = state !== 'incomplete' && state !== 'writing';
  return {
    source: 'event',
    step: e.step != null && e.step >= 0 ? e.step : NaN,
    path: ck.path,
    started: e.time_ms || 0,
    landed: e.end_ms && done ? e.end_ms : 0,
    bytes: ck.bytes || undefined,
    files: ck.files || undefined,
    ranks: ck.ranks || undefined,
    mode: modeText(ck) || undefined,
    blockedMs: blocked,
    uploadMs: done ? uploadMs(e) : undefined,
    tookMs: e.end_ms ? Math.max(0, e.end_ms - e.time_ms) : undefined,
    state,
    error: ck.error || undefined,
    seq: e.seq ?? 0,
  };
}

/** newer orders rows newest first: by step (unknown steps first), then by start, then by seq. */
function newer(a: CkptRow, b: CkptRow): number {
  const sa = Number.isNaN(a.step) ? Infinity : a.step;
  const sb = Number.isNaN(b.step) ? Infinity : b.step;
  if (sa !== sb) return sb - sa;
  return b.started - a.started || b.seq - a.seq;
}

/**
 * checkpointRows lists a run's checkpoints, newest first (by step): a row
 * per checkpoint_save event (the events hold the latest state of each
 * save), then one per sextant.checkpoint.step.<step> tag (and the
 * sextant.checkpoint.latest tag) whose path no event names, for saves an
 * older client only tagged. The newest complete save is marked latest
 * (by step, then by the time it landed: what `--resume latest` picks);
 * without one, the row of the latest tag. loads lists the
 * checkpoint_load events, newest first.
 */
export function checkpointRows(events: RunEvent[], tags: KV[], runStatus: string): { rows: CkptRow[]; loads: CkptRow[] } {
  const running = runStatus === 'RUNNING';
  const rows: CkptRow[] = [];
  const loads: CkptRow[] = [];
  const seen = new Set<string>();
  for (const e of events) {
    if (!e.checkpoint?.path) continue;
    if (e.kind === 'checkpoint_save') {
      rows.push(eventRow(e, running));
      seen.add(e.checkpoint.path);
    } else if (e.kind === 'checkpoint_load') {
      const r = eventRow(e, running);
      r.blockedMs = r.uploadMs = undefined;
      loads.push(r);
    }
  }
  let latestTag: string | undefined;
  const tagged = new Set<string>();
  for (const t of tags) {
    const m = /^sextant\.checkpoint\.step\.(\d+)$/.exec(t.key);
    if (m) {
      if (seen.has(t.value) || tagged.has(t.value)) continue;
      tagged.add(t.value);
      rows.push({ source: 'tag', step: Number(m[1]), path: t.value, started: 0, landed: 0, state: 'pending', seq: 0 });
    } else if (t.key === 'sextant.checkpoint.latest') latestTag = t.value;
  }
  if (latestTag && !seen.has(latestTag) && !tagged.has(latestTag)) {
    rows.push({ source: 'tag', step: NaN, path: latestTag, started: 0, landed: 0, state: 'pending', seq: 0 });
  }
  rows.sort(newer);
  loads.sort((a, b) => b.started - a.started || b.seq - a.seq);
  // The newest complete save, as runevents.LatestComplete picks it.
  let best: CkptRow | undefined;
  for (const r of rows) {
    if (r.source !== 'event' || r.state !== 'complete') continue;
    if (!best || isNewerSave(r, best)) best = r;
  }
  if (best) best.latest = true;
  else if (latestTag) {
    const r = rows.find((x) => x.path === latestTag);
    if (r) r.latest = true;
  }
  return { rows, loads };
}

function isNewerSave(a: CkptRow, b: CkptRow): boolean {
  if (a.step !== b.step && !Number.isNaN(a.step) && !Number.isNaN(b.step)) return a.step > b.step;
  const ea = Math.max(a.landed, a.started);
  const eb = Math.max(b.landed, b.started);
  if (ea !== eb) return ea > eb;
  return a.seq > b.seq;
}

/** stateText is a row's state in words; a failed save's error follows it. */
export function stateText(r: Pick<CkptRow, 'state' | 'error' | 'source'>): string {
  switch (r.state) {
    case 'failed':
      return r.error ? 'failed: ' + r.error : 'failed';
    case 'error':
      return r.error ? 'error: ' + r.error : 'error';
    case 'pending':
      return '…';
    default:
      return r.state;
  }
}
