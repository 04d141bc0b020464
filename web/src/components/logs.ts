// The logs tab: a run's captured output (every node and rank), virtualised
// so a million lines scroll smoothly, fetched in pages as they come into
// view; live tail while the run runs; search with jump to each match; jump
// to a line; node, rank and stream filters; ANSI colours. Progress bars
// (\r redraws) and pieces of lines are shown as the terminal showed them
// (lib/terminal), or raw, one row per stored record; Download saves the
// whole log either way.
//
// API (/api/2.0/sextant/logs/..., docs/run.md): get (from_line, limit,
// node, stream), search (q or regex), tail (after_line, wait_ms: a long
// poll). Each answers {lines:[{line, timestamp, stream, node, local_rank,
// text}], next_line, total_lines, run_status}.

import { get, SX } from '../api';
import { config } from '../config';
import { debounce, h, Scope } from '../dom';
import { ansiToHtml } from '../lib/ansi';
import { fmtTime } from '../lib/format';
import { TermIndex, terminalPage, TermPage } from '../lib/terminal';
import { VList } from './vlist';

export interface LogLine {
  line: number;
  timestamp: number;
  stream: string;
  node: number;
  local_rank: number;
  text: string;
  partial?: boolean;
  cr?: boolean;
}

interface LogPage {
  lines: LogLine[];
  next_line: number;
  total_lines: number;
  run_status: string;
}

const PAGE = 500;
const ROW_H = 18;
const MAX_PAGES = 400;
const TERMINAL = new Set(['FINISHED', 'FAILED', 'KILLED']);
const RAW_KEY = 'sextant.logs.raw';
const DOWNLOAD_PAGE = 10_000;

export class LogsView {
  readonly el: HTMLElement;
  private list: VList;
  private total = 0;
  private pages = new Map<number, LogLine[]>();
  private inflight = new Set<number>();
  private filtered: LogLine[] | null = null; // the filtered view, when a filter is on
  private filterNext = 1;
  private filterDone = true;
  private filterLoading = false;
  private follow = true;
  private highlight = -1;
  private status: HTMLElement;
  private nodeSel: HTMLInputElement;
  private rankSel: HTMLInputElement;
  private streamSel: HTMLSelectElement;
  private results: HTMLElement;
  private tailAbort: AbortController | null = null;
  private runStatus = '';
  private available = true;
  private raw = localStorage.getItem(RAW_KEY) === 'true';
  private term = new TermIndex(PAGE);
  /** the filtered lines as shown (terminal view of this.filtered) */
  private filteredView: { l: LogLine; text?: string }[] | null = null;
  private followBox: HTMLInputElement;
  private download: HTMLButtonElement;

