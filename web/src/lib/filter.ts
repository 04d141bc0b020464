// The MLflow search grammar, for the filter box: a tokenizer that colours
// the filter (keys, operators, strings, numbers) and marks the position a
// server error names.

export type TokenKind = 'key' | 'op' | 'string' | 'number' | 'keyword' | 'space' | 'punct' | 'other';

export interface Token {
  kind: TokenKind;
  text: string;
  /** start offset in the filter, in UTF-16 code units */
  start: number;
}

const KEYWORDS = new Set(['AND', 'OR', 'IN', 'NOT', 'IS', 'NULL', 'LIKE', 'ILIKE']);
const OPS = ['!=', '<=', '>=', '=', '<', '>', '~'];

/** tokenizeFilter splits a filter into tokens that cover it completely. */
export function tokenizeFilter(src: string): Token[] {
  const out: Token[] = [];
  let i = 0;
  const push = (kind: TokenKind, end: number) => {
    out.push({ kind, text: src.slice(i, end), start: i });
    i = end;
  };
  while (i < src.length) {
    const c = src[i];
    if (/\s/.test(c)) {
      let j = i + 1;
      while (j < src.length && /\s/.test(src[j])) j++;
      push('space', j);
    } else if (c === "'" || c === '"' || c === '`') {
      // A quoted string, or a quoted key (backticks, double quotes after a dot).
      let j = i + 1;
      while (j < src.length && src[j] !== c) j += src[j] === '\\' ? 2 : 1;
      const prev = out.length ? out[out.length - 1] : null;
      const isKey = c === '`' || (c === '"' && prev?.kind === 'key' && prev.text.endsWith('.'));
      push(isKey ? 'key' : 'string', Math.min(src.length, j + 1));
    } else if (/[0-9]/.test(c) || ((c === '-' || c === '.') && /[0-9]/.test(src[i + 1] ?? ''))) {
      let j = i + 1;
      while (j < src.length && /[0-9.eE+\-]/.test(src[j])) j++;
      push('number', j);
    } else if (/[A-Za-z_]/.test(c)) {
      let j = i + 1;
      while (j < src.length && /[A-Za-z0-9_.\-/:]/.test(src[j])) j++;
      const word = src.slice(i, j);
      push(KEYWORDS.has(word.toUpperCase()) ? 'keyword' : 'key', j);
    } else {
      const op = OPS.find((o) => src.startsWith(o, i));
      if (op) push('op', i + op.length);
      else push(c === '(' || c === ')' || c === ',' ? 'punct' : 'other', i + 1);
    }
  }
  return out;
}

/**
 * errorOffset finds the position a server error names ("... at position
 * 12", a 1-based character count) and returns it as a 0-based UTF-16
 * offset into src, or -1 when the message names none.
 */
export function errorOffset(message: string, src: string): number {
  const all = [...message.matchAll(/at position (\d+)/g)];
  if (all.length === 0) return -1;
  const chars = Number(all[all.length - 1][1]) - 1;
  let offset = 0;
  let n = 0;
  for (const ch of src) {
    if (n === chars) return offset;
    offset += ch.length;
    n++;
  }
  return offset; // at the end of the filter
}

/**
 * markError splits tokens so that the character at offset stands alone,
 * and returns its index (tokens.length when offset is at the end).
 */
export function markError(tokens: Token[], offset: number): { tokens: Token[]; index: number } {
  const out: Token[] = [];
  let index = -1;
  for (const t of tokens) {
    const end = t.start + t.text.length;
    if (index < 0 && offset >= t.start && offset < end) {
      const at = offset - t.start;
      const cp = t.text.codePointAt(at) ?? 0;
      const len = cp > 0xffff ? 2 : 1;
      if (at > 0) out.push({ kind: t.kind, text: t.text.slice(0, at), start: t.start });
      index = out.length;
      out.push({ kind: t.kind, text: t.text.slice(at, at + len), start: offset });
      if (at + len < t.text.length) out.push({ kind: t.kind, text: t.text.slice(at + len), start: offset + len });
    } else {
      out.push(t);
    }
  }
  if (index < 0) index = out.length;
  return { tokens: out, index };
}

/** quoteKey quotes a param, metric or tag key for a filter when it needs it. */
export function quoteKey(key: string): string {
  return /^[A-Za-z_][A-Za-z0-9_]*$/.test(key) ? key : '`' + key.replace(/`/g, '') + '`';
}
