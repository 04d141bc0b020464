// Smoothing for metric charts.

/**
 * emaDebiased smooths ys with an exponential moving average whose weight
 * is in [0, 1): 0 returns a copy, 0.99 smooths hard. Like TensorBoard's,
 * the average is debiased (divided by 1 - w^n, n the number of finite
 * values seen), so the curve does not start at 0, and a constant series is
 * returned unchanged. Missing and non-finite values stay where they are
 * (null for missing, the value itself for NaN and infinities) and do not
 * enter the average.
 */
export function emaDebiased(ys: ArrayLike<number | null>, weight: number): (number | null)[] {
  const n = ys.length;
  const out: (number | null)[] = new Array(n);
  if (!(weight > 0)) {
    for (let i = 0; i < n; i++) out[i] = ys[i];
    return out;
  }
  const w = Math.min(weight, 0.999);
  let first: number | null = null;
  let constant = true;
  for (let i = 0; i < n; i++) {
    const y = ys[i];
    if (y == null || !Number.isFinite(y)) continue;
    if (first === null) first = y;
    else if (y !== first) {
      constant = false;
      break;
    }
  }
  if (constant) {
    for (let i = 0; i < n; i++) out[i] = ys[i];
    return out;
  }
  let last = 0;
  let seen = 0;
  let debias = 1; // w^seen
  for (let i = 0; i < n; i++) {
    const y = ys[i];
    if (y == null || !Number.isFinite(y)) {
      out[i] = y;
      continue;
    }
    last = last * w + (1 - w) * y;
    seen++;
    debias *= w;
    out[i] = last / (1 - debias);
  }
  return out;
}