  constructor(
    private runId: string,
    private scope: Scope,
    // startLine, when set, opens the log there (the timeline's click)
    // instead of at its end.
    private startLine?: number,
  ) {
    this.status = h('span', { class: 'muted', 'data-testid': 'log-status' });
    this.nodeSel = h('input', { type: 'number', min: 0, placeholder: 'all', class: 'narrow', 'aria-label': 'Node' });
    this.rankSel = h('input', { type: 'number', min: 0, placeholder: 'all', class: 'narrow', 'aria-label': 'Rank' });
    this.streamSel = h('select', { 'aria-label': 'Stream' }, h('option', { value: '' }, 'all'), h('option', { value: 'stdout' }, 'stdout'), h('option', { value: 'stderr' }, 'stderr'));
    const applyFilter = debounce(() => this.applyFilter(), 250);
    this.nodeSel.addEventListener('input', applyFilter);
    this.rankSel.addEventListener('input', applyFilter);
    this.streamSel.addEventListener('change', applyFilter);
    const searchIn = h('input', { type: 'search', placeholder: 'Search logs (Enter)', 'aria-label': 'Search logs' });
    const regex = h('input', { type: 'checkbox', 'aria-label': 'Regular expression' });
    searchIn.addEventListener('keydown', (e) => e.key === 'Enter' && void this.search(searchIn.value, regex.checked));
    const jump = h('input', { type: 'number', min: 1, placeholder: 'line', class: 'narrow', 'aria-label': 'Jump to line' });
    jump.addEventListener('keydown', (e) => e.key === 'Enter' && this.jumpTo(Number(jump.value)));
    const followBox = (this.followBox = h('input', { type: 'checkbox', checked: true, 'aria-label': 'Follow' }));
    followBox.addEventListener('change', () => {
      this.follow = followBox.checked;
      if (this.follow) this.list.scrollToEnd();
    });
    const rawBox = h('input', { type: 'checkbox', checked: this.raw, 'aria-label': 'Raw stream', name: 'raw' });
    rawBox.addEventListener('change', () => {
      this.raw = rawBox.checked;
      try {
        localStorage.setItem(RAW_KEY, String(this.raw));
      } catch {
        /* private mode */
      }
      const line = this.anchorLine();
      if (this.filtered) this.viewFiltered();
      this.reindex();
      this.list.setCount(this.rows());
      if (line) this.list.scrollTo(this.rowOf(line));
      this.list.refresh();
    });
    this.download = h('button', { title: 'Download the whole log as a text file', onclick: () => void this.downloadAll() }, 'Download');
    this.results = h('div', { class: 'log-results' });
    this.list = new VList({ rowHeight: ROW_H, count: 0, render: (i) => this.renderRow(i), onRange: (a, b) => this.onRange(a, b), className: 'log-list', overscan: 20 });
    this.list.el.addEventListener('wheel', () => {
      // Scrolling up stops following; reaching the end again resumes it.
      requestAnimationFrame(() => {
        this.follow = this.list.atEnd();
        followBox.checked = this.follow;
      });
    }, { passive: true });
    this.el = h(
      'div',
      { class: 'logs' },
      h(
        'div',
        { class: 'toolbar' },
        searchIn,
        h('label', null, regex, ' regex'),
        h('label', null, 'Go to ', jump),
        h('label', null, 'Node ', this.nodeSel),
        h('label', null, 'Rank ', this.rankSel),
        h('label', null, 'Stream ', this.streamSel),
        h('label', { title: 'Every stored record, progress-bar redraws (\\r) included' }, rawBox, ' Raw'),
        h('label', null, followBox, ' Follow'),
        this.download,
        this.status,
      ),
      this.results,
      this.list.el,
    );
    scope.add(() => this.tailAbort?.abort());
    void this.start();
  }

  private query(extra: Record<string, string | number | undefined>): Record<string, string | number | undefined> {
    return { run_id: this.runId, ...extra };
  }

  private async start(): Promise<void> {
    try {
      const p: LogPage = await get(SX + '/logs/get', this.query({ from_line: 1, limit: PAGE }));
      this.pages.set(0, p.lines);
      this.total = p.total_lines;
      this.runStatus = p.run_status;
      if (TERMINAL.has(this.runStatus)) {
        // Nothing more will come: following is off, and says why.
        this.follow = false;
        this.followBox.checked = false;
        this.followBox.disabled = true;
        this.followBox.parentElement!.title = 'The run has ended';
      }
      this.reindex();
      this.list.setCount(this.rows(), true);
      this.showStatus();
      if (this.startLine && this.total > 0) this.jumpTo(this.startLine);
      else if (this.total > 0) this.list.scrollToEnd();
      if (!TERMINAL.has(this.runStatus)) void this.tail();
    } catch (e: any) {
      this.available = false;
      this.status.textContent = e.status === 404 ? 'This server does not keep run logs (no logs API).' : e.message;
      this.list.el.replaceChildren(h('p', { class: 'empty' }, e.status === 404 ? 'No logs: this server has no run logs API.' : 'No logs: ' + e.message));
    }
  }

