// api.js: how the fan's pages talk to the gateway and remember things.
//
// - api(), NetworkError, retryAfterMs, backoffMs, Waiter: the room's SDK's
//   (/sdk/waitroom.js), which the waiting room is written on: one fetch
//   wrapper for the JSON API of DESIGN.md that never throws for an HTTP
//   status and throws NetworkError when the request got no answer, the
//   waits the room asks for, and sleeps that a hidden tab does not stretch.
// - store: the access token, hold and booking per event in sessionStorage
//   (one booking flow per tab; the HttpOnly cookies the gateway sets cover
//   other tabs). The ticket is the SDK's to keep.
//
// No DOM ids of its own.

export { request as api, NetworkError, retryAfterMs, backoffMs, Waiter } from '/sdk/waitroom.js';

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

// store keeps per-event state. access: {token, expiresAt}. hold: the hold
// answer plus showtimeId and its idempotency key. booking: {bookingId,
// showtimeId}.
export const store = {
  access: slot('access', session),
  hold: slot('hold', session),
  booking: slot('booking', session),
};
