// api.js: how the fan's pages talk to the gateway and remember things.
//
// - api(): one fetch wrapper for the JSON API of DESIGN.md. It never throws for
//   an HTTP status (callers switch on it); it throws NetworkError when the
//   request did not get an answer, so callers can back off and say
//   "reconnecting".
// - store: the ticket per event in localStorage (so a reload or a second tab
//   keeps the same place), the access token, hold and booking per event in
//   sessionStorage (one booking flow per tab; the HttpOnly cookies the gateway
//   sets cover other tabs).
// - Waiter: sleeps that a hidden tab does not stretch (see timer.js) and that
//   can be cut short, e.g. when the tab becomes visible again.
//
// No DOM ids of its own.

// EVENT_ID is the event id grammar of the config ([a-z0-9-]{1,64}).
export const EVENT_ID = /^[a-z0-9-]{1,64}$/;

// eventFromPath reads the event id from /e/{event} or /e/{event}/book, or
// returns null when the path names none.
export function eventFromPath(pathname) {
  const m = /^\/e\/([^/]+)(?:\/book)?\/?$/.exec(pathname);
  if (!m) return null;
  let id;
  try {
    id = decodeURIComponent(m[1]);
  } catch {
    return null;
  }
  return EVENT_ID.test(id) ? id : null;
}

// NetworkError means the request got no HTTP answer at all (offline, reset,
// DNS, a body cut half way).
export class NetworkError extends Error {
  constructor(message) {
    super(message);
    this.name = 'NetworkError';
  }
}

// api sends one request and returns {status, ok, data, headers}. data is the
// parsed JSON body, or {} when there is none (204) or it is not JSON (a proxy's
// HTML error page), so callers can read data.error without guarding.
export async function api(method, path, { body, headers = {}, token } = {}) {
  const h = { Accept: 'application/json', ...headers };
  if (body !== undefined) h['Content-Type'] = 'application/json';
  if (token) h.Authorization = `Bearer ${token}`;
  let res;
  let text = '';
  try {
    res = await fetch(path, {
      method,
      headers: h,
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: 'same-origin',
      cache: 'no-store',
    });
    if (res.status !== 204) text = await res.text();
  } catch (err) {
    throw new NetworkError(err && err.message ? err.message : 'network error');
  }
  let data = {};
  if (text) {
    try {
      const parsed = JSON.parse(text);
      if (parsed && typeof parsed === 'object') data = parsed;
    } catch {
      // Not JSON: keep {} and let the status speak.
    }
  }
  return { status: res.status, ok: res.ok, data, headers: res.headers };
}

// retryAfterMs reads Retry-After (seconds or an HTTP date) from a 429 or 503,
// defaulting to 5 s, kept between 1 s and 5 min, plus up to 20% jitter so that
// everyone told to wait the same time does not come back in the same instant.
export function retryAfterMs(res, fallbackMs = 5000) {
  let ms = fallbackMs;
  const v = res && res.headers ? res.headers.get('Retry-After') : null;
  if (v) {
    const secs = Number(v);
    if (Number.isFinite(secs)) ms = secs * 1000;
    else {
      const at = Date.parse(v);
      if (Number.isFinite(at)) ms = at - Date.now();
    }
  }
  ms = Math.min(Math.max(ms, 1000), 300000);
  return Math.round(ms * (1 + Math.random() * 0.2));
}

// backoffMs is the wait before retry number n (1, 2, …) after a network
// error: exponential from 1 s to 30 s, with "full jitter" on the upper half.
export function backoffMs(n) {
  const cap = Math.min(30000, 1000 * 2 ** Math.max(0, n - 1));
  return Math.round(cap / 2 + Math.random() * (cap / 2));
}

// serverSkewMs estimates server clock minus client clock from the Date
// header, so a countdown to a server expiry is right even on a phone whose
// clock is off. The header has whole seconds; +500 ms centres the error.
export function serverSkewMs(res) {
  const d = res && res.headers ? Date.parse(res.headers.get('Date') || '') : NaN;
  if (!Number.isFinite(d)) return 0;
  const skew = d + 500 - Date.now();
  // Below 2 s the header's own rounding dominates: trust the local clock.
  return Math.abs(skew) < 2000 ? 0 : skew;
}

// newKey returns a random idempotency key.
export function newKey() {
  if (globalThis.crypto && typeof crypto.randomUUID === 'function') return crypto.randomUUID();
  const b = new Uint8Array(16);
  crypto.getRandomValues(b);
  return Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
}

function readJSON(storage, key) {
  try {
    const v = storage.getItem(key);
    return v ? JSON.parse(v) : null;
  } catch {
    return null; // storage disabled, or a value we did not write
  }
}

function writeJSON(storage, key, value) {
  try {
    if (value == null) storage.removeItem(key);
    else storage.setItem(key, JSON.stringify(value));
  } catch {
    // Private mode or full: the page still works, it just forgets on reload.
  }
}

function local() {
  try {
    return window.localStorage;
  } catch {
    return null;
  }
}

function session() {
  try {
    return window.sessionStorage;
  } catch {
    return null;
  }
}

function slot(kind, storageFn) {
  return {
    get(event) {
      const s = storageFn();
      return s ? readJSON(s, `waitroom:${kind}:${event}`) : null;
    },
    set(event, value) {
      const s = storageFn();
      if (s) writeJSON(s, `waitroom:${kind}:${event}`, value);
    },
    clear(event) {
      const s = storageFn();
      if (s) writeJSON(s, `waitroom:${kind}:${event}`, null);
    },
  };
}

// store keeps per-event state. ticket: {ticket, start} where start is the
// position at join (the progress bar's zero). access: {token, expiresAt}.
// hold: the hold answer plus showtimeId and its idempotency key. booking:
// {bookingId, showtimeId}.
export const store = {
  ticket: slot('ticket', local),
  access: slot('access', session),
  hold: slot('hold', session),
  booking: slot('booking', session),
};

// Waiter sleeps on a worker's timers when it can. Chrome throttles chained
// timers of a tab hidden for five minutes to once a minute, which would make
// a fan in a background tab miss polls and be dropped as abandoned; timers in
// a dedicated worker are not throttled that way.
export class Waiter {
  constructor() {
    this.seq = 0;
    this.pending = new Map();
    this.worker = null;
    try {
      this.worker = new Worker('/static/timer.js');
      this.worker.onmessage = (e) => this.fire(e.data);
      this.worker.onerror = () => {
        this.worker = null;
      };
    } catch {
      this.worker = null;
    }
  }

  fire(id) {
    const p = this.pending.get(id);
    if (!p) return;
    this.pending.delete(id);
    clearTimeout(p.fallback);
    p.resolve();
  }

  // sleep resolves after ms, or earlier on wake().
  sleep(ms) {
    const id = ++this.seq;
    return new Promise((resolve) => {
      // The page timer stays as a safety net in case the worker is gone; when
      // both fire, the first wins and the second finds nothing pending.
      const fallback = setTimeout(() => this.fire(id), ms + 250);
      this.pending.set(id, { resolve, fallback });
      if (this.worker) this.worker.postMessage({ id, ms });
    });
  }

  // wake ends every pending sleep now.
  wake() {
    for (const id of [...this.pending.keys()]) this.fire(id);
  }
}
