// Timings and sizes the UI runs with. Defaults suit people; tests shorten
// them, either in the page's query string (?gpu_poll_ms=200) when the UI
// loads, or with a global object set before the UI's script runs:
//
//   window.SEXTANT_CONFIG = { gpuPollMs: 200, gpuIdleMs: 2000 }
//
// Query-string names are the snake_case forms of the fields.

export interface UIConfig {
  /** How often the runs table and charts refresh running runs, ms. */
  runPollMs: number;
  /** How often the GPU pane polls, ms (10 s). */
  gpuPollMs: number;
  /** How long without interaction before the GPU pane stops polling, ms (5 min). */
  gpuIdleMs: number;
  /** How much GPU history the pane shows, ms (2 h). */
  gpuHistoryMs: number;
  /** How long one log tail request waits on the server, ms. */
  logTailWaitMs: number;
  /** Runs fetched per runs/search page. */
  runsPageSize: number;
}

export const defaults: UIConfig = {
  runPollMs: 10_000,
  gpuPollMs: 10_000,
  gpuIdleMs: 300_000,
  gpuHistoryMs: 7_200_000,
  logTailWaitMs: 20_000,
  runsPageSize: 1000,
};

function snake(s: string): string {
  return s.replace(/[A-Z]/g, (c) => '_' + c.toLowerCase());
}

/** loadConfig merges the defaults, window.SEXTANT_CONFIG and the query string. */
export function loadConfig(search: string, global: unknown): UIConfig {
  const cfg: UIConfig = { ...defaults };
  const g = (global && typeof global === 'object' ? global : {}) as Record<string, unknown>;
  const q = new URLSearchParams(search);
  for (const k of Object.keys(defaults) as (keyof UIConfig)[]) {
    for (const v of [g[k], Number(q.get(snake(k)) ?? NaN)]) {
      if (typeof v === 'number' && Number.isFinite(v) && v > 0) cfg[k] = v; // the query string wins
    }
  }
  return cfg;
}

export const config: UIConfig =
  typeof window === 'undefined' ? { ...defaults } : loadConfig(window.location.search, (window as any).SEXTANT_CONFIG);
