// checkout.js: one fan's way from chosen places to a booking, as an explicit
// state machine. The states are the booking page's phases (main[data-phase]):
//
//   loading ─start──────────▶ choose ─held──▶ held ─pay──▶ paying ─settled──▶ done
//           ─resumeHold─────▶ held            │             │  ─unknown──▶ done
//           ─resumeBooking──▶ paying          │             ├─booked (the checkout answered: off to the
//                                             │             │         provider's page; stays paying)
//                                             │             ├─notStarted──▶ held
//                                             │             ├─unpaid──▶ held (failed or cancelled at the
//                                             │             │                 provider; the hold is still there)
//                                             │             ├─again──▶ choose (the hold ran out meanwhile)
//                                             ├─released──▶ choose
//                                             └─expired───▶ choose ◀─expired─┘
//   done ─again──▶ choose;   any state but ended ─end──▶ ended (the admission is over)
//   loading ─fail──▶ ended (nothing to book here)
//
// Paying is the provider's: the checkout answers paymentUrl, the page goes
// there (hooks.leave), the fan pays or cancels on the provider's page and is
// sent back to /e/{event}/book?booking=<id> (returned, below), and the
// machine resumes the booking and follows it until it settles. While it is
// PENDING the hold's countdown keeps running; a fan back after the hold ran
// out is told that a payment made is being refunded (event "pending" with
// lapsed, or "refunding"), never an error.
//
// BookingFlow holds what the machine is about (the hold, the booking, their
// idempotency key) and does the requests; it renders nothing. It tells
// book.js through hooks: changed(state, event, detail) after every
// transition (and with event "pending" while a booking is still being paid,
// "refunding" while a late payment's money goes back), busy() when a hold
// request starts or ends, say(text, kind) for words, reload() to fetch the
// seat map again, conflict({seats, block}) when someone was faster,
// leave(url) to go to the provider's page.
//
// No DOM ids.

import { api, store, retryAfterMs, backoffMs, serverSkewMs, newKey, NetworkError } from './api.js';
import { t } from './i18n.js';
import { MAX_PLACES, takenWords } from './places.js';

const BOOKING_POLL_MS = 1500;

export const TRANSITIONS = Object.freeze({
  loading: { start: 'choose', resumeHold: 'held', resumeBooking: 'paying', fail: 'ended', end: 'ended' },
  choose: { held: 'held', end: 'ended' },
  held: { pay: 'paying', released: 'choose', expired: 'choose', end: 'ended' },
  paying: {
    booked: 'paying',
    notStarted: 'held',
    unpaid: 'held',
    expired: 'choose',
    again: 'choose',
    settled: 'done',
    unknown: 'done',
    end: 'ended',
  },
  done: { again: 'choose', end: 'ended' },
  ended: {},
});

export class BookingFlow {
  // event: the event id; pass: the access pass (pass.js); waiter: api.js's
  // Waiter; hooks: see the top of this file; returned: the booking id the
  // provider sent the fan back with (?booking=), if any.
  constructor({ event, pass, waiter, hooks, returned }) {
    this.event = event;
    this.pass = pass;
    this.waiter = waiter;
    this.hooks = hooks;
    this.state = 'loading';
    // hold: {holdId, expiresAt, seats, generalAdmission, showtimeId, amountCents, idemKey, skew}
    this.hold = store.hold.get(event);
    if (this.hold) this.hold.showtimeId = String(this.hold.showtimeId);
    // booking: {bookingId, showtimeId, seats, generalAdmission, amountCents, paymentUrl}
    this.booking = store.booking.get(event);
    if (returned && (!this.booking || this.booking.bookingId !== returned)) {
      // Back from the provider in a tab that does not remember this
      // booking: the booking's answer says what it is, and its hold.
      this.booking = { bookingId: returned };
      store.booking.set(event, this.booking);
    }
    this.busy = false; // a hold request is in flight (or we were told to wait)
    this.warned = false; // the one-minute warning was given for this hold
    this.gen = 0; // bumped when a hold starts or ends: stale seat maps are dropped
  }

  // send moves the machine; an event the state does not take is refused.
  send(ev, detail = {}) {
    const next = TRANSITIONS[this.state][ev];
    if (!next) return false;
    const from = this.state;
    this.state = next;
    this.hooks.changed(next, ev, { ...detail, from });
    return true;
  }

  // invalidate drops seat map answers already on their way.
  invalidate() {
    this.gen += 1;
  }

