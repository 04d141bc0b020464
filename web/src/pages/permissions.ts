// The permissions dialog for a folder or an experiment.

import { getPermissions, Grant, setPermission } from '../api';
import { errorBox, h, modal } from '../dom';

const LEVELS = ['CAN_READ', 'CAN_EDIT', 'CAN_MANAGE'];

export function permissionsDialog(resource: string, title: string): void {
  const body = h('div', { class: 'perms' });
  const principal = h('input', { type: 'text', placeholder: 'user email or group', 'aria-label': 'Principal' });
  const level = h('select', { 'aria-label': 'Level' }, LEVELS.map((l) => h('option', { value: l }, l)));
  const err = h('div', { class: 'error-text' });

  const levelSelect = (g: Grant) => {
    const sel = h('select', { 'aria-label': 'Level for ' + g.principal }, [...LEVELS, 'NO_PERMISSIONS'].map((l) => h('option', { value: l, selected: l === g.level }, l === 'NO_PERMISSIONS' ? 'remove' : l)));
    sel.addEventListener('change', () => apply(g.principal, sel.value));
    return sel;
  };

  const load = async () => {
    try {
      const grants = await getPermissions(resource);
      body.replaceChildren(
        grants.length
          ? h(
              'table',
              { class: 'grid' },
              h('thead', null, h('tr', null, h('th', null, 'Who'), h('th', null, 'Level'))),
              h('tbody', null, grants.map((g) => h('tr', null, h('td', null, g.principal), h('td', null, levelSelect(g))))),
            )
          : h('p', { class: 'empty' }, 'No direct grants; permissions are inherited from the folder above.'),
      );
    } catch (e) {
      body.replaceChildren(errorBox(e));
    }
  };
  const apply = async (who: string, lvl: string) => {
    err.textContent = '';
    try {
      await setPermission(resource, who, lvl);
      await load();
    } catch (e: any) {
      err.textContent = e.message;
    }
  };
  modal(
    'Permissions: ' + title,
    h(
      'div',
      null,
      body,
      h(
        'form',
        {
          class: 'inline-form',
          onsubmit: (e: Event) => {
            e.preventDefault();
            if (principal.value.trim()) void apply(principal.value.trim(), level.value).then(() => (principal.value = ''));
          },
        },
        principal,
        level,
        h('button', { type: 'submit', class: 'primary' }, 'Grant'),
      ),
      err,
    ),
  );
  void load();
}
