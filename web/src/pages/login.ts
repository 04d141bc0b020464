// The sign-in page (multi-user servers).

import { login, whoami } from '../api';
import { h, Scope } from '../dom';
import { navigate } from '../router';
import { session } from '../session';

export function loginPage(_p: Record<string, string>, q: URLSearchParams, _s: Scope): HTMLElement {
  const email = h('input', { type: 'email', name: 'email', autocomplete: 'username', required: true, placeholder: 'you@example.com' });
  const password = h('input', { type: 'password', name: 'password', autocomplete: 'current-password', required: true });
  const err = h('div', { class: 'error-text', role: 'alert' });
  const next = q.get('next');
  const target = next && next.startsWith('/') && !next.startsWith('//') ? next : '/';
  const form = h(
    'form',
    {
      class: 'login',
      onsubmit: async (e: Event) => {
        e.preventDefault();
        err.textContent = '';
        try {
          const r = await login(email.value, password.value);
          session.user = r.user;
          session.multiUser = true;
          navigate(target, true);
        } catch (ex: any) {
          err.textContent = ex.message;
        }
      },
    },
    h('h1', null, 'Sign in to Sextant'),
    h('label', null, 'Email', email),
    h('label', null, 'Password', password),
    err,
    h('button', { type: 'submit', class: 'primary' }, 'Sign in'),
  );
  // Single-user servers need no sign-in.
  void whoami()
    .then((w) => {
      if (!w.multi_user) {
        session.user = w.user;
        navigate(target, true);
      }
    })
    .catch(() => {});
  return h('div', { class: 'page login-page' }, form);
}
