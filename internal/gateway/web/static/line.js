// line.js: one fan's place in the line of one event, as a state machine with
// no DOM. It joins on start, or resumes: the ticket is kept per event (store)
// and sent back as X-Waitroom-Ticket, so a reload or a second tab keeps the
// same place. A sale that asks a proof of work answers a join 428 with a
// challenge: the machine has it worked out (proof.js) and joins again with
// the proof. Then it polls the ticket at the pollAfterMs the gateway asks
// for until the fan is admitted (it stores the access token, and after a
// pause says to move on to booking), the place ended, or there is nothing
// to do. 429: waits Retry-After. No answer: backs off and retries.
//
// Every change is published to the subscribers as a frozen snapshot, with
// the change that made it; room.js hands them to the page (roomview.js).
// A snapshot's status is the page's #status (data-status):
//
//   none ─start─▶ joining ─428─▶ checking ─proved─▶ (joins again) ─▶ …
//                    │              └─no-worker─▶ no-worker (this browser has no workers)
//                    ├─403─▶ not-open ─(at opensAt)─▶ joins again
//                    ├─200/201─▶ waiting ⇄ next ─admitted─▶ admitted ─book─▶ (the booking page)
//                    ├─409─▶ closed | soldout
//                    └─404─▶ unknown-event;  a refused join with no ticket kept ─▶ error
//   waiting, next ─410─▶ expired | closed; ─soldout─▶ soldout; ─leave─▶ left
//   waiting, next ─left─▶ left (no ticket kept any more: the fan left in another tab)
//   left, expired, closed ─rejoin─▶ joining
//   away (rendered by the server once the fan stepped away): stays, no polls
//
// The line starts from the status the server rendered: none joins; left
// stays left until the fan asks; any other (waiting, next, admitted,
// expired, …) joins again, which resumes a live place (the same ticket).
//
// Changes (snapshot.change), besides a status's own name (left, expired,
// closed, soldout, admitted, checking, not-open, no-worker):
//   joining  the page had no place: joining it
//   rejoin   the fan asked to join again
//   info     the event's facts came (GET /api/v1/events/{event}; info null:
//            there is no such event)
//   trying   a request goes out: the first, or the first after one that got
//            no answer (messageKind back to info)
//   proved   the proof is worked out for the next join
//   place    the line's answer for a waiting place (status waiting or next)
//   book     time to move on to the booking page
//   notice   a note for the fan, snapshot.notice: busy, busyJoin (429, next
//            try in next.inMs), account_required, invalid_account (401)
//   forget   the ticket kept here was refused (400): joins afresh
//   fatal    nothing to do here: status unknown-event or error
//   offline  no answer (failures in a row): retries in next.inMs
//   back     an answer again after failures
//
// Snapshot: {seq, change, status, info, ticket, place: {position, ahead,
// eta (seconds shown, smoothed by eta.js; null unknown), available (null
// until the booking core told the line), start (the place at join: the
// progress bar's zero)}, updatedAt (ms, the last place answer), opensAt (the
// room's opening, for not-open), notice, messageKind ('info' while a request
// is out or answered, 'net' after one got no answer), error (the last failure
// that was not the network's: a bug to see in data-error), failures,
// proofRounds (428s in a row), next: {action: join|poll|prove|book|stop,
// inMs}}: what the machine does next, and when.
//
// No DOM ids.

import { NetworkError, retryAfterMs, backoffMs } from './api.js';
import { EtaSmoother } from './eta.js';
import { ProofError } from './proof.js';

// Poll bounds: the gateway's pollAfterMs is obeyed, but a bad value must
// neither spin the page nor park it longer than a fan would tolerate.
const MIN_POLL_MS = 500;
const MAX_POLL_MS = 60000;
// The event itself (state, opensAt) changes rarely: refresh it at most this
// often, and never more often than every few polls, so a long line does not
// double the gateway's load.
const EVENT_REFRESH_MS = 30000;
// How long the admitted screen shows before the booking page opens.
const TURN_PAUSE_MS = 1200;

