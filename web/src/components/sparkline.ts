// A small canvas line chart for the GPU pane: one series, a fixed y range
// (0-100 for percentages) or the data's, and the time window given.

export interface SparkOpts {
  width: number;
  height: number;
  color: string;
  min?: number;
  max?: number;
}

export function drawSparkline(canvas: HTMLCanvasElement, ts: number[], vs: (number | null)[], from: number, to: number, o: SparkOpts): void {
  const dpr = window.devicePixelRatio || 1;
  canvas.width = Math.round(o.width * dpr);
  canvas.height = Math.round(o.height * dpr);
  canvas.style.width = o.width + 'px';
  canvas.style.height = o.height + 'px';
  const ctx = canvas.getContext('2d');
  if (!ctx) return;
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.clearRect(0, 0, o.width, o.height);
  let lo = o.min ?? Infinity;
  let hi = o.max ?? -Infinity;
  if (o.min == null || o.max == null) {
    for (const v of vs) {
      if (v == null || !Number.isFinite(v)) continue;
      if (o.min == null) lo = Math.min(lo, v);
      if (o.max == null) hi = Math.max(hi, v);
    }
  }
  if (!(hi > lo)) {
    hi = (Number.isFinite(hi) ? hi : 0) + 1;
    lo = Number.isFinite(lo) ? lo - 1 : 0;
  }
  const span = Math.max(1, to - from);
  const x = (t: number) => ((t - from) / span) * (o.width - 2) + 1;
  const y = (v: number) => o.height - 2 - ((v - lo) / (hi - lo)) * (o.height - 4);
  ctx.strokeStyle = o.color;
  ctx.fillStyle = o.color + '22';
  ctx.lineWidth = 1.25;
  ctx.beginPath();
  let open = false;
  let firstX = 0;
  let lastX = 0;
  for (let i = 0; i < ts.length; i++) {
    const v = vs[i];
    if (v == null || !Number.isFinite(v) || ts[i] < from) {
      open = false;
      continue;
    }
    const px = x(ts[i]);
    if (!open) {
      ctx.moveTo(px, y(v));
      if (i === 0 || firstX === 0) firstX = px;
      open = true;
    } else ctx.lineTo(px, y(v));
    lastX = px;
  }
  ctx.stroke();
  if (lastX > firstX) {
    ctx.lineTo(lastX, o.height);
    ctx.lineTo(firstX, o.height);
    ctx.closePath();
    ctx.fill();
  }
}
