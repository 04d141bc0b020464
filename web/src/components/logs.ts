// The logs tab: a run's captured output (every node and rank), virtualised
// so a million lines scroll smoothly, fetched in pages as they come into
// view; live tail while the run runs; search with jump to each match; jump
// to a line; node, rank and stream filters; ANSI colours.
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
    const followBox = h('input', { type: 'checkbox', checked: true, 'aria-label': 'Follow' });
    followBox.addEventListener('change', () => {
      this.follow = followBox.checked;
      if (this.follow) this.list.scrollToEnd();
    });
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
        h('label', null, followBox, ' Follow'),
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
      this.list.setCount(this.total, true);
      this.showStatus();
      if (this.startLine && this.total > 0) this.jumpTo(this.startLine);
      else if (this.follow && this.total > 0) this.list.scrollToEnd();
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
        for (const l of p.lines) this.store(l);
        const before = this.total;
        this.total = Math.max(this.total, p.total_lines, p.next_line - 1);
        if (this.total !== before) {
          if (this.filtered) this.appendFiltered(p.lines);
          else this.list.setCount(this.total);
          if (this.follow) this.list.scrollToEnd();
          else this.list.update();
        }
        this.showStatus();
        if (TERMINAL.has(p.run_status) && p.next_line > p.total_lines) return;
      } catch (e: any) {
        if (e?.name === 'AbortError') return;
        await new Promise((r) => setTimeout(r, 2000));
      }
    }
  }

  private store(l: LogLine): void {
    const pi = Math.floor((l.line - 1) / PAGE);
    let page = this.pages.get(pi);
    if (!page) {
      if (pi * PAGE + 1 !== l.line) return; // a page we never fetched: it is fetched when seen
      page = [];
      this.pages.set(pi, page);
    }
    const at = l.line - 1 - pi * PAGE;
    if (at === page.length) page.push(l);
    else if (at < page.length) page[at] = l;
  }

  private lineAt(i: number): LogLine | undefined {
    if (this.filtered) return this.filtered[i];
    const page = this.pages.get(Math.floor(i / PAGE));
    return page?.[i % PAGE];
  }

  private renderRow(i: number): HTMLElement {
    const l = this.lineAt(i);
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
      txt.innerHTML = ansiToHtml(l.text);
      if (l.stream === 'stderr') row.classList.add('stderr');
      if (l.line === this.highlight) row.classList.add('hit');
      row.dataset.line = String(l.line);
    } else {
      num.textContent = this.filtered ? '' : String(i + 1);
      txt.textContent = '…';
      row.classList.add('pending');
    }
    row.append(num, where, txt);
    return row;
  }

  private fetchRange = debounce((first: number, last: number) => void this.fetchPages(first, last), 30);

  private onRange(first: number, last: number): void {
    if (this.filtered) {
      if (!this.filterDone && last >= this.filtered.length - 50) void this.loadFiltered();
      return;
    }
    this.fetchRange(first, last);
  }

  private async fetchPages(first: number, last: number): Promise<void> {
    const a = Math.floor(first / PAGE);
    const b = Math.floor(last / PAGE);
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
          this.pages.set(p, r.lines);
          this.total = Math.max(this.total, r.total_lines);
          this.evict(p);
          const [f, l] = this.list.range;
          for (let i = Math.max(f - 20, p * PAGE); i <= Math.min(l + 20, p * PAGE + PAGE - 1); i++) this.list.rerender(i);
        } catch {
          /* shown as pending; retried when scrolled again */
        } finally {
          this.inflight.delete(p);
        }
      }),
    );
  }

  private evict(keep: number): void {
    if (this.pages.size <= MAX_PAGES) return;
    const far = [...this.pages.keys()].sort((x, y) => Math.abs(y - keep) - Math.abs(x - keep));
    for (const p of far.slice(0, this.pages.size - MAX_PAGES)) this.pages.delete(p);
  }

  jumpTo(line: number): void {
    if (!Number.isFinite(line) || line < 1) return;
    if (this.filtered) this.clearFilter();
    this.highlight = Math.min(line, this.total);
    this.follow = false;
    this.list.scrollTo(this.highlight - 1, true);
    this.list.refresh();
    void this.fetchPages(Math.max(0, this.highlight - 100), this.highlight + 100);
  }

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
    this.list.setCount(this.total, true);
  }

  private applyFilter(): void {
    if (!this.available) return;
    const on = this.nodeSel.value !== '' || this.rankSel.value !== '' || this.streamSel.value !== '';
    if (!on) {
      this.filtered = null;
      this.list.setCount(this.total, true);
      this.showStatus();
      return;
    }
    this.filtered = [];
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
      this.list.setCount(target.length);
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
    this.list.setCount(this.filtered.length);
  }
}