  private showStatus(): void {
    const live = !TERMINAL.has(this.runStatus);
    const shown = this.filtered ? `${this.filtered.length.toLocaleString()} matching lines${this.filterDone ? '' : '+'} of ` : '';
    this.status.textContent = `${shown}${this.total.toLocaleString()} lines${live ? ' · live' : ''}`;
    this.el.dataset.total = String(this.total);
  }

  /** tail long-polls for new lines until the run ends or the page closes. */
  private async tail(): Promise<void> {
    while (!this.scope.disposed) {
      const ac = new AbortController();
      this.tailAbort = ac;
      try {
        const p: LogPage = await get(SX + '/logs/tail', this.query({ after_line: this.total, wait_ms: config.logTailWaitMs }), ac.signal);
        if (this.scope.disposed) return;
        this.runStatus = p.run_status;
        const touched = new Set<number>();
        for (const l of p.lines) touched.add(this.store(l));
        const before = this.total;
        this.total = Math.max(this.total, p.total_lines, p.next_line - 1);
        if (this.total !== before) {
          if (this.filtered) this.appendFiltered(p.lines);
          else {
            const held = [...touched].filter((x) => x >= 0);
            this.reindex(held.length ? held : [Math.floor((this.total - 1) / PAGE)]);
            this.list.setCount(this.rows());
            // The last rows may be redraws replaced now: draw them again.
            const [f, l] = this.list.range;
            for (let i = Math.max(f, this.rows() - p.lines.length - 2); i <= l; i++) this.list.rerender(i);
          }
          if (this.follow) this.list.scrollToEnd();
          else this.list.update();
        }
        if (TERMINAL.has(p.run_status)) {
          this.followBox.checked = this.follow = false;
          this.followBox.disabled = true;
        }
        this.showStatus();
        if (TERMINAL.has(p.run_status) && p.next_line > p.total_lines) return;
      } catch (e: any) {
        if (e?.name === 'AbortError') return;
        await new Promise((r) => setTimeout(r, 2000));
      }
    }
  }

  /** store keeps a tailed line in its page; returns the page, or -1 when that page is not held. */
  private store(l: LogLine): number {
    const pi = Math.floor((l.line - 1) / PAGE);
    let page = this.pages.get(pi);
    if (!page) {
      if (pi * PAGE + 1 !== l.line) return -1; // a page we never fetched: it is fetched when seen
      page = [];
      this.pages.set(pi, page);
    }
    const at = l.line - 1 - pi * PAGE;
    if (at === page.length) page.push(l);
    else if (at < page.length) page[at] = l;
    return pi;
  }

  /** rows is the number of rows shown: every record (raw), or the terminal's view. */
  private rows(): number {
    if (this.filtered) return this.filteredView?.length ?? 0;
    return this.raw ? this.total : this.term.rows;
  }

  /** reindex recomputes the terminal view after pages changed (all of them when none is named). */
  private reindex(changed?: number[]): void {
    if (this.raw) return;
    this.term.update(this.total, (p) => this.completePage(p), changed && changed.length ? changed : undefined);
  }

  /** completePage is page p when it is held whole (the last page may be short). */
  private completePage(p: number): LogLine[] | undefined {
    const page = this.pages.get(p);
    return page && (page.length === PAGE || p * PAGE + page.length >= this.total) ? page : undefined;
  }

  private rowOf(line: number): number {
    if (this.filtered) {
      const v = this.filteredView ?? [];
      const k = v.findIndex((x) => x.l.line >= line);
      return k < 0 ? Math.max(0, v.length - 1) : k;
    }
    return this.raw ? line - 1 : this.term.rowOf(line);
  }

  /** anchorLine is the stored line at the top of the view, to keep in place while rows change. */
  private anchorLine(): number | null {
    const [f] = this.list.range;
    return f >= 0 ? this.lineAt(f)?.l.line ?? this.pendingLine(f) : null;
  }

