// waitroom.js: the room's SDK (DESIGN.md, "Integrations"), one ES module
// with no dependencies and no build step, served by the gateway at
// /sdk/waitroom.js (its types: /sdk/waitroom.d.ts, and docs/SDK.md). An app
// (a single-page app, a hybrid app's web view, a script under Node 18 or
// later) takes a place in an event's line with it, and the room's own
// waiting page is written on it.
//
// new Waitroom({event, …}) is one fan's place in the line of one event, as a
// state machine that never touches a DOM. join() takes a place (or resumes
// the one its storage keeps); a sale that asks a proof of work answers 428
// with a challenge, which is worked out (in Web Workers in a browser, in
// short slices of this thread elsewhere) and the join sent again with the
// proof. Then it polls the ticket no faster than the room's pollAfterMs
// until the fan is admitted (the pass), the place ended, or there is
// nothing to do. 429 and 503 wait their Retry-After; no answer backs off;
// neither ever forgets the place. Every change is published as a frozen
// snapshot, with the change that made it:
//
//   idle ─join─▶ joining ─428─▶ checking ─proved─▶ (joins again) ─▶ …
//                   │              └─no-worker─▶ no-worker (nothing here can pay it)
//                   ├─403 not open─▶ not-open ─(at opensAt)─▶ joins again
//                   ├─200/201─▶ waiting ⇄ next ─admitted─▶ admitted
//                   ├─409─▶ closed | soldout
//                   ├─401/403/409 (account, invitation, code)─▶ refused: stops where it was
//                   └─404─▶ unknown-event;  a refused join with no ticket kept ─▶ error
//   waiting, next ─410─▶ expired | closed; ─soldout─▶ soldout; ─leave─▶ left
//   waiting, next ─(no ticket kept any more: left in another tab)─▶ left
//   waiting, next ─away (202)─▶ away: kept by the room without polls
//   any ─stop─▶ stays as it was, nothing more asked
//   left, expired, closed ─rejoin─▶ joining
//
// Changes (snapshot.change), besides a status's own name (not-open,
// waiting, admitted, away, left, expired, closed, soldout, no-worker):
//   joining  join() was called; rejoin: rejoin() was (the old place forgotten)
//   info     the event's facts came (GET /api/v1/events/{event}; info null:
//            there is no such event)
//   trying   a request goes out: the first, or the first after one that got
//            no answer
//   checking the proof of work is being paid; proved: paid
//   busy     429: the next try in next.inMs (next.action join or poll)
//   refused  nothing to retry until the fan does something; notice says
//            why, in the room's words: account_required, invalid_account,
//            not_invited, invitation_used, window_not_open, code_required,
//            invalid_code, code_used; or, from away(), no_email and the rest of its refusals
//            (the place is then followed as before)
//   forget   the ticket kept here was refused (400): joins afresh
//   offline  no answer, or 5xx (the room's Redis away: 503): retries in
//            next.inMs (Retry-After when the room said it); the place is kept
//   back     an answer again after failures
//   error    nothing to do here: status unknown-event or error
//   stopped  stop() was called
//
// The ticket is kept in storage (localStorage in a browser, memory
// elsewhere) under waitroom:ticket:<event> as {ticket, start}, and sent back
// as X-Waitroom-Ticket, so a reload, a second tab or a restarted script
// keeps the same place; in a browser the room's cookies do the same.
//
// The same file is the SDK's dedicated worker: started as a module worker
// named WORKER (by Waiter and solveProof), it keeps time and searches
// proofs; imported anywhere else it only exports. One file to serve or to
// copy, and the worker is on the page's own origin, which a CSP of
// script-src 'self' allows as it is.
//
// Exports: Waitroom, solveProof, and the helpers an app's own calls to the
// room use the same way (request, NetworkError, retryAfterMs, backoffMs,
// Waiter): the room's pages are written on them.

// The worker's name: what tells this file, loaded in a worker, that it is
// the SDK's own.
const WORKER = 'waitroom-sdk';
// Polls are never sooner than the room says, nor than this (a bad value
// must not spin a phone).
const MIN_POLL_MS = 500;
// The event itself (state, opensAt) changes rarely: refresh it at most this
// often, and never more often than every few polls, so a long line does not
// double the room's load.
const EVENT_REFRESH_MS = 30000;
// Proof workers: one per core, up to this many.
const MAX_WORKERS = 4;
// Tries of one slice of a search in this thread, between which the event
// loop runs (a few milliseconds each).
const SLICE = 20000;

// ---------------------------------------------------------------------------
// Talking to the room

// NetworkError means a request got no HTTP answer at all (offline, reset,
// DNS, a body cut half way), or one that says the room is unavailable
// (5xx); retryInMs is the wait the room asked for (Retry-After), or 0.
export class NetworkError extends Error {
  constructor(message, retryInMs = 0) {
    super(message);
    this.name = 'NetworkError';
    this.retryInMs = retryInMs;
  }
}

