// GPU-hours and cost of runs and experiments (GET /api/2.0/sextant/gpu-hours,
// docs/gpu.md): the attempts `sextant run` recorded, each counting the
// GPUs it held times its wall time.

import { get } from '../api';

export interface GPUHoursAttempt {
  node: string;
  start_ms: number;
  end_ms: number;
  open?: boolean;
  gpus: number;
  gpu_model?: string;
  status?: string;
  gpu_hours: number;
  price?: number;
  cost?: number;
}

export interface GPUHours {
  gpu_hours: number;
  cost?: number;
  prices?: string;
  runs?: { run_id: string; gpu_hours: number; cost?: number; attempts: GPUHoursAttempt[] }[];
}

export function getGPUHours(query: { run_id?: string; experiment_id?: string }): Promise<GPUHours> {
  return get('/api/2.0/sextant/gpu-hours', query) as Promise<GPUHours>;
}

/** Hours or a cost: two decimals, four below 0.01 (as `sextant runs ls`). */
export function fmtAmount(v: number): string {
  if (v === 0) return '0';
  return v < 0.01 ? v.toFixed(4) : v.toFixed(2);
}

/** "3.00 GPU-hours in 2 attempts · cost 12.00", or '' when no GPU was held. */
export function gpuHoursText(g: GPUHours, attempts?: number): string {
  if (!g.gpu_hours) return '';
  let s = `${fmtAmount(g.gpu_hours)} GPU-hours`;
  if (attempts && attempts > 1) s += ` in ${attempts} attempts`;
  if (g.cost != null) s += ` · cost ${fmtAmount(g.cost)}`;
  return s;
}