function after(action, inMs = 0) {
  return Object.freeze({ action, inMs });
}

const JOIN_NOW = after('join');
const STOP = after('stop');

function pollDelay(ms) {
  const v = Number.isFinite(ms) ? ms : 2000;
  return Math.min(Math.max(v, MIN_POLL_MS), MAX_POLL_MS);
}

export class Line {
  // event: the event id (null when the path names none); api, store, waiter:
  // api.js's api, store and a Waiter (or fakes of them); proof: proof.js's
  // {canSolve, solve}; now: the clock; later: setTimeout.
  constructor({ event, api, store, waiter, proof, code = () => '', now = Date.now, later = (fn, ms) => setTimeout(fn, ms) }) {
    this.event = event;
    this.code = code; // the access code the fan typed ('' = none)
    this.enc = event ? encodeURIComponent(event) : '';
    this.api = api;
    this.store = store;
    this.waiter = waiter;
    this.proof = proof;
    this.now = now;
    this.later = later;
    this.subscribers = new Set();
    this.smoother = new EtaSmoother();
    this.from = NaN; // main[data-from]: the place a link carried here started at
    this.run = 0; // bumped on leave/rejoin so an old loop stops
    this.infoAt = 0;
    this.infoLoading = false;
    this.lastEtaNull = null;
    this.proofHeader = null; // X-Waitroom-Proof for the next join, once solved
    this.returnTo = null; // main[data-return]: the way back a join carries
    // The fan's state, published frozen by publish().
    this.s = {
      status: null, // until start(): what the server rendered
      info: null,
      ticket: null,
      place: null,
      updatedAt: 0,
      opensAt: null,
      messageKind: null,
      error: null,
      failures: 0,
      proofRounds: 0,
      next: null,
      returnUrl: null, // once admitted: the way back to the site behind the room
    };
    this.snapshot = Object.freeze({ ...this.s, seq: 0, change: null, notice: null });
  }

  // subscribe calls fn(snapshot, previous) on every change, and returns the
  // way to stop.
  subscribe(fn) {
    this.subscribers.add(fn);
    return () => this.subscribers.delete(fn);
  }

  publish(change, notice = null) {
    const prev = this.snapshot;
    this.snapshot = Object.freeze({ ...this.s, seq: prev.seq + 1, change, notice });
    for (const fn of this.subscribers) fn(this.snapshot, prev);
  }

  // wake cuts the wait before the next request short (the tab is visible
  // again, or back online).
  wake() {
    this.waiter.wake();
  }

  // start takes over from the page the server rendered: its #status, its
  // data-from, and data-moved (a move this site made: drop the kept ticket).
  async start({ status, from, moved, returnTo = null }) {
    this.s.status = status;
    this.from = from;
    this.returnTo = returnTo;
    if (!this.event) {
      this.fail('unknown-event');
      return;
    }
    if (moved) {
      // A place carried here from another device by a move this site made:
      // the server set its ticket as the cookie; the ticket this browser
      // kept must not win over it. A link to ?moved=1 from elsewhere is not
      // marked so, and the fan's own ticket stays.
      this.store.ticket.clear(this.event);
    }
    if (status === 'left') {
      // Left on the page without JavaScript: stay out until asked.
      this.end('left');
      return;
    }
    if (status === 'away') {
      // The fan just stepped away (the server kept the place and will
      // email): no polls from here. Opening the room again shows the
      // place, as any page load does.
      this.s.status = 'away';
      this.decide('away', STOP);
      return;
    }
    if (status === 'none') {
      this.s.status = 'joining';
      this.publish('joining');
    }
    await this.loadInfo();
    if (!this.s.info && this.infoAt) {
      this.fail('unknown-event');
      return;
    }
    if (this.s.info && this.s.info.state === 'closed' && !this.store.ticket.get(this.event)) {
      // Nothing to join; "Check again" still asks the gateway, which decides.
      this.end('closed');
      return;
    }
    this.go();
  }

