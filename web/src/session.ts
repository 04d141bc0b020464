// Who is signed in, and whether the server is multi-user.

import type { User } from './api';

export const session: { user: User | null; multiUser: boolean } = { user: null, multiUser: false };
