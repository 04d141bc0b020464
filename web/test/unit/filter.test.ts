import assert from 'node:assert/strict';
import { test } from 'node:test';
import { errorOffset, markError, quoteKey, tokenizeFilter } from '../../src/lib/filter';
import { loadConfig } from '../../src/config';

test('tokens cover the filter and are classified', () => {
  const f = "metrics.loss < 0.5 AND params.`learning rate` = '3e-4' AND tags.x IS NOT NULL";
  const toks = tokenizeFilter(f);
  assert.equal(toks.map((t) => t.text).join(''), f);
  const kinds = toks.filter((t) => t.kind !== 'space').map((t) => t.kind + ':' + t.text);
  assert.deepEqual(kinds.slice(0, 5), ['key:metrics.loss', 'op:<', 'number:0.5', 'keyword:AND', 'key:params.']);
  assert.ok(kinds.includes('key:`learning rate`'));
  assert.ok(kinds.includes("string:'3e-4'"));
  assert.ok(kinds.includes('keyword:NULL'));
});

test('an unterminated string runs to the end', () => {
  const toks = tokenizeFilter("params.a = 'abc");
  assert.equal(toks.at(-1)!.kind, 'string');
  assert.equal(toks.at(-1)!.text, "'abc");
});

test('the server error position maps to an offset, counting characters not UTF-16 units', () => {
  const f = "tags.x = '🙂' AND metrics.loss <";
  const msg = `invalid filter "tags.x = '🙂' AND metrics.loss <": expected a value at position ${[...f].length + 1}`;
  assert.equal(errorOffset(msg, f), f.length);
  assert.equal(errorOffset('invalid filter "a at position 99": x at position 3', 'abcdef'), 2);
  assert.equal(errorOffset('no position here', 'abc'), -1);
});

test('markError isolates the character at the offset', () => {
  const toks = tokenizeFilter('metrics.loss <> 1');
  const { tokens, index } = markError(toks, 14);
  assert.equal(tokens[index].text, '>');
  assert.equal(tokens.map((t) => t.text).join(''), 'metrics.loss <> 1');
  const end = markError(toks, 17);
  assert.equal(end.index, end.tokens.length);
});

test('keys that need quoting are quoted with backticks', () => {
  assert.equal(quoteKey('loss'), 'loss');
  assert.equal(quoteKey('train/loss'), '`train/loss`');
  assert.equal(quoteKey('val loss'), '`val loss`');
});

test('timings are injectable from the query string and a global object', () => {
  const c = loadConfig('?gpu_poll_ms=200&gpu_idle_ms=oops', { gpuIdleMs: 3000, runPollMs: -1 });
  assert.equal(c.gpuPollMs, 200);
  assert.equal(c.gpuIdleMs, 3000);
  assert.equal(c.runPollMs, 10000);
  assert.equal(c.gpuHistoryMs, 7_200_000);
});
