// A virtualised list of fixed-height rows: only the rows in view (and a
// few around them) exist in the DOM, so 10,000 runs or a million log lines
// scroll like ten. Lists taller than browsers allow an element to be
// (about 17 million pixels in Firefox) are scaled: the scrollbar maps onto
// the whole list, and rows are placed relative to the viewport.

const MAX_HEIGHT = 8_000_000;

export interface VListOpts {
  rowHeight: number;
  count: number;
  /** render builds row i's element (the list positions it). */
  render: (i: number) => HTMLElement;
  /** rows rendered beyond each edge of the viewport */
  overscan?: number;
  /** called with the range of rows in view after each scroll */
  onRange?: (first: number, last: number) => void;
  /** an element kept above the rows (a table header), sticky at the top */
  header?: HTMLElement;
  className?: string;
}

export class VList {
  readonly el: HTMLDivElement;
  private spacer: HTMLDivElement;
  private rows = new Map<number, HTMLElement>();
  private count: number;
  private raf = 0;
  private first = 0;
  private last = -1;

  constructor(private opts: VListOpts) {
    this.count = opts.count;
    this.el = document.createElement('div');
    this.el.className = 'vlist ' + (opts.className ?? '');
    this.el.tabIndex = 0;
    if (opts.header) {
      opts.header.classList.add('vlist-header');
      this.el.appendChild(opts.header);
    }
    this.spacer = document.createElement('div');
    this.spacer.className = 'vlist-spacer';
    this.el.appendChild(this.spacer);
    this.el.addEventListener('scroll', () => this.schedule(), { passive: true });
    new ResizeObserver(() => this.schedule()).observe(this.el);
    this.sizeSpacer();
  }

  private get total(): number {
    return this.count * this.opts.rowHeight;
  }
  private get scaled(): boolean {
    return this.total > MAX_HEIGHT;
  }

  private sizeSpacer(): void {
    this.spacer.style.height = Math.min(this.total, MAX_HEIGHT) + 'px';
  }

  private viewport(): number {
    return Math.max(0, this.el.clientHeight - (this.opts.header?.offsetHeight ?? 0));
  }

  /** virtualTop is the list offset at the top of the viewport, in unscaled pixels. */
  private virtualTop(): number {
    const st = this.el.scrollTop;
    if (!this.scaled) return st;
    const vh = this.viewport();
    const maxScroll = Math.max(1, MAX_HEIGHT - vh);
    return (Math.min(st, maxScroll) / maxScroll) * Math.max(0, this.total - vh);
  }

  private schedule(): void {
    if (!this.raf) this.raf = requestAnimationFrame(() => ((this.raf = 0), this.update()));
  }

  /** update renders the rows in view now. */
  update(): void {
    const rh = this.opts.rowHeight;
    const over = this.opts.overscan ?? 8;
    const vt = this.virtualTop();
    const vh = this.viewport() || 600;
    const first = Math.max(0, Math.floor(vt / rh) - over);
    const last = Math.min(this.count - 1, Math.ceil((vt + vh) / rh) + over);
    for (const [i, row] of this.rows) {
      if (i < first || i > last) {
        row.remove();
        this.rows.delete(i);
      }
    }
    const st = this.el.scrollTop;
    for (let i = first; i <= last; i++) {
      let row = this.rows.get(i);
      if (!row) {
        row = this.opts.render(i);
        row.classList.add('vrow');
        row.style.height = rh + 'px';
        this.rows.set(i, row);
        this.spacer.appendChild(row);
      }
      const top = this.scaled ? st + (i * rh - vt) : i * rh;
      row.style.transform = `translateY(${top}px)`;
    }
    const visFirst = Math.min(this.count - 1, Math.floor(vt / rh));
    const visLast = Math.min(this.count - 1, Math.ceil((vt + vh) / rh) - 1);
    if (visFirst !== this.first || visLast !== this.last) {
      this.first = visFirst;
      this.last = visLast;
      this.opts.onRange?.(Math.max(0, visFirst), visLast);
    }
  }

  /** setCount changes the number of rows; rendered rows are kept unless reset. */
  setCount(n: number, reset = false): void {
    this.count = n;
    this.sizeSpacer();
    if (reset) this.refresh();
    else {
      for (const [i, row] of this.rows) if (i >= n) (row.remove(), this.rows.delete(i));
      this.update();
    }
  }

  /** refresh renders every row in view again. */
  refresh(): void {
    for (const row of this.rows.values()) row.remove();
    this.rows.clear();
    this.first = -1;
    this.update();
  }

  /** rerender renders row i again, if it is in view. */
  rerender(i: number): void {
    const row = this.rows.get(i);
    if (!row) return;
    row.remove();
    this.rows.delete(i);
    this.update();
  }

  /** scrollTo scrolls so that row i is at the top (or in the middle). */
  scrollTo(i: number, center = false): void {
    const rh = this.opts.rowHeight;
    const vh = this.viewport();
    let vt = i * rh - (center ? vh / 2 - rh / 2 : 0);
    vt = Math.max(0, Math.min(vt, this.total - vh));
    if (this.scaled) {
      const maxScroll = Math.max(1, MAX_HEIGHT - vh);
      this.el.scrollTop = (vt / Math.max(1, this.total - vh)) * maxScroll;
    } else this.el.scrollTop = vt;
    this.update();
  }

  scrollToEnd(): void {
    this.el.scrollTop = this.el.scrollHeight;
    this.update();
  }

  atEnd(): boolean {
    return this.el.scrollTop + this.el.clientHeight >= this.el.scrollHeight - 4;
  }

  get range(): [number, number] {
    return [this.first, this.last];
  }
}
