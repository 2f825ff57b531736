// book.js: the booking page (GET /e/{event}/book): it wires the seat map
// (seatmap.js) and the booking flow's state machine (checkout.js) to the
// page, and draws the flow's state.
//
// Seat map as inline SVG from GET /showtimes/{id}/seats, refreshed every few
// seconds while the fan chooses; general-admission blocks with a count
// picker; Hold → countdown → Pay (checkout with one Idempotency-Key per hold,
// reused on retry) → "processing payment" → polls the booking until
// CONFIRMED or FAILED. The access token comes from sessionStorage (stored by
// the waiting room); the gateway's cookie works too.
//
// Stable hooks for end-to-end tests (the map's own are in seatmap.js):
//   main[data-phase]          loading|choose|held|paying|done|ended (checkout.js's states)
//   #event-name               the event's name
//   #showtime                 <select> of showtimes (#showtime-picker hidden when only one)
//   #selected-count           "3 of 8 places chosen"; data-count="3"
//   #hold, #clear             hold the chosen places / clear the choice
//   #countdown                time left on the hold, m:ss; data-remaining-ms
//   #pay, #release            checkout / release the hold
//   #message                  what just happened: "Someone just took F5 and F6 — pick
//                             other seats", "Your hold expired…", "Sold out…",
//                             "Your admission ended — back to the line"; data-kind="info|error"
//   #booking-id               the booking id after checkout
//   #booking-status           PENDING|CONFIRMED|FAILED|REFUNDED (also data-status)
//   #again                    choose again after a failed payment
//   #access-left              time left of the admission
//   #back-to-line, #back-link shown when the admission ended

import { api, Waiter, retryAfterMs, backoffMs, eventFromPath, NetworkError } from './api.js';
import { $, h, setText, show, mmss, clock } from './ui.js';
import { MAX_PLACES, describe } from './places.js';
import { Pass } from './pass.js';
import { SeatMap } from './seatmap.js';
import { BookingFlow } from './checkout.js';

const REFRESH_MS = 4000;

const ui = {
  main: $('main'),
  name: $('event-name'),
  accessLeft: $('access-left'),
  picker: $('showtime-picker'),
  showtime: $('showtime'),
  message: $('message'),
  backToLine: $('back-to-line'),
  backLink: $('back-link'),
  choose: $('choose'),
  chooseTitle: $('choose-title'),
  mapHelp: $('map-help'),
  scrollHint: $('map-scroll-hint'),
  legend: $('legend'),
  mapScroll: $('map-scroll'),
  ga: $('ga'),
  selectedCount: $('selected-count'),
  selection: $('selection'),
  hold: $('hold'),
  clear: $('clear'),
  held: $('held'),
  heldTitle: $('held-title'),
  countdown: $('countdown'),
  heldSummary: $('held-summary'),
  pay: $('pay'),
  release: $('release'),
  result: $('result'),
  resultTitle: $('result-title'),
  bookingId: $('booking-id'),
  bookingStatus: $('booking-status'),
  resultDetail: $('result-detail'),
  again: $('again'),
};

const event = eventFromPath(location.pathname);
const enc = event ? encodeURIComponent(event) : '';
const waiter = new Waiter();
const pass = new Pass(event);

// The page's own state: which showtime is shown, and the seat map refresh.
const page = {
  showtimes: [],
  showtimeId: null,
  loading: false,
  refreshTimer: 0,
};

function say(text, kind = 'info') {
  ui.message.dataset.kind = kind;
  // The same words again (a second conflict) must still be heard.
  if (ui.message.textContent === text) ui.message.textContent = '';
  setText(ui.message, text);
}

const map = new SeatMap(
  { scroll: ui.mapScroll, ga: ui.ga, scrollHint: ui.scrollHint, legend: ui.legend },
  { onChange: renderSelection, onNote: say },
);

const flow = new BookingFlow({
  event,
  pass,
  waiter,
  hooks: {
    changed,
    busy: renderSelection,
    say,
    reload: loadSeats,
    conflict: (what) => map.drop(what),
  },
});

// ---------- drawing the flow's state ----------

function renderPhase(p) {
  ui.main.dataset.phase = p;
  show(ui.choose, p === 'choose' || p === 'held');
  show(ui.held, p === 'held' || p === 'paying');
  show(ui.result, p === 'paying' || p === 'done');
  const choosing = p === 'choose';
  show(ui.hold.parentElement, choosing);
  ui.showtime.disabled = !choosing;
  ui.pay.disabled = p !== 'held';
  ui.release.disabled = p !== 'held';
  setText(ui.chooseTitle, choosing ? `Pick up to ${MAX_PLACES} places` : 'Your places on the map');
  show(ui.mapHelp, choosing);
  map.setMode(choosing, flow.heldSeats(page.showtimeId));
  renderSelection();
  tick();
  if (choosing) scheduleRefresh(REFRESH_MS);
}

