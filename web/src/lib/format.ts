// Formatting of numbers, sizes, times and durations for display.

export function fmtNumber(v: number | null | undefined): string {
  if (v == null) return '';
  if (Number.isNaN(v)) return 'NaN';
  if (v === Infinity) return '∞';
  if (v === -Infinity) return '-∞';
  if (v === 0) return '0';
  const a = Math.abs(v);
  if (a >= 1e6 || a < 1e-4) return v.toExponential(4).replace(/\.?0+e/, 'e');
  if (Number.isInteger(v)) return String(v);
  return String(Number(v.toPrecision(6)));
}

export function fmtBytes(n: number | null | undefined): string {
  if (n == null || !Number.isFinite(n)) return '';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (Math.abs(n) >= 1024 && i < units.length - 1) {
    n /= 1024;
    i++;
  }
  return (i === 0 ? String(n) : n.toFixed(n < 10 ? 2 : 1)) + ' ' + units[i];
}

export function fmtTime(ms: number | null | undefined): string {
  if (!ms) return '';
  const d = new Date(ms);
  const p = (n: number) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

export function fmtDuration(ms: number | null | undefined): string {
  if (ms == null || !Number.isFinite(ms) || ms < 0) return '';
  const s = Math.floor(ms / 1000);
  if (s < 60) return s + 's';
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${s % 60}s`;
  const h = Math.floor(m / 60);
  if (h < 48) return `${h}h ${m % 60}m`;
  return `${Math.floor(h / 24)}d ${h % 24}h`;
}

export function fmtAgo(ms: number, now = Date.now()): string {
  const d = now - ms;
  if (d < 5000) return 'just now';
  return fmtDuration(d) + ' ago';
}

/** A palette of distinct line colours for runs. */
export const PALETTE = [
  '#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd', '#8c564b', '#e377c2', '#7f7f7f', '#bcbd22', '#17becf',
  '#393b79', '#e6550d', '#31a354', '#ad494a', '#6b6ecf', '#8c6d31', '#ce6dbd', '#636363', '#b5cf6b', '#3182bd',
];

/**
 * colour is the i-th line colour: the palette first, then hues a golden
 * angle apart (as hex, so that an alpha suffix makes a band's fill).
 */
export function colour(i: number): string {
  if (i >= 0 && i < PALETTE.length) return PALETTE[i];
  const k = Math.abs(Math.floor(i)) - PALETTE.length;
  return hslHex((k * 137.508 + 20) % 360, 0.62, k % 2 ? 0.42 : 0.55);
}

function hslHex(hue: number, s: number, l: number): string {
  const a = s * Math.min(l, 1 - l);
  const f = (n: number) => {
    const k = (n + hue / 30) % 12;
    const c = l - a * Math.max(-1, Math.min(k - 3, 9 - k, 1));
    return Math.round(c * 255)
      .toString(16)
      .padStart(2, '0');
  };
  return '#' + f(0) + f(8) + f(4);
}
