import assert from 'node:assert/strict';
import { test } from 'node:test';
import { folderCrumbs, folderHref } from '../../src/lib/wspath';

test('an experiment path leads through each of its folders from the root', () => {
  assert.deepEqual(folderCrumbs('/Users/alice@example.com/mnist'), [
    { label: 'Workspace', href: '/' },
    { label: 'Users', href: '/workspace/Users' },
    { label: 'alice@example.com', href: '/workspace/Users/alice%40example.com' },
  ]);
});

test('a name that is not a path lives at the root', () => {
  assert.deepEqual(folderCrumbs('Default'), [{ label: 'Workspace', href: '/' }]);
});

test('a folder trail includes the folder itself', () => {
  assert.deepEqual(
    folderCrumbs('/Shared/a b', true).map((c) => c.href),
    ['/', '/workspace/Shared', '/workspace/Shared/a%20b'],
  );
  assert.equal(folderHref('/'), '/');
});