// changed is the flow's one hook for transitions: the phase is drawn the
// same way for every one, then each event adds what it alone says.
function changed(state, ev, detail) {
  if (ev === 'held') map.clearChoice();
  if (ev !== 'pending' && ev !== 'booked') renderPhase(state);
  switch (ev) {
    case 'start':
      if (detail.lapsed) say('Your hold expired — pick your seats again.', 'error');
      break;
    case 'held': {
      const what = describe(flow.hold.seats, flow.hold.generalAdmission);
      setText(ui.heldSummary, what);
      say(`Held: ${what}. Pay before the timer runs out.`);
      ui.heldTitle.focus();
      ui.held.scrollIntoView({ block: 'nearest' });
      break;
    }
    case 'resumeHold':
      setText(ui.heldSummary, describe(flow.hold.seats, flow.hold.generalAdmission));
      break;
    case 'pay':
      showBooking(null, 'Starting payment…');
      break;
    case 'resumeBooking':
    case 'booked':
    case 'pending':
      showBooking('PENDING', 'Processing payment…');
      if (ev === 'pending' && ui.message.dataset.kind === 'net') say('Processing payment…');
      break;
    case 'expired':
      say('Your hold expired — pick your seats again.', 'error');
      break;
    case 'settled':
      finished(detail);
      break;
    case 'unknown':
      showBooking(ui.bookingStatus.dataset.status || 'PENDING', 'Payment status unknown');
      setText(ui.resultDetail, detail.words);
      say(detail.words, 'error');
      break;
    case 'again':
      show(ui.again, false);
      say('');
      break;
    case 'end':
      admissionEnded(detail.hadToken);
      break;
    default:
      break;
  }
}

function showBooking(status, title) {
  if (title) setText(ui.resultTitle, title);
  setText(ui.bookingId, flow.booking ? flow.booking.bookingId : '');
  ui.bookingStatus.dataset.status = status || '';
  setText(ui.bookingStatus, status || '');
}

function finished({ status, what, bookingId }) {
  clearTimeout(page.refreshTimer);
  showBooking(status);
  show(ui.again, status !== 'CONFIRMED');
  switch (status) {
    case 'CONFIRMED':
      setText(ui.resultTitle, "You're booked!");
      setText(ui.resultDetail, `${what}. Keep your booking number: ${bookingId}.`);
      say(`Booking ${bookingId} is confirmed.`);
      break;
    case 'REFUNDED':
      setText(ui.resultTitle, 'Payment refunded');
      setText(ui.resultDetail, 'Your payment came in after your hold had run out, so it has been refunded and the places were released.');
      say('Your payment arrived too late and has been refunded.', 'error');
      break;
    default:
      setText(ui.resultTitle, 'Payment failed');
      setText(ui.resultDetail, "The payment didn't go through, so your places were released.");
      say("The payment didn't go through. Your places were released.", 'error');
  }
  ui.resultTitle.focus();
}

function admissionEnded(hadToken) {
  clearTimeout(page.refreshTimer);
  show(ui.accessLeft, false);
  ui.backLink.href = `/e/${enc}`;
  show(ui.backToLine, true);
  say(
    hadToken
      ? 'Your admission ended — back to the line.'
      : 'Booking opens when it is your turn in the waiting room — taking you to the line.',
    'error',
  );
  setTimeout(() => location.assign(`/e/${enc}`), 5000);
}

// fail ends the page when there is nothing to book.
function fail(words) {
  flow.send('fail');
  say(words, 'error');
}

function renderSelection() {
  const n = map.total();
  ui.selectedCount.dataset.count = String(n);
  setText(ui.selectedCount, `${n} of ${MAX_PLACES} places chosen`);
  const { seats, ga } = map.choice();
  setText(ui.selection, describe(seats, ga));
  const choosing = flow.state === 'choose';
  ui.hold.disabled = !choosing || n === 0 || flow.busy;
  ui.clear.disabled = !choosing || n === 0;
  setText(ui.hold, n ? `Hold ${n} place${n === 1 ? '' : 's'}` : 'Hold these places');
}

// ---------- loading the map ----------

// loadSeats fetches the map; returns false when the page must stop.
async function loadSeats() {
  if (page.loading || !page.showtimeId) return true;
  page.loading = true;
  const gen = flow.gen;
  const showtime = page.showtimeId;
  try {
    const r = await api('GET', `/api/v1/booking/showtimes/${encodeURIComponent(showtime)}/seats`, { token: pass.token });
    if (gen !== flow.gen || showtime !== page.showtimeId) return true; // a hold or a switch overtook this answer
    switch (r.status) {
      case 200:
        if (ui.message.dataset.kind === 'net') say('');
        map.apply(r.data);
        return true;
      case 401:
        flow.end();
        return false;
      case 403:
        say('This showtime is not part of this event.', 'error');
        return true;
      case 404:
        say("We can't find this showtime.", 'error');
        return true;
      case 429:
        scheduleRefresh(retryAfterMs(r));
        return true;
      default:
        throw new NetworkError(`HTTP ${r.status}`);
    }
  } catch {
    say('Reconnecting…', 'net');
    ui.message.dataset.kind = 'net';
    return true;
  } finally {
    page.loading = false;
  }
}

