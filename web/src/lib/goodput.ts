// Throughput, MFU and goodput of a run (GET /api/2.0/sextant/goodput,
// docs/run.md "Throughput, MFU and goodput"): the server computes them;
// this formats them for the run page and the timeline's goodput lane.

import { get } from '../api';

export interface GoodputBreakdown {
  wall_s: number;
  productive_s: number;
  data_wait_s: number;
  checkpoint_s: number;
  lost_s: number;
  hung_s: number;
  idle_s: number;
  startup_s: number;
  other_s: number;
}

export interface Throughput {
  samples_per_s: number | null;
  tokens_per_s: number | null;
}

export interface Goodput {
  run_id: string;
  goodput: number | null;
  breakdown: GoodputBreakdown;
  reference_rank: number;
  throughput: Throughput;
  recent_throughput: Throughput;
  mfu: { mfu: number | null; reason?: string; peak_tflops?: number; peak_source?: string; gpu_model?: string; dtype: string; devices: number };
  series: { time_ms: number; step: number; goodput: number }[];
}

export function getGoodput(runId: string): Promise<Goodput> {
  return get('/api/2.0/sextant/goodput', { run_id: runId }) as Promise<Goodput>;
}

/** A share as a percentage with one decimal ("62.5%"). */
export function fmtPct(v: number): string {
  return (Math.round(v * 1000) / 10).toFixed(1) + '%';
}

function rate(v: number, unit: string): string {
  return (v >= 100 ? Math.round(v).toString() : v.toPrecision(3)) + ' ' + unit + '/s';
}

/** "62.5% goodput · MFU 41.2% · 480 samples/s", or '' when nothing is known. */
export function goodputText(g: Goodput): string {
  const parts: string[] = [];
  if (g.goodput != null) parts.push(fmtPct(g.goodput) + ' goodput');
  if (g.mfu.mfu != null) parts.push('MFU ' + fmtPct(g.mfu.mfu));
  if (g.throughput.samples_per_s != null) parts.push(rate(g.throughput.samples_per_s, 'samples'));
  if (g.throughput.tokens_per_s != null) parts.push(rate(g.throughput.tokens_per_s, 'tokens'));
  return parts.join(' · ');
}

const LABELS: [keyof GoodputBreakdown, string][] = [
  ['productive_s', 'productive'],
  ['data_wait_s', 'data wait'],
  ['checkpoint_s', 'checkpoint'],
  ['lost_s', 'lost'],
  ['hung_s', 'hung'],
  ['idle_s', 'idle'],
  ['startup_s', 'start-up'],
  ['other_s', 'other'],
];

/** "productive 62.5%, lost 10.0%, …": the categories that hold time, as shares of the wall. */
export function breakdownText(b: GoodputBreakdown): string {
  if (!b.wall_s) return '';
  return LABELS.filter(([k]) => b[k] > 0)
    .map(([k, name]) => `${name} ${fmtPct(b[k] / b.wall_s)}`)
    .join(', ');
}

/** The goodput line: [time_ms, goodput] at each of the reference rank's step ends. */
export function goodputLine(g: Goodput | null): [number, number][] {
  return (g?.series ?? []).map((p) => [p.time_ms, p.goodput]);
}