  // rejoin: the fan asks for a place again (after leaving, expiry, close).
  rejoin() {
    this.store.ticket.clear(this.event);
    this.s.status = 'joining';
    this.go('rejoin');
  }

  // leave gives the place back.
  async leave() {
    this.run += 1; // stop the loop first, so no poll races the DELETE
    this.waiter.wake();
    const saved = this.store.ticket.get(this.event);
    const gone = (saved && saved.ticket) || this.s.ticket;
    this.store.ticket.clear(this.event);
    this.s.ticket = null;
    if (gone) {
      try {
        await this.api('DELETE', `/api/v1/events/${this.enc}/tickets/${encodeURIComponent(gone)}`);
      } catch {
        // Unreachable: the place lapses by itself once nobody polls for it.
      }
    }
    this.end('left');
  }

  // go starts a new loop (a join first), after publishing change if given.
  go(change) {
    this.run += 1;
    this.s.place = null; // the first answer of a loop is news: "you're in line"
    this.s.failures = 0;
    this.s.next = JOIN_NOW;
    if (change) this.publish(change);
    this.waiter.wake();
    this.loop(this.run);
  }

  async loop(mine) {
    let next = JOIN_NOW;
    while (mine === this.run) {
      try {
        if (this.s.messageKind !== 'info') {
          this.s.messageKind = 'info';
          this.publish('trying');
        }
        next = next.action === 'join' ? await this.join() : await this.poll();
        if (this.s.failures) {
          this.s.failures = 0;
          this.publish('back');
        }
      } catch (err) {
        // Any failure here is treated like a lost connection: the place in
        // line is safe on the server, so the page only needs to come back.
        this.s.failures += 1;
        next = after(next.action, backoffMs(this.s.failures));
        this.s.next = next;
        this.s.messageKind = 'net';
        if (!(err instanceof NetworkError)) this.s.error = String(err && err.message);
        this.publish('offline');
      }
      if ((next.action !== 'join' && next.action !== 'poll') || mine !== this.run) return;
      if (next.inMs > 0) await this.waiter.sleep(next.inMs);
    }
  }

  // decide records what comes next, publishes change, and returns it.
  decide(change, next, notice) {
    this.s.next = next;
    this.publish(change, notice);
    return next;
  }

  async loadInfo() {
    if (this.infoLoading) return;
    this.infoLoading = true;
    try {
      const r = await this.api('GET', `/api/v1/events/${this.enc}`);
      if (r.ok || r.status === 404) {
        this.s.info = r.ok ? Object.freeze({ ...r.data }) : null;
        this.infoAt = this.now();
        this.publish('info');
      }
    } catch {
      // The poll loop reports connectivity; the state line just stays as it was.
    } finally {
      this.infoLoading = false;
    }
  }

  maybeRefreshInfo(pollMs, etaNull) {
    const due = this.now() - this.infoAt > Math.max(EVENT_REFRESH_MS, 3 * pollMs);
    // An ETA turning null (or back) means paused/resumed or opened: worth a
    // look at once, which is what the fan wants explained.
    const flipped = this.lastEtaNull !== null && etaNull !== this.lastEtaNull && this.now() - this.infoAt > 3000;
    this.lastEtaNull = etaNull;
    if (due || flipped) this.loadInfo();
  }

  // waiting takes a waiting place's answer and returns the next poll.
  waiting(d) {
    const saved = this.store.ticket.get(this.event);
    const pos = Number(d.position);
    const ahead = Number.isFinite(d.ahead) ? d.ahead : Math.max(0, pos - 1);
    const now = this.now();
    // The progress bar runs from the fan's own place at join to the front. In
    // the pre-queue later joiners can be drawn ahead of us, so the place can
    // grow: then the baseline grows with it rather than showing negative
    // progress.
    const ours = saved && saved.ticket === this.s.ticket;
    let start = ours && Number.isFinite(saved.start) ? saved.start : pos;
    if (pos > start) {
      start = pos;
      if (ours) this.store.ticket.set(this.event, { ticket: this.s.ticket, start });
    }
    const eta = this.smoother.update(pos, d.etaSeconds, now);
    // The places left, as the booking core last told the line (absent until
    // it has).
    const available = Number.isFinite(d.available) ? d.available : null;
    this.s.status = pos === 1 ? 'next' : 'waiting';
    this.s.place = Object.freeze({ position: pos, ahead, eta, available, start });
    this.s.updatedAt = now;
    const pollMs = pollDelay(d.pollAfterMs);
    const next = this.decide('place', after('poll', pollMs));
    this.maybeRefreshInfo(pollMs, d.etaSeconds == null);
    return next;
  }