  private lineAt(i: number): { l: LogLine; text?: string } | undefined {
    if (this.filtered) return this.filteredView?.[i];
    if (this.raw) {
      const l = this.pages.get(Math.floor(i / PAGE))?.[i % PAGE];
      return l && { l };
    }
    const at = this.term.at(i);
    if (!at) return undefined;
    const l = this.pages.get(at.page)?.[at.offset];
    return l && { l, text: at.text };
  }

  /** pendingLine is the stored line number a row not loaded yet stands for. */
  private pendingLine(i: number): number | null {
    if (this.filtered) return null;
    if (this.raw) return i + 1;
    const at = this.term.at(i);
    return at ? at.page * PAGE + at.offset + 1 : null;
  }

  private renderRow(i: number): HTMLElement {
    const shown = this.lineAt(i);
    const l = shown?.l;
    const row = document.createElement('div');
    row.className = 'log-line';
    const num = document.createElement('span');
    num.className = 'ln';
    const where = document.createElement('span');
    where.className = 'lr';
    const txt = document.createElement('span');
    txt.className = 'lt';
    if (l) {
      num.textContent = String(l.line);
      where.textContent = l.node + (l.local_rank >= 0 ? ':' + l.local_rank : '');
      where.title = `node ${l.node}, rank ${l.local_rank >= 0 ? l.local_rank : '?'}, ${l.stream}, ${fmtTime(l.timestamp)}`;
      // The one innerHTML in the UI: ansiToHtml escapes every character of the text.
      txt.innerHTML = ansiToHtml(shown!.text ?? l.text);
      if (l.stream === 'stderr') row.classList.add('stderr');
      if (this.raw && l.cr) row.classList.add('cr');
      if (this.raw && l.partial) row.classList.add('partial');
      if (l.line === this.highlight) row.classList.add('hit');
      row.dataset.line = String(l.line);
    } else {
      num.textContent = String(this.pendingLine(i) ?? '');
      txt.textContent = '…';
      row.classList.add('pending');
    }
    row.append(num, where, txt);
    return row;
  }

  private fetchRange = debounce((first: number, last: number) => void this.fetchPages(first, last), 30);

  private onRange(first: number, last: number): void {
    if (this.filtered) {
      if (!this.filterDone && last >= (this.filteredView?.length ?? 0) - 50) void this.loadFiltered();
      return;
    }
    this.fetchRange(first, last);
  }

  /** pageOf is the page holding the stored line shown in row i. */
  private pageOf(i: number): number {
    if (this.raw) return Math.floor(i / PAGE);
    return this.term.at(Math.min(Math.max(0, i), Math.max(0, this.rows() - 1)))?.page ?? 0;
  }

  private async fetchPages(first: number, last: number): Promise<void> {
    const a = this.pageOf(first);
    const b = this.pageOf(last);
    const want: number[] = [];
    for (let p = a; p <= b; p++) {
      const page = this.pages.get(p);
      const complete = page && (page.length === PAGE || p * PAGE + page.length >= this.total);
      if (!complete && !this.inflight.has(p)) want.push(p);
    }
    await Promise.all(
      want.map(async (p) => {
        this.inflight.add(p);
        try {
          const r: LogPage = await get(SX + '/logs/get', this.query({ from_line: p * PAGE + 1, limit: PAGE }));
          const anchor = this.anchorLine();
          this.pages.set(p, r.lines);
          this.total = Math.max(this.total, r.total_lines);
          const gone = this.evict(p);
          if (this.raw) {
            const [f, l] = this.list.range;
            for (let i = Math.max(f - 20, p * PAGE); i <= Math.min(l + 20, p * PAGE + PAGE - 1); i++) this.list.rerender(i);
            return;
          }
          // The terminal view of this page (and its neighbours) is known
          // now: rows may have gone; keep the line at the top in place.
          const before = this.rows();
          this.reindex([p, ...gone]);
          if (this.rows() !== before) {
            this.list.setCount(this.rows());
            if (this.follow) this.list.scrollToEnd();
            else if (this.highlight > 0 && this.jumping) this.list.scrollTo(this.rowOf(this.highlight), true);
            else if (anchor) this.list.scrollTo(this.rowOf(anchor));
          }
          this.list.refresh();
        } catch {
          /* shown as pending; retried when scrolled again */
        } finally {
          this.inflight.delete(p);
        }
      }),
    );
  }

