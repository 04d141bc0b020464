// The web UI's entry point: the page shell (top bar), the routes, and the
// sign-in check.

import 'uplot/dist/uPlot.min.css';
import './style.css';
import './ansi.css';
import { ApiError, logout, setOnUnauthenticated, whoami } from './api';
import { h, link } from './dom';
import { compareRunsPage } from './pages/compare';
import { experimentPage } from './pages/experiment';
import { gpuPage } from './pages/gpu';
import { nodePage } from './pages/node';
import { loginPage } from './pages/login';
import { loggedModelPage, loggedModelsPage, modelPage, modelsPage, modelVersionPage } from './pages/models';
import { runPage } from './pages/run';
import { volumesPage } from './pages/volumes';
import { workspacePage } from './pages/workspace';
import { navigate, render, route, start } from './router';
import { session } from './session';

const nav = h('nav', { class: 'topnav' });
const userBox = h('div', { class: 'user' });
const main = h('main', { id: 'main' });
const app = document.getElementById('app')!;

function shell(): void {
  const links: [string, string][] = [
    ['/', 'Workspace'],
    ['/models', 'Models'],
    ['/gpu', 'GPUs'],
    ['/volumes', 'Volumes'],
  ];
  nav.replaceChildren(...links.map(([href, label]) => link(href, label)));
  app.replaceChildren(h('header', { class: 'topbar' }, link('/', h('span', { class: 'logo' }, h('span', { class: 'logo-mark' }), 'Sextant')), nav, userBox), main);
}

function showUser(): void {
  userBox.replaceChildren();
  if (!session.user) return;
  userBox.append(h('span', { class: 'muted' }, session.multiUser ? session.user.email : 'single-user mode'));
  if (session.multiUser) {
    userBox.append(
      h(
        'button',
        {
          class: 'link',
          onclick: async () => {
            await logout().catch(() => {});
            session.user = null;
            navigate('/login');
          },
        },
        'Sign out',
      ),
    );
  }
}

function markNav(path: string): void {
  for (const a of nav.querySelectorAll('a')) {
    const href = a.getAttribute('href')!;
    a.classList.toggle('active', href === '/' ? path === '/' || path.startsWith('/workspace') || path.startsWith('/experiments') || path.startsWith('/runs') || path.startsWith('/compare') : path.startsWith(href));
  }
}

route('/login', loginPage);
route('/', workspacePage);
route('/workspace/*', workspacePage);
route('/experiments/:id', experimentPage);
route('/experiments/:exp/models', loggedModelsPage);
route('/experiments/:exp/models/:model', loggedModelPage);
route('/runs/:id', runPage);
route('/compare', compareRunsPage);
route('/models', modelsPage);
route('/models/:name', modelPage);
route('/models/:name/versions/:version', modelVersionPage);
route('/gpu', gpuPage);
route('/gpu/node/:name', nodePage);
route('/volumes', volumesPage);
route('/volumes/*', volumesPage);

async function boot(): Promise<void> {
  shell();
  setOnUnauthenticated(() => {
    if (location.pathname !== '/login') navigate('/login?next=' + encodeURIComponent(location.pathname + location.search), true);
  });
  try {
    const who = await whoami();
    session.user = who.user;
    session.multiUser = who.multi_user;
  } catch (e) {
    if (!(e instanceof ApiError && e.status === 401)) {
      main.replaceChildren(h('div', { class: 'error' }, 'Cannot reach the server: ' + (e as Error).message));
      return;
    }
  }
  showUser();
  start(
    main,
    () => h('div', { class: 'page' }, h('h1', null, 'Not found'), h('p', null, 'No page here. '), link('/', 'Go to the workspace')),
    (path) => {
      markNav(path);
      showUser();
    },
  );
  if (!session.user && location.pathname !== '/login') navigate('/login?next=' + encodeURIComponent(location.pathname + location.search), true);
}

export function rerender(): void {
  render();
}

void boot();
