// The GPUs page: the GPU pane for every node.

import { gpuPane } from '../components/gpupane';
import { h, Scope } from '../dom';

export function gpuPage(_p: Record<string, string>, q: URLSearchParams, scope: Scope): HTMLElement {
  document.title = 'GPUs · Sextant';
  return h('div', { class: 'page gpu' }, gpuPane({ node: q.get('node') ?? undefined }, scope));
}