  /** evict drops the pages farthest from keep beyond MAX_PAGES; returns them. */
  private evict(keep: number): number[] {
    if (this.pages.size <= MAX_PAGES) return [];
    const far = [...this.pages.keys()].sort((x, y) => Math.abs(y - keep) - Math.abs(x - keep));
    const gone = far.slice(0, this.pages.size - MAX_PAGES);
    for (const p of gone) this.pages.delete(p);
    return gone;
  }

  jumpTo(line: number): void {
    if (!Number.isFinite(line) || line < 1) return;
    if (this.filtered) this.clearFilter();
    this.highlight = Math.min(line, this.total);
    this.follow = false;
    this.followBox.checked = false;
    const row = this.rowOf(this.highlight);
    this.list.scrollTo(row, true);
    this.list.refresh();
    this.jumping = true;
    void this.fetchPages(Math.max(0, row - 100), row + 100).finally(() => {
      this.jumping = false;
      const at = this.rowOf(this.highlight);
      // A progress-bar redraw (or a piece of a line) is not a row of the
      // terminal view: highlight the row that shows what became of it.
      const shown = this.lineAt(at)?.l.line;
      if (shown && shown !== this.highlight && !this.raw && !this.filtered) {
        this.showStatus();
        this.status.textContent += ` · line ${line} was redrawn over: its row is line ${shown} (Raw shows every record)`;
        this.highlight = shown;
      }
      this.list.scrollTo(at, true);
      this.list.refresh();
    });
  }

  private jumping = false;

  private async search(term: string, regex: boolean): Promise<void> {
    if (!term) {
      this.results.replaceChildren();
      return;
    }
    this.results.replaceChildren(h('span', { class: 'muted' }, 'Searching…'));
    try {
      const r: LogPage = await get(SX + '/logs/search', this.query({ [regex ? 'regex' : 'q']: term, limit: 200, ...this.filterParams() }));
      const hits = r.lines;
      this.results.replaceChildren(
        h('div', { class: 'muted' }, hits.length ? `${hits.length}${r.next_line <= r.total_lines ? '+' : ''} matches` : 'No match.'),
        h(
          'ol',
          { class: 'hits' },
          hits.map((l) =>
            h(
              'li',
              null,
              h('button', { class: 'link', onclick: () => this.jumpTo(l.line) }, 'line ' + l.line),
              ' ',
              h('span', { class: 'hit-text' }, l.text.length > 200 ? l.text.slice(0, 200) + '…' : l.text),
            ),
          ),
        ),
      );
      if (hits.length) this.jumpTo(hits[0].line);
    } catch (e: any) {
      this.results.replaceChildren(h('span', { class: 'error-text' }, e.message));
    }
  }

  private filterParams(): Record<string, string | number | undefined> {
    return { node: this.nodeSel.value === '' ? undefined : Number(this.nodeSel.value), stream: this.streamSel.value || undefined };
  }

  private rankOK(l: LogLine): boolean {
    return this.rankSel.value === '' || l.local_rank === Number(this.rankSel.value);
  }

  private clearFilter(): void {
    this.nodeSel.value = this.rankSel.value = '';
    this.streamSel.value = '';
    this.filtered = null;
    this.filteredView = null;
    this.list.setCount(this.rows(), true);
  }

  private applyFilter(): void {
    if (!this.available) return;
    const on = this.nodeSel.value !== '' || this.rankSel.value !== '' || this.streamSel.value !== '';
    if (!on) {
      this.filtered = null;
      this.filteredView = null;
      this.list.setCount(this.rows(), true);
      this.showStatus();
      return;
    }
    this.filtered = [];
    this.filteredView = [];
    this.filterNext = 1;
    this.filterDone = false;
    this.list.setCount(0, true);
    void this.loadFiltered();
  }

