// Node health: the wire shapes of /api/2.0/sextant/nodes and
// /nodes/health (docs/gpu.md, "Node health") and the text the GPU pane
// and the node page show for them.

import { fmtDuration } from './format';

export interface NodeCounts {
  xid: number;
  ecc: number;
  throttle: number;
  lost: number;
}

export interface NodeHealth {
  node: string;
  gpus: { index: number; uuid?: string; model?: string }[];
  last_seen_ms?: number;
  last_fault_ms?: number;
  counts_24h: NodeCounts;
  counts_7d: NodeCounts;
  flagged: boolean;
  reason?: string;
}

export interface NodeEvent {
  time_ms: number;
  end_ms?: number;
  open?: boolean;
  kind: string;
  gpu: number;
  uuid?: string;
  model?: string;
  xid?: number;
  xid_meaning?: string;
  message: string;
  run_ids: string[];
}

const KIND_LABEL: Record<string, string> = { xid: 'Xid error', ecc: 'ECC errors', throttle: 'Throttling', lost: 'Lost GPU' };

/** kindLabel names a finding's kind for people. */
export function kindLabel(kind: string): string {
  return KIND_LABEL[kind] ?? kind;
}

/** countsText says a node's counts in words, faults first: "2 Xid · 1 lost · 3 throttling"; "" when none. */
export function countsText(c: NodeCounts | undefined): string {
  if (!c) return '';
  const parts: string[] = [];
  if (c.xid) parts.push(`${c.xid} Xid`);
  if (c.ecc) parts.push(`${c.ecc} ECC`);
  if (c.lost) parts.push(`${c.lost} lost`);
  if (c.throttle) parts.push(`${c.throttle} throttling`);
  return parts.join(' · ');
}

/** eventDuration is a throttle span's length ("ongoing" while open); "" for findings without one. */
export function eventDuration(e: NodeEvent, now: number): string {
  if (e.kind !== 'throttle') return '';
  if (e.open) return 'ongoing, ' + fmtDuration(Math.max(0, now - e.time_ms));
  if (e.end_ms && e.end_ms >= e.time_ms) return fmtDuration(e.end_ms - e.time_ms);
  return '';
}

/** nodeHref is the node page's address. */
export function nodeHref(node: string): string {
  return '/gpu/node/' + encodeURIComponent(node);
}
