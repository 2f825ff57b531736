// pass.js: the booking page's access pass. The waiting room stores the token
// in sessionStorage when the fan is admitted (the gateway's HttpOnly cookie
// works too); a hold's answer may carry a fresher one that lasts as long as
// the hold. Both the seat map loader and the booking flow send it, so it
// lives here, owned by book.js and handed to each.
//
// No DOM ids.

import { store } from './api.js';

export class Pass {
  constructor(event) {
    this.event = event;
    const saved = store.access.get(event);
    this.token = saved && saved.token ? saved.token : null;
    this.expiresAt = saved && saved.expiresAt ? saved.expiresAt : null;
  }

  // renew takes the fresher pass a hold answer may carry.
  renew(res) {
    const fresh = res.headers && res.headers.get('X-Waitroom-Access-Token');
    if (!fresh) return;
    this.token = fresh;
    this.expiresAt = res.headers.get('X-Waitroom-Access-Expires') || this.expiresAt;
    store.access.set(this.event, { token: this.token, expiresAt: this.expiresAt });
  }

  // forget drops the pass once the admission ended.
  forget() {
    store.access.clear(this.event);
  }
}