  // heldSeats are the seats held for the fan on this showtime.
  heldSeats(showtimeId) {
    return this.hold && this.hold.showtimeId === String(showtimeId) ? this.hold.seats || [] : [];
  }

  // holdLeftMs is the time left on the hold by the server's clock.
  holdLeftMs() {
    if (!this.hold) return NaN;
    return Date.parse(this.hold.expiresAt) - (Date.now() + (this.hold.skew || 0));
  }

  // resume picks up where this tab was: a booking being paid, a live hold,
  // or a fresh choice.
  resume() {
    if (this.booking) {
      this.send('resumeBooking');
      this.pollBooking();
    } else if (this.hold && this.holdLeftMs() > 0) {
      this.send('resumeHold');
    } else {
      const lapsed = Boolean(this.hold);
      this.dropHold();
      this.send('start', { lapsed });
    }
  }

  dropHold() {
    this.hold = null;
    store.hold.clear(this.event);
    this.gen += 1;
  }

  // end: the admission is over (401 from the gate).
  end() {
    const hadToken = Boolean(this.pass.token);
    this.pass.forget();
    this.hold = null;
    store.hold.clear(this.event);
    this.send('end', { hadToken });
  }

  // clock is called every second with the state shown: it warns a minute
  // before an unpaid hold lapses, and drops it when it has.
  clock() {
    if (this.state !== 'held' || !this.hold) return;
    const left = this.holdLeftMs();
    if (!Number.isFinite(left)) return;
    if (left <= 60000 && left > 0 && !this.warned) {
      this.warned = true;
      this.hooks.say(t('book.minuteLeft'));
    }
    // While paying, the server decides what a late payment means; only an
    // unpaid hold is dropped here.
    if (left <= 0) this.expire();
  }

  async expire() {
    this.dropHold();
    if (this.send('expired')) await this.hooks.reload();
  }

  // hold asks for the chosen places on showtimeId.
  async take(showtimeId, { seats, ga }) {
    if (this.state !== 'choose' || this.busy) return;
    if (!seats.length && !Object.keys(ga).length) return;
    const body = {};
    if (seats.length) body.seats = seats;
    if (Object.keys(ga).length) body.generalAdmission = ga;

    this.busy = true;
    this.gen += 1;
    this.hooks.busy();
    this.hooks.say(t('book.holding'));
    let r;
    try {
      r = await api('POST', `/api/v1/booking/showtimes/${encodeURIComponent(showtimeId)}/holds`, {
        body,
        token: this.pass.token,
      });
    } catch {
      // Not retried by itself: a hold is not idempotent, and one that did land
      // simply lapses at its expiry.
      this.busy = false;
      this.hooks.busy();
      this.hooks.say(t('book.offline'), 'error');
      return;
    } finally {
      this.gen += 1;
    }
    this.busy = false;
    const d = r.data;
    // The gateway stretches the admission to cover the hold and hands out a
    // pass that lasts as long.
    this.pass.renew(r);
    switch (r.status) {
      case 201:
      case 200:
        this.hold = {
          holdId: d.holdId,
          expiresAt: d.expiresAt,
          seats: Array.isArray(d.seats) ? d.seats : seats,
          generalAdmission: d.generalAdmission && typeof d.generalAdmission === 'object' ? d.generalAdmission : ga,
          showtimeId: String(showtimeId),
          amountCents: Number.isFinite(d.amountCents) ? d.amountCents : null,
          idemKey: newKey(),
          skew: serverSkewMs(r),
        };
        store.hold.set(this.event, this.hold);
        this.warned = false;
        this.send('held');
        return;
      case 409:
        if (d.error === 'sold_out') {
          const block = d.block || '';
          this.hooks.conflict({ block });
          this.hooks.say(block ? t('book.soldOutBlock', { code: block }) : t('book.soldOut'), 'error');
        } else {
          const taken = Array.isArray(d.seats) && d.seats.length ? d.seats : seats;
          this.hooks.conflict({ seats: taken });
          this.hooks.say(takenWords(taken), 'error');
        }
        this.hooks.busy();
        await this.hooks.reload();
        return;
      case 422:
        this.hooks.say(t('book.tooMany', { n: MAX_PLACES }), 'error');
        break;
      case 429: {
        const ms = retryAfterMs(r);
        this.hooks.say(t('book.busy', { n: Math.ceil(ms / 1000) }), 'error');
        this.busy = true;
        setTimeout(() => {
          this.busy = false;
          this.hooks.busy();
        }, ms);
        break;
      }
      case 401:
        this.end();
        return;
      case 403:
        this.hooks.say(t('book.wrongShowtime'), 'error');
        break;
      default:
        this.hooks.say(t('book.failed'), 'error');
    }
    this.hooks.busy();
  }

