import assert from 'node:assert/strict';
import { test } from 'node:test';
import { joinPiece, TermIndex, TermLine, terminalPage } from '../../src/lib/terminal';

let n = 0;
const rec = (text: string, f: { cr?: boolean; partial?: boolean; stream?: string; node?: number } = {}): TermLine => ({ line: ++n, node: f.node ?? 0, local_rank: -1, stream: f.stream ?? 'stderr', text, cr: f.cr, partial: f.partial });

test('a progress bar shows its last redraw only', () => {
  const lines = [rec('start', { stream: 'stdout' }), rec(' 10%|#', { cr: true }), rec(' 50%|#####', { cr: true }), rec('100%|##########'), rec('done', { stream: 'stdout' })];
  const v = terminalPage(lines, null);
  assert.deepEqual(v.rows.map((k) => lines[k].text), ['start', '100%|##########', 'done']);
});

test('a redraw still in progress (the last record) stays shown, and other sources do not hide it', () => {
  const lines = [rec(' 10%|#', { cr: true }), rec('log line', { stream: 'stdout' }), rec(' 20%|##', { cr: true }), rec(' 30%|###', { cr: true, node: 1 })];
  const v = terminalPage(lines, null);
  assert.deepEqual(v.rows.map((k) => lines[k].text), ['log line', ' 20%|##', ' 30%|###']);
});

test('pieces of a line are joined in front of the record that ends it', () => {
  const lines = [rec('epoch 1: ', { partial: true, stream: 'stdout' }), rec('other', { stream: 'stderr' }), rec('done', { stream: 'stdout' })];
  const v = terminalPage(lines, null);
  assert.deepEqual(v.rows, [1, 2]);
  assert.equal(v.texts.get(2), 'epoch 1: done');
});

test('a page’s last redraw is hidden once the next page continues it, and pieces carry over', () => {
  const a = [rec('x', { stream: 'stdout' }), rec(' 90%', { cr: true }), rec('loss=', { partial: true, stream: 'stdout' })];
  const b = [rec('100%'), rec('0.5', { stream: 'stdout' })];
  assert.deepEqual(terminalPage(a, null).rows, [0, 1, 2], 'next page unknown: all shown');
  const va = terminalPage(a, b);
  assert.deepEqual(va.rows, [0]);
  assert.deepEqual([...va.carryOut], [['0:-1:stdout', 'loss=']]);
  const vb = terminalPage(b, null, va.carryOut);
  assert.equal(vb.texts.get(1), 'loss=0.5');
});

test('TermIndex maps rows to lines across loaded and missing pages', () => {
  const page = 4;
  const all: TermLine[] = [];
  for (let i = 0; i < 12; i++) all.push({ line: i + 1, node: 0, local_rank: -1, stream: 'stderr', text: 't' + i, cr: i >= 4 && i < 7 });
  const pages = new Map<number, TermLine[]>([[0, all.slice(0, 4)], [1, all.slice(4, 8)]]);
  const ix = new TermIndex(page);
  ix.update(12, (p) => pages.get(p));
  // Page 1: lines 5..8, 5-7 are redraws ended by 8: one row. Page 2 not loaded: 4 rows.
  assert.equal(ix.rows, 4 + 1 + 4);
  assert.deepEqual(ix.at(4), { page: 1, offset: 3, text: undefined });
  assert.deepEqual(ix.at(5), { page: 2, offset: 0 });
  assert.equal(ix.rowOf(6), 4, 'a hidden line maps to the row that replaced it');
  assert.equal(ix.rowOf(9), 5);
  pages.delete(1);
  ix.update(12, (p) => pages.get(p), [1]);
  assert.equal(ix.rows, 12);
});

test('a piece followed by a redraw of the same bar is drawn over, not joined', () => {
  const lines = [rec('epoch 2:  10%|#   ', { partial: true }), rec('epoch 2:  20%|##  ', { cr: true }), rec('epoch 2: 100%|####')];
  const v = terminalPage(lines, null);
  assert.deepEqual(v.rows, [2]);
  assert.equal(v.texts.get(2) ?? lines[2].text, 'epoch 2: 100%|####');
  assert.equal(joinPiece('waiting... ', 'ready'), 'waiting... ready');
  assert.equal(joinPiece('step 10 loss=0.5123', 'step 11'), 'step 11 loss=0.5123', 'a shorter redraw leaves the rest, as a terminal does');
});