  admitted(d) {
    if (d.accessToken) this.store.access.set(this.event, { token: d.accessToken, expiresAt: d.expiresAt || null });
    this.smoother.reset();
    this.s.status = 'admitted';
    this.s.returnUrl = d.returnUrl || null;
    const next = this.decide('admitted', after('book', TURN_PAUSE_MS));
    this.later(() => this.decide('book', STOP), TURN_PAUSE_MS);
    return next;
  }

  // end: the place ended (or there is none to wait in): left, expired,
  // closed or soldout. Nothing is polled after.
  end(kind) {
    this.smoother.reset();
    if ((kind === 'closed' || kind === 'soldout') && this.s.info) this.s.info = Object.freeze({ ...this.s.info, state: kind });
    this.s.status = kind;
    return this.decide(kind, STOP);
  }

  // fail: nothing to do here (unknown-event, error).
  fail(kind) {
    this.s.status = kind;
    return this.decide('fatal', STOP);
  }

  // noWorker: this browser cannot pay the sale's proof of work.
  noWorker() {
    this.s.status = 'no-worker';
    return this.decide('no-worker', STOP);
  }

  onTicket(d, sent) {
    if (!d.ticket && !(sent && d.status)) throw new NetworkError('join answer without a ticket');
    const ticket = d.ticket || sent.ticket;
    this.s.ticket = ticket;
    const saved = this.store.ticket.get(this.event);
    const keep = saved && saved.ticket === ticket && Number.isFinite(saved.start);
    const from = this.from;
    const start = keep ? saved.start : Math.max(Number(d.position) || 1, Number.isFinite(from) ? from : 0);
    this.store.ticket.set(this.event, { ticket, start });
    if (d.status === 'admitted') return this.admitted(d);
    return this.waiting(d);
  }

  // prove solves a 428's challenge for the next join and returns when to
  // join again, or stop when this browser cannot.
  async prove(d) {
    this.s.proofRounds += 1;
    if (!this.proof.canSolve()) return this.noWorker();
    if (typeof d.challenge !== 'string' || !Number.isInteger(d.bits)) throw new NetworkError('428 without a challenge');
    const mine = this.run;
    this.s.status = 'checking';
    this.decide('checking', after('prove'));
    try {
      const p = await this.proof.solve(d.challenge, d.bits);
      if (mine !== this.run) return STOP;
      this.proofHeader = p.header;
    } catch (err) {
      if (!(err instanceof ProofError)) throw err;
      return this.noWorker();
    }
    // A proof refused over and over (a clock far off, a proxy eating the
    // header) must not spin the fan's phone: after three, back off.
    const rounds = this.s.proofRounds;
    return this.decide('proved', after('join', rounds > 3 ? backoffMs(rounds - 3) : 0));
  }