  // release gives the hold back; false when it is still held (try again).
  async release() {
    if (!this.hold || this.state !== 'held') return false;
    let r;
    try {
      r = await api('DELETE', `/api/v1/booking/holds/${encodeURIComponent(this.hold.holdId)}`, { token: this.pass.token });
    } catch {
      this.hooks.say(t('book.releaseOffline'), 'error');
      return false;
    }
    if (r.status === 401) {
      this.end();
      return true;
    }
    if (r.status !== 204 && r.status !== 404 && r.status !== 410 && !r.ok) {
      this.hooks.say(t('book.failed'), 'error');
      return false;
    }
    this.dropHold();
    this.send('released');
    this.hooks.say(t('book.released'));
    await this.hooks.reload();
    return true;
  }

  // pay checks out with the hold's one Idempotency-Key, retried on no
  // answer, 429 and 5xx, then follows the booking until it settles.
  async pay() {
    if (!this.hold || this.state !== 'held') return;
    const h0 = this.hold;
    this.send('pay');
    const r = await this.checkout(h0, h0.idemKey, undefined, (r) => r.status === 201 || r.status === 200);
    if (!r) return;
    const url = typeof r.data.paymentUrl === 'string' ? r.data.paymentUrl : '';
    this.keep(h0, r.data.bookingId, { paymentUrl: url });
    this.send('booked');
    if (url) {
      // The provider's page decides; it sends the fan back here.
      this.hooks.say(t('book.result.toProvider'));
      this.hooks.leave(url);
      return;
    }
    this.hooks.say(t('book.result.confirming'));
    this.pollBooking();
  }

  // payPoints pays the hold from the account's points wallet at once
  // (checkout {"method":"points"}, under a key of its own: the card's key
  // names another request). 201 is the booking CONFIRMED; 402 is too few
  // points (nothing changed, the hold is still there). It returns the
  // balance the wallet has after the attempt, when the answer told it.
  async payPoints() {
    if (!this.hold || this.state !== 'held') return null;
    const h0 = this.hold;
    this.send('pay');
    const r = await this.checkout(h0, `${h0.idemKey}:points`, { method: 'points' },
      (r) => (r.status === 201 && r.data.status === 'CONFIRMED') || r.status === 402);
    if (!r) return null;
    if (r.status === 402) {
      this.send('notStarted');
      return null;
    }
    this.keep(h0, r.data.bookingId);
    this.settle('CONFIRMED', { bookingId: r.data.bookingId, status: 'CONFIRMED' });
    return r.data.balance;
  }

  // keep records the booking a checkout of hold h0 made, with what the page
  // shows of it, here and in the tab's store (a reload finds it).
  keep(h0, bookingId, more = {}) {
    this.booking = {
      bookingId,
      showtimeId: h0.showtimeId,
      seats: h0.seats,
      generalAdmission: h0.generalAdmission,
      amountCents: h0.amountCents,
      ...more,
    };
    store.booking.set(this.event, this.booking);
  }

  // checkout posts the hold h0's checkout under key (with body, if any)
  // until an answer done(r) accepts, which it returns. No answer, 429 and
  // 5xx are retried with the same key, which answers the same booking if
  // an earlier attempt did land. Anything else is dealt with here, and null
  // returned: the hold lapsed (409, 404), the pass ended (401), the request
  // was refused (another 4xx), or six retries went unanswered.
  async checkout(h0, key, body, done) {
    let attempt = 0;
    for (;;) {
      let r = null;
      try {
        r = await api('POST', `/api/v1/booking/holds/${encodeURIComponent(h0.holdId)}/checkout`, {
          body,
          headers: { 'Idempotency-Key': key },
          token: this.pass.token,
        });
      } catch {
        r = null;
      }
      if (r && done(r)) return r;
      if (r && (r.status === 409 || r.status === 404)) {
        await this.expire();
        return null;
      }
      if (r && r.status === 401) {
        this.end();
        return null;
      }
      if (r && r.status >= 400 && r.status < 500 && r.status !== 429) {
        this.send('notStarted');
        this.hooks.say(t('book.payNotStarted'), 'error');
        return null;
      }
      attempt += 1;
      if (attempt > 6) {
        this.send('notStarted');
        this.hooks.say(t('book.payRetry'), 'error');
        return null;
      }
      this.hooks.say(t('book.reconnecting'), 'net');
      await this.waiter.sleep(r && r.status === 429 ? retryAfterMs(r) : backoffMs(attempt));
    }
  }

