import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ansiToHtml, escapeHtml, nearest256, parseAnsi, resetSGR, stripAnsi } from '../../src/lib/ansi';

test('plain text is escaped and left unstyled', () => {
  assert.equal(ansiToHtml('a < b && c > "d" \'e\''), 'a &lt; b &amp;&amp; c &gt; &quot;d&quot; &#39;e&#39;');
});

test('HTML and script in a log line never survive as markup', () => {
  const html = ansiToHtml('<script>alert(1)</script><img src=x onerror=alert(2)>');
  assert.doesNotMatch(html, /<script|<img/);
  assert.equal(html, '&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=alert(2)&gt;');
});

test('escape sequences cannot smuggle markup into class names', () => {
  const html = ansiToHtml('\x1b[31;"><script>m x');
  assert.doesNotMatch(html, /<script/);
});

test('SGR colours and attributes become classes', () => {
  assert.equal(ansiToHtml('\x1b[31mred\x1b[0m plain'), '<span class="f1">red</span> plain');
  assert.equal(ansiToHtml('\x1b[1;32mok\x1b[22m'), '<span class="f10 ab">ok</span>');
  assert.equal(ansiToHtml('\x1b[4;44mx'), '<span class="b4 au">x</span>');
  assert.equal(ansiToHtml('\x1b[38;5;208mo'), '<span class="f208">o</span>');
  assert.equal(ansiToHtml('\x1b[38;2;255;0;0mr'), '<span class="f196">r</span>');
  assert.equal(ansiToHtml('\x1b[93mbright'), '<span class="f11">bright</span>');
  assert.equal(ansiToHtml('\x1b[mreset'), 'reset');
});

test('other escape sequences and control characters are dropped', () => {
  assert.equal(stripAnsi('\x1b[2K\x1b[1Gprogress 50%\r'), 'progress 50%');
  assert.equal(stripAnsi('\x1b]8;;http://x\x07link\x1b]8;;\x07'), 'link');
  assert.equal(stripAnsi('tab\tkept\x08\x00'), 'tab\tkept');
});

test('style carries over between lines when the state is passed on', () => {
  const st = resetSGR();
  parseAnsi('\x1b[35mstart', st);
  assert.equal(ansiToHtml('continued', st), '<span class="f5">continued</span>');
});

test('malformed 256-colour sequences are ignored', () => {
  assert.equal(ansiToHtml('\x1b[38;5mx'), 'x');
  assert.equal(escapeHtml('&'), '&amp;');
  assert.equal(nearest256(128, 128, 128), 244);
});