  async join() {
    const sent = this.store.ticket.get(this.event);
    const headers = sent && sent.ticket ? { 'X-Waitroom-Ticket': sent.ticket } : {};
    const code = this.code();
    if (code) headers['X-Waitroom-Code'] = code;
    if (this.proofHeader) {
      headers['X-Waitroom-Proof'] = this.proofHeader;
      this.proofHeader = null; // good for one join only
    }
    // A fan sent here by a site behind the room carries the way back.
    const body = this.returnTo ? { return: this.returnTo } : undefined;
    const r = await this.api('POST', `/api/v1/events/${this.enc}/tickets`, { headers, body });
    if (r.status !== 428) this.s.proofRounds = 0;
    switch (r.status) {
      case 200:
      case 201:
        return this.onTicket(r.data, sent);
      case 428:
        // proof_required: this sale asks a proof of work for a new place.
        return this.prove(r.data);
      case 403: {
        const error = r.data && r.data.error;
        // A presale's account with no invitation, or a sale's code missing or
        // wrong: nothing to retry until the fan does something.
        if (error === 'not_invited' || error === 'code_required' || error === 'invalid_code') {
          return this.decide('notice', STOP, error);
        }
        // window_not_open: the fan's presale window opens later (or has
        // closed: then the page says so and stops).
        if (error === 'window_not_open') {
          const opens = Date.parse(r.data.windowOpensAt || '') - this.now();
          if (!(opens > 0)) return this.decide('notice', STOP, error);
          this.s.status = 'not-open';
          this.s.opensAt = r.data.windowOpensAt;
          return this.decide('not-open', after('join', Math.min(Math.max(opens, 1000), 60000) + Math.random() * 3000));
        }
        // not_open: the waiting room itself opens later. Come back then
        // (checking at least every minute in case the schedule moves), with a
        // little jitter so not everyone arrives in the same millisecond.
        const until = Date.parse(r.data.opensAt || '') - this.now();
        const base = Number.isFinite(until) ? Math.min(Math.max(until, 2000), 60000) : 30000;
        this.s.status = 'not-open';
        this.s.opensAt = r.data.opensAt ?? null;
        return this.decide('not-open', after('join', base + Math.random() * 3000));
      }
      case 401:
        // account_required or invalid_account: the organiser's site signs the
        // fan in (cookie wr_u); there is nothing to retry until it has.
        return this.decide('notice', STOP, r.data && r.data.error === 'invalid_account' ? 'invalid_account' : 'account_required');
      case 409:
        if (r.data && r.data.error === 'code_used') return this.decide('notice', STOP, 'code_used');
        return this.end(r.data && r.data.error === 'sold_out' ? 'soldout' : 'closed');
      case 404:
        return this.fail('unknown-event');
      case 429:
        return this.decide('notice', after('join', retryAfterMs(r)), 'busyJoin');
      case 400:
        // The stored ticket is not one the gateway accepts (malformed, or from
        // another deployment): forget it and join afresh.
        if (sent) {
          this.store.ticket.clear(this.event);
          return this.decide('forget', JOIN_NOW);
        }
        return this.fail('error');
      default:
        throw new NetworkError(`HTTP ${r.status}`);
    }
  }

  async poll() {
    // The fan may have left, or joined again, in another tab: follow it rather
    // than join behind their back.
    const saved = this.store.ticket.get(this.event);
    if (!saved || !saved.ticket) {
      this.s.ticket = null;
      return this.end('left');
    }
    this.s.ticket = saved.ticket;
    const r = await this.api('GET', `/api/v1/events/${this.enc}/tickets/${encodeURIComponent(saved.ticket)}`);
    switch (r.status) {
      case 200:
        if (r.data.status === 'admitted') return this.admitted(r.data);
        if (r.data.status === 'soldout') return this.end('soldout');
        return this.waiting(r.data);
      case 410:
        this.forgetTicket();
        return this.end(r.data.status === 'closed' ? 'closed' : 'expired');
      case 400:
        this.forgetTicket();
        return this.decide('forget', JOIN_NOW);
      case 404:
        return this.fail('unknown-event');
      case 429:
        return this.decide('notice', after('poll', retryAfterMs(r)), 'busy');
      default:
        throw new NetworkError(`HTTP ${r.status}`);
    }
  }

  // forgetTicket drops the kept ticket if it is still the one polled (not
  // one another tab joined with meanwhile).
  forgetTicket() {
    if (this.store.ticket.get(this.event)?.ticket === this.s.ticket) this.store.ticket.clear(this.event);
  }
}