  async pollBooking() {
    const id = this.booking && this.booking.bookingId;
    if (!id) return;
    const started = Date.now();
    let fails = 0;
    while (this.booking && this.booking.bookingId === id && (this.state === 'paying' || this.state === 'done')) {
      // Slower after a minute: the simulator answers in seconds, a real
      // provider may take much longer, and nothing is lost by asking less.
      let delay = Date.now() - started > 60000 ? 5000 : BOOKING_POLL_MS;
      try {
        const r = await api('GET', `/api/v1/booking/bookings/${encodeURIComponent(id)}`, { token: this.pass.token });
        if (r.ok) {
          fails = 0;
          const d = r.data;
          this.learnHold(d);
          const lapsed = !(this.holdLeftMs() > 0);
          const st = d.status;
          if (st === 'FAILED' && !d.refund && !lapsed) {
            // Failed or cancelled at the provider: the places are still
            // held, and the fan may pay again.
            this.unpaid();
            return;
          }
          if (st === 'FAILED' && d.refund) {
            // A late payment: its money is on the way back; REFUNDED next.
            if (this.state === 'paying') this.hooks.changed(this.state, 'refunding', { booking: d });
          } else if (st && st !== 'PENDING') {
            this.settle(st, d);
            return;
          } else {
            this.hooks.changed(this.state, 'pending', { booking: d, lapsed });
          }
        } else if (r.status === 401) {
          this.unknown(t('book.unknown.ended'));
          return;
        } else if (r.status === 404) {
          this.unknown(t('book.unknown.missing'));
          return;
        } else if (r.status === 429) {
          delay = retryAfterMs(r);
        } else {
          throw new NetworkError(`HTTP ${r.status}`);
        }
      } catch {
        fails += 1;
        delay = backoffMs(fails);
        this.hooks.say(t('book.reconnecting'), 'net');
      }
      await this.waiter.sleep(delay);
    }
  }

  // learnHold takes the hold from a booking's answer (holdId,
  // holdExpiresAt): the server's word on when it lapses, and the whole hold
  // when this tab did not know it (back from the provider elsewhere).
  learnHold(d) {
    if (!d.holdId) return;
    if (!d.holdExpiresAt) {
      // Booked, released or swept: no longer held.
      if (this.hold && this.hold.holdId === d.holdId) this.hold.expiresAt = new Date(0).toISOString();
      return;
    }
    if (!this.hold || this.hold.holdId !== d.holdId) {
      this.hold = {
        holdId: d.holdId,
        seats: Array.isArray(d.seats) ? d.seats : [],
        generalAdmission: d.generalAdmission && typeof d.generalAdmission === 'object' ? d.generalAdmission : {},
        showtimeId: String(d.showtimeId),
        amountCents: Number.isFinite(d.amountCents) ? d.amountCents : null,
        idemKey: newKey(),
        skew: 0,
      };
    }
    this.hold.expiresAt = d.holdExpiresAt;
    store.hold.set(this.event, this.hold);
    if (this.booking) {
      for (const k of ['showtimeId', 'seats', 'generalAdmission', 'amountCents']) {
        if (this.booking[k] === undefined && d[k] !== undefined) this.booking[k] = d[k];
      }
    }
  }

  // unpaid: the payment failed or was cancelled while the hold lasts; the
  // next Pay is a new checkout, under a new key (the old key would answer
  // the failed booking again).
  unpaid() {
    this.booking = null;
    store.booking.clear(this.event);
    this.hold.idemKey = newKey();
    store.hold.set(this.event, this.hold);
    this.warned = this.holdLeftMs() <= 60000;
    if (this.send('unpaid')) {
      this.hooks.say(t('book.unpaid'), 'error');
      this.hooks.reload();
    }
  }

  settle(status, d) {
    const booking = { ...this.booking, ...d };
    if (!Array.isArray(d.seats)) booking.seats = this.booking.seats;
    if (!d.generalAdmission) booking.generalAdmission = this.booking.generalAdmission;
    this.dropHold();
    if (status !== 'CONFIRMED') store.booking.clear(this.event);
    this.send('settled', { status, booking });
  }

  unknown(words) {
    this.dropHold();
    this.send('unknown', { words });
  }

  // again: after a failed payment, or a hold that ran out while paying,
  // choose afresh.
  async again() {
    this.booking = null;
    store.booking.clear(this.event);
    if (this.state === 'paying') this.dropHold();
    if (this.send('again')) await this.hooks.reload();
  }
}
