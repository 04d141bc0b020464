// ANSI SGR escape sequences (colours, bold, ...) to HTML spans.
//
// ansiToHtml is the one place the UI builds HTML from user data: every
// character of the text is escaped, and the only markup it produces is
// <span class="..."> with class names it chose itself. Colours are
// classes (the 256-colour palette is in ansi.css; 24-bit colours are
// mapped to the nearest palette entry), because the page's
// Content-Security-Policy forbids inline style attributes.

/** SGR state. Colours are palette indices 0-255, or -1 for the default. */
export interface SGR {
  fg: number;
  bg: number;
  bold: boolean;
  dim: boolean;
  italic: boolean;
  underline: boolean;
  inverse: boolean;
  strike: boolean;
}

export function resetSGR(): SGR {
  return { fg: -1, bg: -1, bold: false, dim: false, italic: false, underline: false, inverse: false, strike: false };
}

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** escapeHtml escapes the five characters that matter in HTML text and attributes. */
export function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ESCAPES[c]);
}

/** A run of text and the style it is drawn with. */
export interface Segment {
  text: string;
  style: SGR;
}

// CSI: ESC [ params intermediates final; OSC: ESC ] ... (BEL | ESC \);
// other two-byte escapes; and C0 control characters other than tab.
// eslint-disable-next-line no-control-regex
const TOKEN = /\x1b\[([0-9;:?<=>]*)[ -\/]*([@-~])|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]?|[\x00-\x08\x0b-\x1f\x7f]/g;

/**
 * parseAnsi splits text into styled segments. SGR sequences (ESC[...m)
 * change the style, starting from `state` (which it updates, so that a
 * style carries over to the next line as in a terminal); every other
 * escape sequence and control character is dropped.
 */
export function parseAnsi(text: string, state: SGR = resetSGR()): Segment[] {
  const out: Segment[] = [];
  let last = 0;
  TOKEN.lastIndex = 0;
  for (let m = TOKEN.exec(text); m; m = TOKEN.exec(text)) {
    if (m.index > last) out.push({ text: text.slice(last, m.index), style: { ...state } });
    last = TOKEN.lastIndex;
    if (m[2] === 'm') applySGR(state, m[1]);
  }
  if (last < text.length) out.push({ text: text.slice(last), style: { ...state } });
  return out;
}

function applySGR(s: SGR, params: string): void {
  const p = params === '' ? [0] : params.split(/[;:]/).map((x) => (x === '' ? 0 : Number(x)));
  for (let i = 0; i < p.length; i++) {
    const c = p[i];
    if (c === 0) Object.assign(s, resetSGR());
    else if (c === 1) s.bold = true;
    else if (c === 2) s.dim = true;
    else if (c === 3) s.italic = true;
    else if (c === 4) s.underline = true;
    else if (c === 7) s.inverse = true;
    else if (c === 9) s.strike = true;
    else if (c === 21 || c === 22) s.bold = s.dim = false;
    else if (c === 23) s.italic = false;
    else if (c === 24) s.underline = false;
    else if (c === 27) s.inverse = false;
    else if (c === 29) s.strike = false;
    else if (c >= 30 && c <= 37) s.fg = c - 30;
    else if (c === 39) s.fg = -1;
    else if (c >= 40 && c <= 47) s.bg = c - 40;
    else if (c === 49) s.bg = -1;
    else if (c >= 90 && c <= 97) s.fg = c - 90 + 8;
    else if (c >= 100 && c <= 107) s.bg = c - 100 + 8;
    else if (c === 38 || c === 48) {
      let colour = -1;
      if (p[i + 1] === 5 && i + 2 < p.length) {
        colour = clamp255(p[i + 2]);
        i += 2;
      } else if (p[i + 1] === 2 && i + 4 < p.length) {
        colour = nearest256(p[i + 2], p[i + 3], p[i + 4]);
        i += 4;
      } else {
        i = p.length; // malformed: ignore the rest
      }
      if (colour >= 0) {
        if (c === 38) s.fg = colour;
        else s.bg = colour;
      }
    }
  }
}

function clamp255(n: number): number {
  return Number.isFinite(n) ? Math.max(0, Math.min(255, Math.floor(n))) : 0;
}

/** nearest256 maps a 24-bit colour to the nearest entry of the xterm 6x6x6 cube or grey ramp. */
export function nearest256(r: number, g: number, b: number): number {
  [r, g, b] = [clamp255(r), clamp255(g), clamp255(b)];
  const level = (v: number) => (v < 48 ? 0 : v < 115 ? 1 : Math.floor((v - 35) / 40));
  const steps = [0, 95, 135, 175, 215, 255];
  const [cr, cg, cb] = [level(r), level(g), level(b)];
  const cube = 16 + 36 * cr + 6 * cg + cb;
  const dc = (steps[cr] - r) ** 2 + (steps[cg] - g) ** 2 + (steps[cb] - b) ** 2;
  const avg = (r + g + b) / 3;
  const gi = avg > 238 ? 23 : Math.max(0, Math.round((avg - 8) / 10));
  const gv = 8 + 10 * gi;
  const dg = (gv - r) ** 2 + (gv - g) ** 2 + (gv - b) ** 2;
  return dg < dc ? 232 + gi : cube;
}

function classesOf(s: SGR): string {
  let fg = s.fg;
  let bg = s.bg;
  const cls: string[] = [];
  if (s.inverse) {
    [fg, bg] = [bg, fg];
    if (fg < 0) cls.push('ai'); // default background as foreground
    if (bg < 0) cls.push('aiv');
  }
  if (fg >= 0) cls.push('f' + (s.bold && fg < 8 ? fg + 8 : fg));
  if (bg >= 0) cls.push('b' + bg);
  if (s.bold) cls.push('ab');
  if (s.dim) cls.push('ad');
  if (s.italic) cls.push('ait');
  if (s.underline) cls.push('au');
  if (s.strike) cls.push('as');
  return cls.join(' ');
}

/**
 * ansiToHtml renders text with its SGR styles as escaped HTML: plain text
 * where no style applies, <span class="..."> elsewhere.
 */
export function ansiToHtml(text: string, state: SGR = resetSGR()): string {
  let html = '';
  for (const seg of parseAnsi(text, state)) {
    const cls = classesOf(seg.style);
    const t = escapeHtml(seg.text);
    html += cls ? `<span class="${cls}">${t}</span>` : t;
  }
  return html;
}

/** stripAnsi returns the text without escape sequences and control characters. */
export function stripAnsi(text: string): string {
  return parseAnsi(text).map((s) => s.text).join('');
}
