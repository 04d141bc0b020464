// The chart data worker: fetches get-history-bulk-interval answers, parses
// their JSON and splits them by run into typed arrays off the page's main
// thread (an answer for 100 runs is 2 to 3 MB of JSON: parsed in the page
// it costs frames while the board scrolls), and hands the arrays over
// without a copy. Same origin, the session cookie, no state kept.
//
// In:  {id, url}            fetch url (a GET of the API)
//      {id, abort: true}    abort request id
// Out: {id, runs: [{run_id, steps, ts, values}]}   (ArrayBuffers transferred)
//      {id, error, status, code}

import { parseValue } from './lib/series';

const ctx = self as unknown as {
  onmessage: ((e: MessageEvent) => void) | null;
  postMessage: (m: unknown, transfer?: Transferable[]) => void;
};
const inflight = new Map<number, AbortController>();

ctx.onmessage = async (e: MessageEvent) => {
  const m = e.data as { id: number; url?: string; abort?: boolean };
  if (m.abort) {
    inflight.get(m.id)?.abort();
    inflight.delete(m.id);
    return;
  }
  const ac = new AbortController();
  inflight.set(m.id, ac);
  try {
    const res = await fetch(m.url!, { headers: { 'X-Requested-With': 'XMLHttpRequest' }, credentials: 'same-origin', signal: ac.signal });
    const text = await res.text();
    if (!res.ok) {
      let message = `GET ${m.url!.split('?')[0]}: HTTP ${res.status}`;
      let code = 'HTTP_' + res.status;
      try {
        const j = JSON.parse(text);
        if (typeof j.message === 'string') message = j.message;
        if (typeof j.error_code === 'string') code = j.error_code;
      } catch {
        /* not JSON */
      }
      ctx.postMessage({ id: m.id, error: message, status: res.status, code });
      return;
    }
    const ms: any[] = (text ? JSON.parse(text) : {}).metrics ?? [];
    const count = new Map<string, number>();
    for (const p of ms) count.set(p.run_id, (count.get(p.run_id) ?? 0) + 1);
    const runs = new Map<string, { run_id: string; steps: Float64Array; ts: Float64Array; values: Float64Array; n: number; sorted: boolean }>();
    for (const [id, n] of count) runs.set(id, { run_id: id, steps: new Float64Array(n), ts: new Float64Array(n), values: new Float64Array(n), n: 0, sorted: true });
    for (const p of ms) {
      const r = runs.get(p.run_id)!;
      const i = r.n++;
      r.steps[i] = Number(p.step ?? 0);
      r.ts[i] = Number(p.timestamp ?? 0);
      r.values[i] = parseValue(p.value);
      if (i > 0 && (r.steps[i] < r.steps[i - 1] || (r.steps[i] === r.steps[i - 1] && r.ts[i] < r.ts[i - 1]))) r.sorted = false;
    }
    const out = [];
    const transfer: Transferable[] = [];
    for (const r of runs.values()) {
      let { steps, ts, values } = r;
      if (!r.sorted) {
        const idx = Array.from(steps.keys()).sort((a, b) => steps[a] - steps[b] || ts[a] - ts[b]);
        steps = Float64Array.from(idx, (i) => r.steps[i]);
        ts = Float64Array.from(idx, (i) => r.ts[i]);
        values = Float64Array.from(idx, (i) => r.values[i]);
      }
      out.push({ run_id: r.run_id, steps, ts, values });
      transfer.push(steps.buffer, ts.buffer, values.buffer);
    }
    ctx.postMessage({ id: m.id, runs: out }, transfer);
  } catch (err: any) {
    if (err?.name !== 'AbortError') ctx.postMessage({ id: m.id, error: String(err?.message ?? err), status: 0, code: 'NETWORK' });
  } finally {
    inflight.delete(m.id);
  }
};
