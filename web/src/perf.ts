// Timings the UI records for the benchmark and the tests, readable in the
// page as window.__sextantPerf.

export interface PerfEntry {
  name: string;
  ms: number;
  detail?: string;
  at: number;
}

const entries: PerfEntry[] = [];
if (typeof window !== 'undefined') (window as any).__sextantPerf = entries;

export function perf(name: string, ms: number, detail?: string): void {
  entries.push({ name, ms, detail, at: performance.now() });
  if (entries.length > 1000) entries.splice(0, entries.length - 1000);
}