function scheduleRefresh(ms) {
  clearTimeout(page.refreshTimer);
  page.refreshTimer = setTimeout(refresh, ms);
}

async function refresh() {
  if (flow.state !== 'choose') return;
  if (document.hidden || flow.busy) {
    scheduleRefresh(REFRESH_MS);
    return;
  }
  const before = page.refreshTimer;
  const keepGoing = await loadSeats();
  // loadSeats may have rescheduled itself (429); otherwise keep the rhythm.
  if (keepGoing && flow.state === 'choose' && page.refreshTimer === before) scheduleRefresh(REFRESH_MS);
}

// ---------- clocks ----------

function tick() {
  const p = flow.state;
  if (flow.hold && (p === 'held' || p === 'paying')) {
    const left = flow.holdLeftMs();
    if (Number.isFinite(left)) {
      setText(ui.countdown, mmss(left));
      ui.countdown.dataset.remainingMs = String(Math.max(0, Math.round(left)));
      ui.countdown.classList.toggle('urgent', left <= 60000);
    }
  }
  if (pass.expiresAt && p !== 'ended' && p !== 'done') {
    const left = Date.parse(pass.expiresAt) - Date.now();
    if (Number.isFinite(left)) {
      show(ui.accessLeft, true);
      setText(ui.accessLeft, left > 0 ? `Your turn to book ends in ${mmss(left)}.` : 'Your turn to book has ended.');
      ui.accessLeft.classList.toggle('urgent', left <= 60000);
    }
  } else {
    show(ui.accessLeft, false);
  }
}

// ---------- start ----------

function fillShowtimes() {
  ui.showtime.replaceChildren(
    ...page.showtimes.map((st) => {
      const when = clock(st.startsAt);
      const words = st.title ? (when && !String(st.title).includes(when) ? `${st.title} (${when})` : st.title) : when || `Showtime ${st.id}`;
      return h('option', { value: String(st.id) }, words);
    }),
  );
  ui.showtime.value = String(page.showtimeId);
  show(ui.picker, page.showtimes.length > 1);
}

function showtimeTitle(id) {
  const st = page.showtimes.find((x) => String(x.id) === String(id));
  return st && st.title ? st.title : '';
}

async function loadEvent() {
  for (let attempt = 1; ; attempt += 1) {
    try {
      const r = await api('GET', `/api/v1/events/${enc}`);
      if (r.ok) return r.data;
      if (r.status === 404) return null;
    } catch {
      // fall through to the retry
    }
    say('Reconnecting…', 'net');
    await waiter.sleep(backoffMs(attempt));
  }
}

function wire() {
  map.wire();
  ui.hold.addEventListener('click', () => flow.take(page.showtimeId, map.choice()));
  ui.clear.addEventListener('click', () => map.clear());
  ui.pay.addEventListener('click', () => flow.pay());
  ui.release.addEventListener('click', async () => {
    if (flow.state !== 'held') return;
    ui.release.disabled = true;
    ui.pay.disabled = true;
    if (!(await flow.release()) && flow.state === 'held') {
      ui.release.disabled = false;
      ui.pay.disabled = false;
    }
  });
  ui.again.addEventListener('click', () => flow.again());
  ui.showtime.addEventListener('change', async () => {
    if (flow.state !== 'choose') return;
    page.showtimeId = ui.showtime.value;
    map.switchTo(page.showtimeId, showtimeTitle(page.showtimeId));
    flow.invalidate();
    const url = new URL(location.href);
    url.searchParams.set('showtime', page.showtimeId);
    history.replaceState(null, '', url);
    await loadSeats();
  });
  document.addEventListener('visibilitychange', () => {
    if (!document.hidden && flow.state === 'choose') scheduleRefresh(0);
  });
}

async function main() {
  if (!event) {
    fail("This link doesn't name an event.");
    return;
  }
  ui.backLink.href = `/e/${enc}`;
  map.legend();
  wire();
  setInterval(() => {
    flow.clock();
    tick();
  }, 1000);

  const info = await loadEvent();
  if (!info) {
    fail("We can't find this event.");
    return;
  }
  if (info.name) {
    setText(ui.name, info.name);
    document.title = `${info.name} · choose your seats`;
  }
  page.showtimes = Array.isArray(info.showtimes) ? info.showtimes : [];

  const wanted = new URL(location.href).searchParams.get('showtime');
  const ids = page.showtimes.map((x) => String(x.id));
  page.showtimeId =
    (flow.booking && String(flow.booking.showtimeId)) ||
    (flow.hold && String(flow.hold.showtimeId)) ||
    (wanted && (ids.includes(wanted) || !ids.length) ? wanted : null) ||
    ids[0] ||
    null;
  if (!page.showtimeId) {
    fail('There are no showtimes on sale for this event.');
    return;
  }
  map.switchTo(page.showtimeId, showtimeTitle(page.showtimeId));
  fillShowtimes();
  flow.resume();
  tick();
  if (await loadSeats()) {
    if (flow.state === 'choose') scheduleRefresh(REFRESH_MS);
  }
}

main();