  private async loadFiltered(): Promise<void> {
    if (this.filterLoading || this.filterDone || !this.filtered) return;
    this.filterLoading = true;
    const target = this.filtered;
    try {
      let got = 0;
      while (got < 200 && !this.filterDone && target === this.filtered) {
        const r: LogPage = await get(SX + '/logs/get', this.query({ from_line: this.filterNext, limit: 2000, ...this.filterParams() }));
        if (target !== this.filtered) return;
        const keep = r.lines.filter((l) => this.rankOK(l));
        target.push(...keep);
        got += keep.length;
        this.filterNext = r.next_line;
        this.filterDone = r.next_line > r.total_lines;
      }
      this.viewFiltered();
      this.list.setCount(this.rows());
      this.list.refresh();
      this.showStatus();
    } finally {
      this.filterLoading = false;
    }
  }

  private appendFiltered(lines: LogLine[]): void {
    if (!this.filtered || !this.filterDone) return;
    const node = this.nodeSel.value === '' ? null : Number(this.nodeSel.value);
    const stream = this.streamSel.value;
    for (const l of lines) if ((node == null || l.node === node) && (!stream || l.stream === stream) && this.rankOK(l)) this.filtered.push(l);
    this.filterNext = this.total + 1;
    this.viewFiltered();
    this.list.setCount(this.rows());
  }

  /** viewFiltered computes the filtered lines as shown (their terminal view unless raw). */
  private viewFiltered(): void {
    const f = this.filtered;
    if (!f) return;
    if (this.raw) {
      this.filteredView = f.map((l) => ({ l }));
      return;
    }
    const v = terminalPage(f, null);
    this.filteredView = v.rows.map((k) => ({ l: f[k], text: v.texts.get(k) }));
  }

  /**
   * downloadAll saves the whole log (every node and rank, whatever the
   * filters) as a text file: as the terminal showed it, or raw, each record
   * followed by what ended it (\n, \r for a redraw, nothing for a piece).
   */
  private async downloadAll(): Promise<void> {
    const btn = this.download;
    if (btn.disabled) return;
    btn.disabled = true;
    const raw = this.raw;
    const parts: string[] = [];
    try {
      let from = 1;
      let prev: LogLine[] | null = null;
      let carry: TermPage['carryOut'] | undefined;
      const emit = (lines: LogLine[], next: LogLine[] | null) => {
        if (raw) {
          for (const l of lines) parts.push(l.text + (l.partial ? '' : l.cr ? '\r' : '\n'));
          return;
        }
        const v = terminalPage(lines, next, carry);
        carry = v.carryOut;
        for (const k of v.rows) parts.push((v.texts.get(k) ?? lines[k].text) + '\n');
      };
      for (;;) {
        const r: LogPage = await get(SX + '/logs/get', this.query({ from_line: from, limit: DOWNLOAD_PAGE }));
        if (prev) emit(prev, r.lines);
        prev = r.lines;
        btn.textContent = `Downloading… ${Math.min(100, Math.floor(((r.next_line - 1) / Math.max(1, r.total_lines)) * 100))}%`;
        if (r.lines.length === 0 || r.next_line > r.total_lines) break;
        from = r.next_line;
      }
      if (prev) emit(prev, null);
      const url = URL.createObjectURL(new Blob(parts, { type: 'text/plain;charset=utf-8' }));
      const a = h('a', { href: url, download: `${this.runId}${raw ? '-raw' : ''}.log` });
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 60_000);
      this.el.dataset.downloaded = String(parts.length);
    } catch (e: any) {
      this.status.textContent = 'Download failed: ' + (e?.message ?? e);
    } finally {
      btn.disabled = false;
      btn.textContent = 'Download';
    }
  }
}