// request sends one request to the room and returns {status, ok, data,
// headers}. data is the parsed JSON body, or {} when there is none (204) or
// it is not JSON (a proxy's HTML error page), so callers can read data.error
// without guarding. It never throws for an HTTP status (callers switch on
// it); it throws NetworkError when the request got no answer.
export async function request(method, path, { body, headers = {}, token, baseUrl = '', fetch: send = globalThis.fetch } = {}) {
  const h = { Accept: 'application/json', ...headers };
  if (body !== undefined) h['Content-Type'] = 'application/json';
  if (token) h.Authorization = `Bearer ${token}`;
  let res;
  let text = '';
  try {
    res = await send(baseUrl + path, {
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
// defaulting to fallbackMs, kept between 1 s and 5 min, plus up to 20%
// jitter so that everyone told to wait the same time does not come back in
// the same instant (never sooner than told).
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

// backoffMs is the wait before retry number n (1, 2, …) after a request that
// got no answer: exponential from 1 s to 30 s, with "full jitter" on the
// upper half.
export function backoffMs(n) {
  const cap = Math.min(30000, 1000 * 2 ** Math.max(0, n - 1));
  return Math.round(cap / 2 + Math.random() * (cap / 2));
}

// unavailable is the error of an answer the line cannot use (5xx, or a
// status the contract does not give): retried like no answer, after the
// room's Retry-After when it gave one.
function unavailable(r) {
  return new NetworkError(`HTTP ${r.status}`, r.headers && r.headers.get('Retry-After') ? retryAfterMs(r) : 0);
}

// ---------------------------------------------------------------------------
// Time

// startWorker starts this file as the SDK's module worker, or returns null
// where there are no workers (Node) or this one cannot start.
function startWorker() {
  if (typeof Worker !== 'function') return null;
  try {
    return new Worker(import.meta.url, { type: 'module', name: WORKER });
  } catch {
    return null;
  }
}

// Waiter sleeps on a worker's timers when it can. Chrome throttles chained
// timers of a tab hidden for five minutes to once a minute, which would make
// a fan in a background tab miss polls and be dropped as abandoned; timers in
// a dedicated worker are not throttled that way. Elsewhere (Node) it sleeps
// on setTimeout.
export class Waiter {
  #seq = 0;
  #pending = new Map();
  #worker = null;

  constructor() {
    this.#worker = startWorker();
    if (this.#worker) {
      this.#worker.onmessage = (e) => this.#fire(e.data);
      this.#worker.onerror = (e) => {
        if (e && typeof e.preventDefault === 'function') e.preventDefault();
        this.#worker = null;
      };
    }
  }

  #fire(id) {
    const p = this.#pending.get(id);
    if (!p) return;
    this.#pending.delete(id);
    clearTimeout(p.fallback);
    p.resolve();
  }

  // sleep resolves after ms, or earlier on wake().
  sleep(ms) {
    const id = ++this.#seq;
    return new Promise((resolve) => {
      // With a worker, the page's timer stays as a safety net in case the
      // worker is gone; when both fire, the first wins and the second finds
      // nothing pending.
      const fallback = setTimeout(() => this.#fire(id), this.#worker ? ms + 250 : ms);
      this.#pending.set(id, { resolve, fallback });
      if (this.#worker) this.#worker.postMessage({ timer: id, ms });
    });
  }

  // wake ends every pending sleep now.
  wake() {
    for (const id of [...this.#pending.keys()]) this.#fire(id);
  }
}

// ---------------------------------------------------------------------------
// Proof of work (DESIGN.md, "Proof of work at join")
//
// A nonce, decimal digits, such that SHA-256(challenge ":" nonce) begins
// with `bits` zero bits. SHA-256 is written out here rather than taken from
// crypto.subtle.digest: that one is a promise per hash, and a search makes
// hundreds of thousands of them; a plain loop over the compression function
// is many times faster in every browser measured (docs/OPERATIONS.md,
// "Choosing the difficulty"). The room's challenges are 63 characters, so
// challenge ":" is exactly one 64-byte block: it is compressed once, and
// each try costs a single compression of the block holding the nonce. Any
// other length works too, at one or two compressions a try.

const K = new Int32Array([
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
  0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
  0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
  0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
  0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
  0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
  0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
  0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
]);
const IV = [0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19];
const MAX_DIGITS = 20; // what the room accepts
const CHALLENGE = /^[A-Za-z0-9_-]{1,200}$/;

// compress runs one SHA-256 compression of the 16 words in W[0..15] (W has
// 64) over state H (8 words) and writes the result to out (which may be H).
function compress(W, H, out) {
  for (let i = 16; i < 64; i++) {
    const x = W[i - 15];
    const y = W[i - 2];
    const s0 = ((x >>> 7) | (x << 25)) ^ ((x >>> 18) | (x << 14)) ^ (x >>> 3);
    const s1 = ((y >>> 17) | (y << 15)) ^ ((y >>> 19) | (y << 13)) ^ (y >>> 10);
    W[i] = (W[i - 16] + s0 + W[i - 7] + s1) | 0;
  }
  let a = H[0];
  let b = H[1];
  let c = H[2];
  let d = H[3];
  let e = H[4];
  let f = H[5];
  let g = H[6];
  let h = H[7];
  for (let i = 0; i < 64; i++) {
    const S1 = ((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7));
    const t1 = (h + S1 + ((e & f) ^ (~e & g)) + K[i] + W[i]) | 0;
    const S0 = ((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10));
    const t2 = (S0 + ((a & b) ^ (a & c) ^ (b & c))) | 0;
    h = g;
    g = f;
    f = e;
    e = (d + t1) | 0;
    d = c;
    c = b;
    b = a;
    a = (t1 + t2) | 0;
  }
  out[0] = (H[0] + a) | 0;
  out[1] = (H[1] + b) | 0;
  out[2] = (H[2] + c) | 0;
  out[3] = (H[3] + d) | 0;
  out[4] = (H[4] + e) | 0;
  out[5] = (H[5] + f) | 0;
  out[6] = (H[6] + g) | 0;
  out[7] = (H[7] + h) | 0;
}

// load puts the 64 bytes of buf at off into W[0..15], big-endian.
function load(W, buf, off) {
  for (let i = 0; i < 16; i++) {
    const j = off + 4 * i;
    W[i] = (buf[j] << 24) | (buf[j + 1] << 16) | (buf[j + 2] << 8) | buf[j + 3];
  }
}

// searcher returns a search of the nonces start, start + step, … (so that
// several workers can share one): its run(limit) tries at most limit more
// of them and returns {found, tries} for the first that solves the
// challenge, {error} when none can, or null to be called again. Each
// search has its own words, so searches in one thread may interleave.
function searcher(challenge, bits, start, step) {
  const W = new Int32Array(64);
  const prefix = new TextEncoder().encode(`${challenge}:`);
  // The prefix's whole blocks, compressed once.
  const mid = Int32Array.from(IV);
  const whole = prefix.length - (prefix.length % 64);
  for (let off = 0; off < whole; off += 64) {
    load(W, prefix, off);
    compress(W, mid, mid);
  }
  const rest = prefix.length - whole;
  const tail = new Uint8Array(128);
  tail.set(prefix.subarray(whole));
  const out = new Int32Array(8);
  const state = new Int32Array(8);
  // The nonce as ASCII digits, counted up in place.
  const digits = Array.from(String(start), (ch) => ch.charCodeAt(0));
  const shift = 32 - bits; // bits is 1..28: the answer is in the first word
  let tries = 0;
  let blocks = 0;
  let from = 0; // the first digit that changed since the last try
  return {
    run(limit) {
      for (let left = limit; left > 0; left--) {
        const n = digits.length;
        const end = rest + n;
        for (let i = from; i < n; i++) tail[rest + i] = digits[i];
        if (blocks === 0) {
          // A new length: padding and bit length move; every word is new.
          blocks = end + 9 <= 64 ? 1 : 2;
          const size = 64 * blocks;
          tail[end] = 0x80;
          tail.fill(0, end + 1, size - 4);
          const bitLen = (prefix.length + n) * 8; // < 2^32 for any message here
          tail[size - 4] = bitLen >>> 24;
          tail[size - 3] = (bitLen >>> 16) & 0xff;
          tail[size - 2] = (bitLen >>> 8) & 0xff;
          tail[size - 1] = bitLen & 0xff;
          from = 0;
          load(W, tail, 0);
        } else if (blocks === 1) {
          // compress leaves W[0..15] alone: reload only the words whose
          // digits changed (usually the last digit's alone).
          for (let w = (rest + from) >> 2; w <= (end - 1) >> 2; w++) {
            const j = 4 * w;
            W[w] = (tail[j] << 24) | (tail[j + 1] << 16) | (tail[j + 2] << 8) | tail[j + 3];
          }
        } else {
          load(W, tail, 0);
        }
        if (blocks === 1) {
          compress(W, mid, out);
        } else {
          compress(W, mid, state);
          load(W, tail, 64);
          compress(W, state, out);
        }
        tries += 1;
        if (out[0] >>> shift === 0) return { found: String.fromCharCode(...digits), tries };
        // digits += step
        let carry = step;
        let i = n - 1;
        for (; i >= 0 && carry > 0; i--) {
          const v = digits[i] - 48 + carry;
          digits[i] = 48 + (v % 10);
          carry = (v / 10) | 0;
        }
        from = i + 1;
        if (carry > 0) {
          digits.unshift(...Array.from(String(carry), (ch) => ch.charCodeAt(0)));
          if (digits.length > MAX_DIGITS) return { error: 'no nonce found' };
          blocks = 0;
        }
      }
      return null;
    },
  };
}

function proofError(message) {
  const err = new Error(message);
  err.name = 'ProofError';
  return err;
}

// solveProof pays a 428's challenge: it resolves to {nonce, header, tries,
// ms}, header being the value of X-Waitroom-Proof. workers is how many Web
// Workers search it (each every k-th nonce; default one per core, at most
// four, where there are workers) or 0 to search in this thread, in slices
// between which the event loop runs (the default where there are none, as
// under Node). It rejects with an Error named ProofError when the search
// cannot run here or the challenge is not one.
export function solveProof(challenge, bits, { workers } = {}) {
  if (typeof challenge !== 'string' || !CHALLENGE.test(challenge) || !Number.isInteger(bits) || bits < 1 || bits > 28) {
    return Promise.reject(proofError('not a challenge'));
  }
  const started = performance.now();
  const done = (r) => {
    if (r.error) throw proofError(r.error);
    return { nonce: r.found, header: `${challenge}:${r.found}`, tries: r.tries, ms: performance.now() - started };
  };
  const cores = (typeof navigator !== 'undefined' && Number(navigator.hardwareConcurrency)) || 2;
  const k = workers ?? (typeof Worker === 'function' ? cores : 0);
  if (k <= 0) return inThread(challenge, bits).then(done);
  if (typeof Worker !== 'function') return Promise.reject(proofError('workers unavailable'));
  return inWorkers(challenge, bits, Math.min(k, MAX_WORKERS)).then(done);
}

// inThread searches in slices of this thread.
async function inThread(challenge, bits) {
  const s = searcher(challenge, bits, 0, 1);
  for (;;) {
    const r = s.run(SLICE);
    if (r) return r;
    await new Promise((resolve) => setTimeout(resolve, 0));
  }
}

// inWorkers searches in k workers, each trying every k-th nonce, so the
// page stays responsive and a phone uses the cores it has. About 2^bits
// tries in all, whichever worker finds it.
function inWorkers(challenge, bits, k) {
  return new Promise((resolve, reject) => {
    const pool = [];
    let finished = false;
    const finish = (fn, value) => {
      if (finished) return;
      finished = true;
      for (const w of pool) w.terminate();
      fn(value);
    };
    for (let i = 0; i < k; i++) {
      let w;
      try {
        w = new Worker(import.meta.url, { type: 'module', name: WORKER });
      } catch (err) {
        finish(reject, proofError(err && err.message ? err.message : 'worker refused'));
        return;
      }
      pool.push(w);
      w.onmessage = (e) => {
        const d = e.data || {};
        // The others were about as far along: count their tries as well.
        finish(resolve, d.found ? { found: d.found, tries: d.tries * k } : { error: d.error || 'worker failed' });
      };
      w.onerror = (e) => {
        if (e && typeof e.preventDefault === 'function') e.preventDefault();
        finish(reject, proofError((e && e.message) || 'worker failed'));
      };
      w.postMessage({ proof: { challenge, bits, start: i, step: k } });
    }
  });
}

// serve answers the page's messages when this file runs as the SDK's
// worker: {timer: id, ms} → id after ms; {proof: {challenge, bits, start,
// step}} → {found, tries} or {error}.
function serve(m) {
  if (m && typeof m.timer === 'number' && typeof m.ms === 'number') {
    setTimeout(() => postMessage(m.timer), Math.max(0, m.ms));
    return;
  }
  const { challenge, bits, start = 0, step = 1 } = (m && m.proof) || {};
  if (typeof challenge !== 'string' || !CHALLENGE.test(challenge) ||
      !Number.isInteger(bits) || bits < 1 || bits > 28 ||
      !Number.isInteger(start) || start < 0 || !Number.isInteger(step) || step < 1 || step > 9) {
    postMessage({ error: 'bad request' });
    return;
  }
  postMessage(searcher(challenge, bits, start, step).run(Infinity));
}

if (typeof DedicatedWorkerGlobalScope === 'function' && globalThis instanceof DedicatedWorkerGlobalScope && globalThis.name === WORKER) {
  globalThis.onmessage = (e) => serve(e.data);
}

// ---------------------------------------------------------------------------
// The line

function after(action, inMs = 0) {
  return Object.freeze({ action, inMs });
}

const JOIN_NOW = after('join');
const STOP = after('stop');

// The room's refusals of a join that only the fan can lift: a presale's
// account with no invitation (or one that bought with it already), a
// sale's code missing or wrong.
const REFUSALS = new Set(['not_invited', 'invitation_used', 'code_required', 'invalid_code']);

function pollDelay(ms) {
  // The room bounds pollAfterMs itself, and counts a place abandoned only
  // after the wait it told: any value it gives is safe to follow.
  return Number.isFinite(ms) ? Math.max(ms, MIN_POLL_MS) : 2000;
}

function optionValue(v) {
  return typeof v === 'function' ? v() : v;
}

// memoryStorage is a Web Storage of this process only.
function memoryStorage() {
  const m = new Map();
  return {
    getItem: (k) => (m.has(k) ? m.get(k) : null),
    setItem: (k, v) => m.set(k, String(v)),
    removeItem: (k) => m.delete(k),
  };
}

function defaultStorage() {
  try {
    if (globalThis.localStorage) return globalThis.localStorage;
  } catch {
    // Storage turned off: a SecurityError on mere access.
  }
  return memoryStorage();
}

// Waitroom is one fan's place in the line of one event (see the top of
// this file). Options: event (its id); baseUrl (the room's origin, '' = this
// page's); account (the origin site's account token, or a function that
// returns it: X-Waitroom-Account at join and away; in a browser the room's
// wr_u cookie does as well); code (an access code, or a function); returnTo
// (the way back to a site the event guards, carried by the join); storage (a
// Web Storage for the ticket; null: this object's memory); and what tests
// and unusual hosts replace: fetch, solve ((challenge, bits) → Promise of
// the nonce; null: nothing here can pay a proof), waiter ({sleep(ms), wake()}),
// now (the clock, ms).
export class Waitroom {
  // Private (the API is the methods below): what the constructor was
  // given, and the line's own state.
  #event;
  #enc;
  #baseUrl;
  #account;
  #code;
  #returnTo;
  #storage;
  #send;
  #solve;
  #waiter;
  #now;
  #key;
  #listeners;
  #run;
  #infoAt;
  #infoLoading;
  #lastEtaNull;
  #online;
  #startAt;
  #proofHeader;
  #s;
  #current;

  constructor({ event, baseUrl = '', account, code, returnTo = null, storage, fetch, solve, waiter, now = Date.now } = {}) {
    if (!baseUrl && !fetch && typeof location === 'undefined') {
      // Under Node a path alone reaches nothing: say so now, not as a line
      // that retries for ever.
      throw new TypeError('Waitroom: baseUrl (the room\'s origin) is needed outside a browser page');
    }
    this.#event = event || null;
    this.#enc = event ? encodeURIComponent(event) : '';
    this.#baseUrl = baseUrl.replace(/\/+$/, '');
    this.#account = account;
    this.#code = code;
    this.#returnTo = returnTo;
    this.#storage = storage === null ? memoryStorage() : storage || defaultStorage();
    this.#send = fetch;
    this.#solve = solve;
    this.#waiter = waiter || new Waiter();
    this.#now = now;
    this.#key = `waitroom:ticket:${event}`;
    this.#listeners = new Map();
    this.#run = 0; // bumped on leave, rejoin, stop: an old loop stops
    this.#infoAt = 0;
    this.#infoLoading = false;
    this.#lastEtaNull = null;
    this.#online = false; // whether the last request got an answer
    this.#startAt = NaN; // join({start}): the place a moved ticket started at
    this.#proofHeader = null; // X-Waitroom-Proof for the next join, once solved
    // The fan's state, published frozen by publish().
    this.#s = {
      status: 'idle',
      info: null,
      ticket: null,
      place: null,
      pass: null,
      updatedAt: 0,
      opensAt: null,
      error: null,
      failures: 0,
      proofRounds: 0,
      next: null,
    };
    this.#current = Object.freeze({ ...this.#s, event: this.#event, seq: 0, change: null, notice: null });
  }

  // snapshot is the state as last published.
  get snapshot() {
    return this.#current;
  }

  // ticket is the place's ticket: the one kept, or the last one answered.
  get ticket() {
    const kept = this.#kept();
    return (kept && kept.ticket) || this.#s.ticket;
  }

  // pass is {accessToken, expiresAt, returnUrl} once admitted, else null.
  get pass() {
    return this.#s.pass;
  }

  // on calls fn(snapshot, previous) on every change of that type ('change':
  // all of them), and returns the way to stop. A listener that throws does
  // not stop the line: its error is thrown again on its own.
  on(type, fn) {
    if (!this.#listeners.has(type)) this.#listeners.set(type, new Set());
    this.#listeners.get(type).add(fn);
    return () => this.#listeners.get(type).delete(fn);
  }

  #publish(change, notice = null) {
    const prev = this.#current;
    this.#current = Object.freeze({ ...this.#s, event: this.#event, seq: prev.seq + 1, change, notice });
    for (const type of ['change', change]) {
      for (const fn of [...(this.#listeners.get(type) || [])]) {
        try {
          fn(this.#current, prev);
        } catch (err) {
          setTimeout(() => {
            throw err;
          });
        }
      }
    }
  }

  // kept is what storage keeps for this event: {ticket, start} or null.
  #kept() {
    try {
      const v = this.#storage.getItem(this.#key);
      return v ? JSON.parse(v) : null;
    } catch {
      return null; // storage turned off, or a value we did not write
    }
  }

  #keep(value) {
    try {
      if (value == null) this.#storage.removeItem(this.#key);
      else this.#storage.setItem(this.#key, JSON.stringify(value));
    } catch {
      // Private mode or full: the line still works, it forgets on reload.
    }
  }

  // forget drops the ticket kept here without giving the place back (a
  // place moved to this device by the room's cookie must win over it).
  forget() {
    this.#keep(null);
  }

  // call is request() to this room.
  #call(method, path, options = {}) {
    return request(method, path, { ...options, baseUrl: this.#baseUrl, ...(this.#send ? { fetch: this.#send } : {}) });
  }

  // join takes a place in the line, or resumes the one kept, and follows
  // it; start is the place a ticket moved here started at (the progress's
  // zero). It resolves with the snapshot once there is nothing more to
  // follow (next.action stop): admitted, ended, refused, away or stopped.
  async join({ start } = {}) {
    const stopped = this.#stopped();
    this.#startAt = Number(start);
    if (!this.#event) {
      this.#fail('unknown-event');
      return stopped;
    }
    this.#s.status = 'joining';
    this.#publish('joining');
    await this.#loadInfo();
    if (!this.#s.info && this.#infoAt) {
      this.#fail('unknown-event');
      return stopped;
    }
    if (this.#s.info && this.#s.info.state === 'closed' && !this.#kept()) {
      // Nothing to join; joining again still asks the room, which decides.
      this.#end('closed');
      return stopped;
    }
    this.#go();
    return stopped;
  }

  // resume takes over a place from its ticket (kept by the app, or carried
  // by a link from another device) and follows it, as join does.
  resume(ticket, { start } = {}) {
    const kept = this.#kept();
    this.#keep({ ticket, start: kept && kept.ticket === ticket ? kept.start : Number(start) || null });
    return this.join({ start });
  }

  // rejoin asks for a new place (after leaving, expiry, close): the old
  // ticket is forgotten. It resolves as join does.
  rejoin() {
    const stopped = this.#stopped();
    this.forget();
    this.#s.status = 'joining';
    this.#go('rejoin');
    return stopped;
  }

  // stopped resolves with the first snapshot published from now on whose
  // next action is stop.
  #stopped() {
    return new Promise((resolve) => {
      const off = this.on('change', (s) => {
        if (s.next && s.next.action === 'stop') {
          off();
          resolve(s);
        }
      });
    });
  }

  // leave gives the place back (DELETE; unreachable, it lapses by itself
  // once nobody polls for it).
  async leave() {
    this.#run += 1; // stop the loop first, so no poll races the DELETE
    this.#waiter.wake();
    const gone = this.ticket;
    this.forget();
    this.#s.ticket = null;
    if (gone) {
      try {
        await this.#call('DELETE', `/api/v1/events/${this.#enc}/tickets/${encodeURIComponent(gone)}`);
      } catch {
        // Unreachable: the place lapses by itself once nobody polls for it.
      }
    }
    this.#end('left');
  }

  // away steps away (DESIGN.md, "Away from the page"): the room keeps the
  // place without polls and emails the account's address at its turn. It
  // resolves true once it does (202: status away, nothing more asked), false
  // when the room refused (a refused change says why, and the place is
  // followed as before), and throws NetworkError when there was no answer
  // (the place followed as before too).
  async away() {
    const ticket = this.ticket;
    const before = this.#s.next;
    const following = before && (before.action === 'poll' || before.action === 'join');
    // No poll while the room decides: a poll of an away place claims it.
    this.#run += 1;
    this.#waiter.wake();
    // resume follows the place again as it was (the whole wait again: never
    // sooner than told), after publishing change if given.
    const resume = (change, notice) => {
      this.#run += 1;
      if (change) this.#decide(change, following ? before : STOP, notice);
      if (following) this.#loop(this.#run, before);
    };
    if (!ticket) {
      resume('refused', 'no_ticket');
      return false;
    }
    const headers = {};
    const account = optionValue(this.#account);
    if (account) headers['X-Waitroom-Account'] = account;
    let r;
    try {
      r = await this.#call('POST', `/api/v1/events/${this.#enc}/tickets/${encodeURIComponent(ticket)}/away`, { headers });
    } catch (err) {
      resume();
      throw err;
    }
    if (r.status !== 202) {
      resume('refused', (r.data && r.data.error) || `http_${r.status}`);
      return false;
    }
    this.#s.status = 'away';
    this.#decide('away', STOP);
    return true;
  }

  // stop follows the place no more, and keeps it (a later join or resume
  // takes it up again, until the room drops it as abandoned).
  stop() {
    this.#run += 1;
    this.#waiter.wake();
    this.#decide('stopped', STOP);
  }

  // wake cuts the wait before the next request short (the app is in front
  // again, or back online).
  wake() {
    this.#waiter.wake();
  }

  // go starts a new loop (a join first), after publishing change if given.
  #go(change) {
    this.#run += 1;
    this.#s.place = null; // the first answer of a loop is news: "you're in line"
    this.#s.pass = null;
    this.#s.failures = 0;
    this.#s.next = JOIN_NOW;
    if (change) this.#publish(change);
    this.#waiter.wake();
    this.#loop(this.#run);
  }

  // loop follows the place until it is told to stop or another loop
  // starts, from next (a join at once, unless told otherwise).
  async #loop(mine, next = JOIN_NOW) {
    while (mine === this.#run) {
      if (next.inMs > 0) {
        await this.#waiter.sleep(next.inMs);
        if (mine !== this.#run) return;
      }
      try {
        if (!this.#online) {
          this.#online = true;
          this.#publish('trying');
        }
        next = next.action === 'join' ? await this.#joinOnce(mine) : await this.#poll(mine);
        if (this.#s.failures && mine === this.#run) {
          this.#s.failures = 0;
          this.#publish('back');
        }
      } catch (err) {
        if (mine !== this.#run) return;
        // Any failure here is treated like a lost connection: the place in
        // line is safe in the room, so the line only needs to come back.
        this.#s.failures += 1;
        next = after(next.action, err && err.retryInMs > 0 ? err.retryInMs : backoffMs(this.#s.failures));
        this.#s.next = next;
        this.#online = false;
        if (!(err instanceof NetworkError)) this.#s.error = String(err && err.message);
        this.#publish('offline');
      }
      if (next.action !== 'join' && next.action !== 'poll') return;
    }
  }

  // decide records what comes next, publishes change, and returns it.
  #decide(change, next, notice) {
    this.#s.next = next;
    this.#publish(change, notice);
    return next;
  }

  async #loadInfo() {
    if (this.#infoLoading) return;
    this.#infoLoading = true;
    try {
      const r = await this.#call('GET', `/api/v1/events/${this.#enc}`);
      if (r.ok || r.status === 404) {
        this.#s.info = r.ok ? Object.freeze({ ...r.data }) : null;
        this.#infoAt = this.#now();
        this.#publish('info');
      }
    } catch {
      // The poll loop reports connectivity; the event's facts stay as they were.
    } finally {
      this.#infoLoading = false;
    }
  }

  #maybeRefreshInfo(pollMs, etaNull) {
    const due = this.#now() - this.#infoAt > Math.max(EVENT_REFRESH_MS, 3 * pollMs);
    // An ETA turning null (or back) means paused/resumed or opened: worth a
    // look at once, which is what the fan wants explained.
    const flipped = this.#lastEtaNull !== null && etaNull !== this.#lastEtaNull && this.#now() - this.#infoAt > 3000;
    this.#lastEtaNull = etaNull;
    if (due || flipped) this.#loadInfo();
  }

  // waiting takes a waiting place's answer and returns the next poll.
  #waiting(d) {
    const saved = this.#kept();
    const pos = Number(d.position);
    const ahead = Number.isFinite(d.ahead) ? d.ahead : Math.max(0, pos - 1);
    // The progress runs from the fan's own place at join to the front. In
    // the pre-queue later joiners can be drawn ahead of us, so the place can
    // grow: then the start grows with it rather than showing going back.
    const ours = saved && saved.ticket === this.#s.ticket;
    let start = ours && Number.isFinite(saved.start) ? saved.start : pos;
    if (pos > start) {
      start = pos;
      if (ours) this.#keep({ ticket: this.#s.ticket, start });
    }
    this.#s.status = pos === 1 ? 'next' : 'waiting';
    this.#s.place = Object.freeze({
      position: pos,
      ahead,
      etaSeconds: Number.isFinite(d.etaSeconds) ? d.etaSeconds : null,
      // The places left, as the booking core last told the line (null
      // until it has).
      available: Number.isFinite(d.available) ? d.available : null,
      start,
    });
    this.#s.updatedAt = this.#now();
    const pollMs = pollDelay(d.pollAfterMs);
    const next = this.#decide('waiting', after('poll', pollMs));
    this.#maybeRefreshInfo(pollMs, d.etaSeconds == null);
    return next;
  }

  #admitted(d) {
    this.#s.status = 'admitted';
    this.#s.pass = Object.freeze({ accessToken: d.accessToken || null, expiresAt: d.expiresAt || null, returnUrl: d.returnUrl || null });
    return this.#decide('admitted', STOP);
  }

  // end: the place ended (or there is none to wait in): left, expired,
  // closed or soldout. Nothing is polled after.
  #end(kind) {
    if ((kind === 'closed' || kind === 'soldout') && this.#s.info) this.#s.info = Object.freeze({ ...this.#s.info, state: kind });
    this.#s.status = kind;
    return this.#decide(kind, STOP);
  }

  // fail: nothing to do here (unknown-event, error).
  #fail(kind) {
    this.#s.status = kind;
    return this.#decide('error', STOP);
  }

  // noWorker: nothing here can pay the sale's proof of work.
  #noWorker() {
    this.#s.status = 'no-worker';
    return this.#decide('no-worker', STOP);
  }

  #onTicket(d, sent) {
    if (!d.ticket && !(sent && d.status)) throw new NetworkError('join answer without a ticket');
    const ticket = d.ticket || sent.ticket;
    this.#s.ticket = ticket;
    const saved = this.#kept();
    const keep = saved && saved.ticket === ticket && Number.isFinite(saved.start);
    const start = keep ? saved.start : Math.max(Number(d.position) || 1, Number.isFinite(this.#startAt) ? this.#startAt : 0);
    this.#keep({ ticket, start });
    if (d.status === 'admitted') return this.#admitted(d);
    return this.#waiting(d);
  }

  // solver is what pays a proof here: the option's, else Web Workers where
  // there are some, this thread where there is no page to freeze (Node),
  // and nothing in a page without workers.
  #solver() {
    if (this.#solve !== undefined) return this.#solve;
    if (typeof Worker === 'function') return (c, b) => solveProof(c, b).then((p) => p.nonce);
    if (typeof document === 'undefined') return (c, b) => solveProof(c, b, { workers: 0 }).then((p) => p.nonce);
    return null;
  }

  // prove solves a 428's challenge for the next join and returns when to
  // join again, or stop when nothing here can.
  async #prove(d) {
    this.#s.proofRounds += 1;
    const solve = this.#solver();
    if (!solve) return this.#noWorker();
    if (typeof d.challenge !== 'string' || !Number.isInteger(d.bits)) throw new NetworkError('428 without a challenge');
    const mine = this.#run;
    this.#s.status = 'checking';
    this.#decide('checking', after('prove'));
    let nonce;
    try {
      nonce = await solve(d.challenge, d.bits);
    } catch {
      return mine === this.#run ? this.#noWorker() : STOP;
    }
    if (mine !== this.#run) return STOP;
    this.#proofHeader = `${d.challenge}:${nonce}`;
    // A proof refused over and over (a clock far off, a proxy eating the
    // header) must not spin the fan's phone: after three, back off.
    const rounds = this.#s.proofRounds;
    return this.#decide('proved', after('join', rounds > 3 ? backoffMs(rounds - 3) : 0));
  }

  // joinOnce and poll ask the room once and return what comes next; an
  // answer that comes after the loop was stopped (leave, away, stop) changes
  // nothing.
  async #joinOnce(mine) {
    const sent = this.#kept();
    const headers = sent && sent.ticket ? { 'X-Waitroom-Ticket': sent.ticket } : {};
    const account = optionValue(this.#account);
    if (account) headers['X-Waitroom-Account'] = account;
    const code = optionValue(this.#code);
    if (code) headers['X-Waitroom-Code'] = code;
    if (this.#proofHeader) {
      headers['X-Waitroom-Proof'] = this.#proofHeader;
      this.#proofHeader = null; // good for one join only
    }
    // A fan sent here by a site behind the room carries the way back.
    const body = this.#returnTo ? { return: this.#returnTo } : undefined;
    const r = await this.#call('POST', `/api/v1/events/${this.#enc}/tickets`, { headers, body });
    if (mine !== this.#run) return STOP;
    if (r.status !== 428) this.#s.proofRounds = 0;
    const error = r.data && r.data.error;
    switch (r.status) {
      case 200:
      case 201:
        return this.#onTicket(r.data, sent);
      case 428:
        // proof_required: this sale asks a proof of work for a new place.
        return this.#prove(r.data);
      case 403: {
        // Nothing to retry until the fan does something.
        if (REFUSALS.has(error)) return this.#decide('refused', STOP, error);
        // window_not_open: the fan's presale window opens later (or has
        // closed: then it says so and stops).
        if (error === 'window_not_open') {
          const opens = Date.parse(r.data.windowOpensAt || '') - this.#now();
          if (!(opens > 0)) return this.#decide('refused', STOP, error);
          this.#s.status = 'not-open';
          this.#s.opensAt = r.data.windowOpensAt;
          return this.#decide('not-open', after('join', Math.min(Math.max(opens, 1000), 60000) + Math.random() * 3000));
        }
        // not_open: the waiting room itself opens later. Come back then
        // (checking at least every minute in case the schedule moves), with
        // a little jitter so not everyone arrives in the same millisecond.
        const until = Date.parse(r.data.opensAt || '') - this.#now();
        const base = Number.isFinite(until) ? Math.min(Math.max(until, 2000), 60000) : 30000;
        this.#s.status = 'not-open';
        this.#s.opensAt = r.data.opensAt ?? null;
        return this.#decide('not-open', after('join', base + Math.random() * 3000));
      }
      case 401:
        // account_required or invalid_account: the origin site signs the
        // fan in; there is nothing to retry until it has.
        return this.#decide('refused', STOP, error === 'invalid_account' ? 'invalid_account' : 'account_required');
      case 409:
        if (error === 'code_used') return this.#decide('refused', STOP, error);
        return this.#end(error === 'sold_out' ? 'soldout' : 'closed');
      case 404:
        return this.#fail('unknown-event');
      case 429:
        return this.#decide('busy', after('join', retryAfterMs(r)), error || 'rate_limited');
      case 400:
        // The kept ticket is not one the room accepts (malformed, or from
        // another deployment): forget it and join afresh.
        if (sent) {
          this.forget();
          return this.#decide('forget', JOIN_NOW);
        }
        return this.#fail('error');
      default:
        throw unavailable(r);
    }
  }

  async #poll(mine) {
    // The fan may have left, or joined again, in another tab: follow it
    // rather than join behind their back.
    const saved = this.#kept();
    if (!saved || !saved.ticket) {
      this.#s.ticket = null;
      return this.#end('left');
    }
    this.#s.ticket = saved.ticket;
    const r = await this.#call('GET', `/api/v1/events/${this.#enc}/tickets/${encodeURIComponent(saved.ticket)}`);
    if (mine !== this.#run) return STOP;
    switch (r.status) {
      case 200:
        if (r.data.status === 'admitted') return this.#admitted(r.data);
        if (r.data.status === 'soldout') return this.#end('soldout');
        return this.#waiting(r.data);
      case 410:
        this.#forgetTicket();
        return this.#end(r.data.status === 'closed' ? 'closed' : 'expired');
      case 400:
        this.#forgetTicket();
        return this.#decide('forget', JOIN_NOW);
      case 404:
        return this.#fail('unknown-event');
      case 429:
        return this.#decide('busy', after('poll', retryAfterMs(r)), (r.data && r.data.error) || 'rate_limited');
      default:
        throw unavailable(r);
    }
  }

  // forgetTicket drops the kept ticket if it is still the one polled (not
  // one another tab joined with meanwhile).
  #forgetTicket() {
    const kept = this.#kept();
    if (kept && kept.ticket === this.#s.ticket) this.forget();
  }
}
