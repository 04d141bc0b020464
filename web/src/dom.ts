// A few helpers to build DOM nodes. Every user value goes in as a text
// node or through textContent; nothing here parses HTML.

export type Child = Node | string | number | null | undefined | false | Child[];
type Handler = (ev: any) => void;
export type Attrs = Record<string, string | number | boolean | Handler | null | undefined>;

/**
 * h creates an element. Attributes named on* with a function become event
 * listeners; value, checked, disabled and selected are set as properties;
 * null, undefined and false attributes are left out. Children that are
 * strings or numbers become text nodes.
 */
export function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs?: Attrs | null, ...children: Child[]): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  if (attrs) {
    for (const [k, v] of Object.entries(attrs)) {
      if (v == null || v === false) continue;
      if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v as EventListener);
      else if (k === 'value' || k === 'checked' || k === 'disabled' || k === 'selected' || k === 'indeterminate') (el as any)[k] = v;
      else el.setAttribute(k, v === true ? '' : String(v));
    }
  }
  append(el, children);
  return el;
}

export function append(el: Node, children: Child[]): void {
  for (const c of children) {
    if (c == null || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else if (c instanceof Node) el.appendChild(c);
    else el.appendChild(document.createTextNode(String(c)));
  }
}

/** clear removes every child of el. */
export function clear(el: Node): void {
  while (el.firstChild) el.removeChild(el.firstChild);
}

/** replace sets el's children. */
export function replace(el: Node, ...children: Child[]): void {
  clear(el);
  append(el, children);
}

/** text sets el's text content and returns el. */
export function text<T extends Node>(el: T, s: string): T {
  el.textContent = s;
  return el;
}

/** A link that the router handles without reloading the page. */
export function link(href: string, ...children: Child[]): HTMLAnchorElement {
  return h('a', { href }, ...children);
}

export function errorBox(err: unknown): HTMLElement {
  return h('div', { class: 'error', role: 'alert' }, err instanceof Error ? err.message : String(err));
}

export function spinner(label = 'Loading…'): HTMLElement {
  return h('div', { class: 'loading' }, label);
}

/** A page's teardown functions, run when the router leaves it. */
export class Scope {
  private fns: (() => void)[] = [];
  private dead = false;
  add(fn: () => void): void {
    if (this.dead) fn();
    else this.fns.push(fn);
  }
  get disposed(): boolean {
    return this.dead;
  }
  interval(fn: () => void, ms: number): void {
    const id = setInterval(fn, ms);
    this.add(() => clearInterval(id));
  }
  listen(target: EventTarget, type: string, fn: EventListener, opts?: AddEventListenerOptions): void {
    target.addEventListener(type, fn, opts);
    this.add(() => target.removeEventListener(type, fn, opts));
  }
  dispose(): void {
    if (this.dead) return;
    this.dead = true;
    for (const fn of this.fns.splice(0).reverse()) {
      try {
        fn();
      } catch (e) {
        console.error(e);
      }
    }
  }
}

/** debounce delays fn until ms have passed without another call. */
export function debounce<A extends unknown[]>(fn: (...a: A) => void, ms: number): (...a: A) => void {
  let t: ReturnType<typeof setTimeout> | undefined;
  return (...a: A) => {
    if (t !== undefined) clearTimeout(t);
    t = setTimeout(() => fn(...a), ms);
  };
}

/** A modal dialog; returns a function that closes it. */
export function modal(title: string, body: Node, onClose?: () => void): () => void {
  const close = () => {
    back.remove();
    document.removeEventListener('keydown', onKey);
    onClose?.();
  };
  const onKey = (e: KeyboardEvent) => {
    if (e.key === 'Escape') close();
  };
  const back = h(
    'div',
    { class: 'modal-back', onclick: (e: MouseEvent) => e.target === back && close() },
    h('div', { class: 'modal', role: 'dialog', 'aria-label': title }, h('div', { class: 'modal-head' }, h('h2', null, title), h('button', { class: 'icon', title: 'Close', onclick: close }, '×')), body),
  );
  document.addEventListener('keydown', onKey);
  document.body.appendChild(back);
  return close;
}
