// checkout.js: one fan's way from chosen places to a booking, as an explicit
// state machine. The states are the booking page's phases (main[data-phase]):
//
//   loading ─start──────────▶ choose ─held──▶ held ─pay──▶ paying ─settled──▶ done
//           ─resumeHold─────▶ held            │             │  ─unknown──▶ done
//           ─resumeBooking──▶ paying          │             ├─booked (the checkout answered; stays paying)
//                                             │             ├─notStarted──▶ held
//                                             ├─released──▶ choose
//                                             └─expired───▶ choose ◀─expired─┘
//   done ─again──▶ choose;   any state but ended ─end──▶ ended (the admission is over)
//   loading ─fail──▶ ended (nothing to book here)
//
// BookingFlow holds what the machine is about (the hold, the booking, their
// idempotency key) and does the requests; it renders nothing. It tells
// book.js through hooks: changed(state, event, detail) after every
// transition (and with event "pending" while a booking is still being paid),
// busy() when a hold request starts or ends, say(text, kind) for
// words, reload() to fetch the seat map again, conflict({seats, block}) when
// someone was faster.
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
  paying: { booked: 'paying', notStarted: 'held', expired: 'choose', settled: 'done', unknown: 'done', end: 'ended' },
  done: { again: 'choose', end: 'ended' },
  ended: {},
});

export class BookingFlow {
  // event: the event id; pass: the access pass (pass.js); waiter: api.js's
  // Waiter; hooks: see the top of this file.
  constructor({ event, pass, waiter, hooks }) {
    this.event = event;
    this.pass = pass;
    this.waiter = waiter;
    this.hooks = hooks;
    this.state = 'loading';
    // hold: {holdId, expiresAt, seats, generalAdmission, showtimeId, amountCents, idemKey, skew}
    this.hold = store.hold.get(event);
    if (this.hold) this.hold.showtimeId = String(this.hold.showtimeId);
    // booking: {bookingId, showtimeId, seats, generalAdmission, amountCents}
    this.booking = store.booking.get(event);
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
    let attempt = 0;
    for (;;) {
      let r = null;
      try {
        r = await api('POST', `/api/v1/booking/holds/${encodeURIComponent(h0.holdId)}/checkout`, {
          headers: { 'Idempotency-Key': h0.idemKey },
          token: this.pass.token,
        });
      } catch {
        r = null;
      }
      if (r && (r.status === 201 || r.status === 200)) {
        this.booking = {
          bookingId: r.data.bookingId,
          showtimeId: h0.showtimeId,
          seats: h0.seats,
          generalAdmission: h0.generalAdmission,
          amountCents: h0.amountCents,
        };
        store.booking.set(this.event, this.booking);
        this.send('booked');
        this.hooks.say(t('book.result.processing'));
        this.pollBooking();
        return;
      }
      if (r && (r.status === 409 || r.status === 404)) {
        await this.expire();
        return;
      }
      if (r && r.status === 401) {
        this.end();
        return;
      }
      if (r && r.status >= 400 && r.status < 500 && r.status !== 429) {
        this.send('notStarted');
        this.hooks.say(t('book.payNotStarted'), 'error');
        return;
      }
      // No answer, 429 or 5xx: retry with the same Idempotency-Key, which
      // returns the same booking if the first attempt did land.
      attempt += 1;
      if (attempt > 6) {
        this.send('notStarted');
        this.hooks.say(t('book.payRetry'), 'error');
        return;
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
          const st = r.data.status;
          if (st && st !== 'PENDING') {
            this.settle(st, r.data);
            return;
          }
          this.hooks.changed(this.state, 'pending', { booking: r.data });
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

  // again: after a failed payment, choose afresh.
  async again() {
    this.booking = null;
    store.booking.clear(this.event);
    if (this.send('again')) await this.hooks.reload();
  }
}
