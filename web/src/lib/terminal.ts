// A run's log as a terminal showed it. The launcher stores every redraw of
// a progress bar (tqdm writes "\r 40%|####" over and over) as its own
// record flagged cr, and a line still unfinished after a while as records
// flagged partial (docs/run.md). A terminal shows only the last redraw and
// one line for the pieces: terminalPage hides a cr or partial record once
// a later record of the same source (node, rank and stream) follows it,
// and puts the text of partial records in front of the record that ends
// their line (or under it, when it redraws them: joinPiece). The log is read in pages: what a page's last records become
// depends on the next page, and its first records may continue the
// previous page's (carry). TermIndex maps the rows shown onto stored
// lines while pages come and go.

export interface TermLine {
  line: number;
  node: number;
  local_rank: number;
  stream: string;
  text: string;
  partial?: boolean;
  cr?: boolean;
}

const src = (l: TermLine) => l.node + ':' + l.local_rank + ':' + l.stream;

export interface TermPage {
  /** offsets (in the page) of the records shown */
  rows: number[];
  /** text to show instead of the record's own (partial pieces joined), by offset */
  texts: Map<number, string>;
  /** pieces of lines that continue in the next page, by source */
  carryOut: Map<string, string>;
}

/**
 * joinPiece is what a terminal shows of a piece of a line followed by the
 * next record. The store cannot say whether a carriage return came between
 * them (an empty redraw record is not kept): when both start alike (a
 * progress bar drawn again: "epoch 2:  10%|#" then "epoch 2:  20%|##") the
 * next record is taken as drawn over the piece, otherwise as its
 * continuation ("waiting... " then "ready").
 */
export function joinPiece(piece: string, next: string): string {
  let common = 0;
  const n = Math.min(piece.length, next.length);
  while (common < n && piece.charCodeAt(common) === next.charCodeAt(common)) common++;
  if (common >= 4) return next.length >= piece.length ? next : next + piece.slice(next.length);
  return piece + next;
}

/**
 * terminalPage computes what a terminal shows of one page of records.
 * next is the following page when it is loaded (null when it is not, or
 * there is none: then the page's trailing cr and partial records stay
 * shown, as the terminal shows them now); carryIn are the previous page's
 * unfinished pieces.
 */
export function terminalPage(lines: readonly TermLine[], next: readonly TermLine[] | null, carryIn?: ReadonlyMap<string, string>): TermPage {
  const seen = new Set<string>();
  if (next) for (const l of next) seen.add(src(l));
  const hidden = new Uint8Array(lines.length);
  for (let k = lines.length - 1; k >= 0; k--) {
    const s = src(lines[k]);
    if ((lines[k].cr || lines[k].partial) && seen.has(s)) hidden[k] = 1;
    seen.add(s);
  }
  const pending = new Map(carryIn ?? []);
  const rows: number[] = [];
  const texts = new Map<number, string>();
  for (let k = 0; k < lines.length; k++) {
    const l = lines[k];
    const s = src(l);
    const prefix = pending.get(s);
    pending.delete(s);
    const text = prefix ? joinPiece(prefix, l.text) : l.text;
    if (hidden[k]) {
      // A piece goes on in front of the next record; a redraw is replaced by it.
      if (l.partial && !l.cr) pending.set(s, text);
      continue;
    }
    rows.push(k);
    if (prefix) texts.set(k, text);
  }
  // Pieces whose line goes on in the next page.
  const carryOut = new Map<string, string>();
  for (const [s, t] of pending) carryOut.set(s, t);
  return { rows, texts, carryOut };
}

/**
 * TermIndex maps rows shown to stored lines over pages of size `page`: a
 * loaded page shows its terminalPage rows, a page not loaded counts all
 * its lines (they are drawn as pending until it is).
 */
export class TermIndex {
  private views = new Map<number, TermPage>();
  private starts: number[] = [0];
  private total = 0;

  constructor(private page: number) {}

  /** linesIn is how many stored lines page p has. */
  private linesIn(p: number): number {
    return Math.max(0, Math.min(this.page, this.total - p * this.page));
  }

  private pages(): number {
    return Math.ceil(this.total / this.page);
  }

  /**
   * update recomputes the views for a log of total lines from the loaded
   * pages (get returns a page's records, or undefined when it is not
   * loaded): of every page, or only around the pages that changed (a page
   * loaded, evicted or grown), further while a page's pieces carried into
   * the next change.
   */
  update(total: number, get: (p: number) => readonly TermLine[] | undefined, changed?: readonly number[]): void {
    this.total = total;
    const n = this.pages();
    for (const p of [...this.views.keys()]) if (p >= n || !get(p)) this.views.delete(p);
    const from = changed ? Math.max(0, Math.min(...changed) - 1) : 0;
    const to = changed ? Math.max(...changed) + 1 : n - 1;
    for (let p = from; p < n; p++) {
      const lines = get(p);
      const before = this.views.get(p);
      if (!lines) {
        this.views.delete(p);
        if (p >= to) break;
        continue;
      }
      const prev = this.views.get(p - 1);
      const v = terminalPage(lines, get(p + 1) ?? null, get(p - 1) && prev ? prev.carryOut : undefined);
      this.views.set(p, v);
      if (p >= to && before && sameCarry(before.carryOut, v.carryOut)) break;
    }
    this.starts = new Array(n + 1);
    this.starts[0] = 0;
    for (let p = 0; p < n; p++) this.starts[p + 1] = this.starts[p] + (this.views.get(p)?.rows.length ?? this.linesIn(p));
  }

  /** rows is how many rows are shown. */
  get rows(): number {
    return this.starts[this.starts.length - 1] ?? 0;
  }

  /** at maps row i to its page, the record's offset in it, and the text to show instead (partials joined). */
  at(i: number): { page: number; offset: number; text?: string } | null {
    if (i < 0 || i >= this.rows) return null;
    let lo = 0;
    let hi = this.starts.length - 2;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (this.starts[mid] <= i) lo = mid;
      else hi = mid - 1;
    }
    const v = this.views.get(lo);
    const k = i - this.starts[lo];
    if (!v) return { page: lo, offset: k };
    const offset = v.rows[k];
    return { page: lo, offset, text: v.texts.get(offset) };
  }

  /** rowOf is the row showing stored line (1-based), or the next row shown after it when the line is hidden. */
  rowOf(line: number): number {
    const p = Math.floor((line - 1) / this.page);
    const off = line - 1 - p * this.page;
    const base = this.starts[Math.min(p, this.starts.length - 1)] ?? 0;
    const v = this.views.get(p);
    if (!v) return base + off;
    let lo = 0;
    let hi = v.rows.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (v.rows[mid] < off) lo = mid + 1;
      else hi = mid;
    }
    return Math.min(base + lo, Math.max(0, this.rows - 1));
  }
}

function sameCarry(a: ReadonlyMap<string, string>, b: ReadonlyMap<string, string>): boolean {
  if (a.size !== b.size) return false;
  for (const [k, v] of a) if (b.get(k) !== v) return false;
  return true;
}
