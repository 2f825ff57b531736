// book.js: the booking page (GET /e/{event}/book): it wires the seat map
// (seatmap.js) and the booking flow's state machine (checkout.js) to the
// page, and draws the flow's state.
//
// Seat map as inline SVG from GET /showtimes/{id}/seats, refreshed every few
// seconds while the fan chooses; general-admission blocks with a count
// picker; Hold → countdown → Pay (checkout with one Idempotency-Key per hold,
// reused on retry) → the provider's hosted page (paymentUrl) → back here as
// /e/{event}/book?booking=<id> → "confirming your payment", the hold's
// countdown still running → polls the booking until CONFIRMED, FAILED or
// REFUNDED, said in plain words; a payment failed or cancelled while the
// hold lasts shows the hold again, with Pay. The access token comes from
// sessionStorage (stored by the waiting room); the gateway's cookie works
// too.
//
// The server renders the page in the fan's language with the event, its
// venue and showtimes (<option data-title data-starts-at>) and the currency
// (main[data-currency]); prices come with each seat map answer.
//
// Stable hooks for end-to-end tests (the map's own are in seatmap.js):
//   main[data-phase]          loading|choose|held|paying|done|ended (checkout.js's states)
//   #event-name               the event's name
//   #showtime-line            the showtime shown: #st-title, #st-when (event's time zone), #st-venue
//   #showtime                 <select> of showtimes (#showtime-picker hidden when only one)
//   #seat-price               "Seats: $15.00 each"
//   #selection-total          what the choice costs
//   #held-total, #pay         what the hold costs; "Pay $39.00"
//   #selected-count           "3 of 8 places chosen"; data-count="3"
//   #hold, #clear             hold the chosen places / clear the choice
//   #countdown                time left on the hold, m:ss; data-remaining-ms
//   #pay, #release            checkout / release the hold
//   #pay-points               paying with points (and the balance): shown when the fan's
//                             place is an account's (GET /wallet answered)
//   #message                  what just happened: "Someone just took F5 and F6 — pick
//                             other seats", "Your hold expired…", "Sold out…",
//                             "Your admission ended — back to the line"; data-kind="info|error"
//   #booking-id               the booking's short reference; data-id = its id
//   #booking-status           the status in words; data-status=PENDING|CONFIRMED|FAILED|REFUNDED
//   #receipt                  what was bought: #receipt-event, -when, -where, -places, -total
//   #again                    choose again after a failed payment (or a hold that ran out)
//   #pay-link                 back to the provider's page while the booking is PENDING
//   #access-left              time left of the admission
//   #back-to-line, #back-link shown when the admission ended

import { api, Waiter, retryAfterMs, eventFromPath, NetworkError } from './api.js';
import { $, setText, show, mmss } from './ui.js';
import { t, price, when, count } from './i18n.js';
import { MAX_PLACES, describe, reference } from './places.js';
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
  stTitle: document.getElementById('st-title'),
  stWhen: document.getElementById('st-when'),
  stPast: document.getElementById('st-past'),
  seatPrice: $('seat-price'),
  message: $('message'),
  backToLine: $('back-to-line'),
  backLink: $('back-link'),
  choose: $('choose'),
  chooseTitle: $('choose-title'),
  nothing: $('nothing-left'),
  nothingTitle: $('nothing-title'),
  nothingDetail: $('nothing-detail'),
  mapHelp: $('map-help'),
  scrollHint: $('map-scroll-hint'),
  legend: $('legend'),
  mapScroll: $('map-scroll'),
  ga: $('ga'),
  selectionBox: $('selection-box'),
  selectedCount: $('selected-count'),
  selection: $('selection'),
  selectionTotal: $('selection-total'),
  hold: $('hold'),
  clear: $('clear'),
  held: $('held'),
  heldTitle: $('held-title'),
  countdown: $('countdown'),
  heldSummary: $('held-summary'),
  heldTotal: $('held-total'),
  pay: $('pay'),
  payPoints: $('pay-points'),
  release: $('release'),
  result: $('result'),
  resultTitle: $('result-title'),
  bookingId: $('booking-id'),
  bookingStatus: $('booking-status'),
  receipt: $('receipt'),
  receiptEvent: $('receipt-event'),
  receiptWhen: $('receipt-when'),
  receiptPlaces: $('receipt-places'),
  receiptTotal: $('receipt-total'),
  resultDetail: $('result-detail'),
  again: $('again'),
  payLink: $('pay-link'),
};

const event = eventFromPath(location.pathname);
const enc = event ? encodeURIComponent(event) : '';
const waiter = new Waiter();
const pass = new Pass(event);

const currency = ui.main.dataset.currency || '';

// The page's own state: which showtime is shown, and the seat map refresh.
const page = {
  showtimes: [], // [{id, title, startsAt, past}] from the server's <option>s
  showtimeId: null,
  loading: false,
  refreshTimer: 0,
  nothingLeft: false, // the showtime has no place to choose: say so, not a map of crosses
  told: '', // what a booking being paid last said in #message (said once, not every poll)
  balance: null, // the account's points (GET /wallet), null: no account, no paying with points
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

// returnedBooking is the booking the payment provider sent the fan back
// with (?booking=<id>), if the page was opened so.
function returnedBooking() {
  const id = new URL(location.href).searchParams.get('booking') || '';
  return /^[0-9a-f-]{36}$/.test(id) ? id : null;
}

// forgetReturn drops ?booking= once that booking is no longer the page's.
function forgetReturn() {
  const url = new URL(location.href);
  if (!url.searchParams.has('booking')) return;
  url.searchParams.delete('booking');
  history.replaceState(null, '', url);
}

// returned: the provider sent the fan back here, so the fan has paid or
// cancelled (no way back to its page is offered, then).
const returned = returnedBooking();

const flow = new BookingFlow({
  event,
  pass,
  waiter,
  returned,
  hooks: {
    changed,
    busy: renderSelection,
    say,
    reload: loadSeats,
    conflict: (what) => map.drop(what),
    leave: (url) => location.assign(url),
  },
});

// ---------- drawing the flow's state ----------

function renderPhase(p) {
  ui.main.dataset.phase = p;
  const empty = p === 'choose' && page.nothingLeft;
  show(ui.nothing, empty);
  show(ui.choose, (p === 'choose' && !empty) || p === 'held');
  show(ui.held, p === 'held' || p === 'paying');
  show(ui.result, p === 'paying' || p === 'done');
  const choosing = p === 'choose';
  show(ui.hold.parentElement, choosing);
  // While places are held, the choice is the hold: no "0 of 8 chosen".
  show(ui.selectionBox, choosing);
  ui.showtime.disabled = !choosing;
  ui.pay.disabled = p !== 'held';
  renderPoints(p);
  ui.release.disabled = p !== 'held';
  setText(ui.chooseTitle, choosing ? t('book.choose.title', { n: MAX_PLACES }) : t('book.choose.heldTitle'));
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
  if (ev !== 'pending' && ev !== 'booked' && ev !== 'refunding') renderPhase(state);
  if (state !== 'paying') show(ui.payLink, false);
  switch (ev) {
    case 'start':
      if (detail.lapsed) say(t('book.expired'), 'error');
      break;
    case 'held': {
      const what = renderHeld();
      say(t('book.say.held', { what }));
      ui.heldTitle.focus();
      ui.held.scrollIntoView({ block: 'nearest' });
      break;
    }
    case 'resumeHold':
      renderHeld();
      break;
    case 'pay':
      showBooking(null, t('book.result.starting'));
      renderReceipt(flow.hold);
      break;
    case 'booked':
      showBooking('PENDING', t('book.result.toProvider'));
      renderReceipt({ ...flow.booking });
      break;
    case 'resumeBooking':
    case 'pending':
      paying(detail);
      break;
    case 'refunding':
      refunding(detail.booking);
      break;
    case 'unpaid':
      forgetReturn();
      renderHeld();
      ui.heldTitle.focus();
      break;
    case 'expired':
      forgetReturn();
      say(t('book.expired'), 'error');
      break;
    case 'settled':
      finished(detail);
      break;
    case 'unknown':
      showBooking(ui.bookingStatus.dataset.status || 'PENDING', t('book.result.unknown'));
      setText(ui.resultDetail, detail.words);
      say(detail.words, 'error');
      break;
    case 'again':
      forgetReturn();
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

// renderHeld draws the hold: its places, what they cost, and Pay with the
// amount on it; it returns the places in words.
function renderHeld() {
  const hold = flow.hold;
  const what = describe(hold.seats, hold.generalAdmission);
  setText(ui.heldSummary, what);
  const amount = Number.isFinite(hold.amountCents) ? price(hold.amountCents, currency) : '';
  setText(ui.heldTotal, amount);
  show(ui.heldTotal.parentElement, Boolean(amount));
  setText(ui.pay, amount ? t('book.pay', { amount }) : t('book.payPlain'));
  renderPoints(flow.state);
  return what;
}

// renderPoints offers to pay with points (the balance on the button) to a fan whose place is
// an account's (the wallet answered), enabled while the hold is held and
// the balance covers it (1 point = 1 minor unit of the currency).
function renderPoints(p) {
  const has = page.balance !== null;
  show(ui.payPoints, has);
  if (!has) return;
  setText(ui.payPoints, t('book.payPoints', { balance: count(page.balance) }));
  const cost = flow.hold && Number.isFinite(flow.hold.amountCents) ? flow.hold.amountCents : 0;
  ui.payPoints.disabled = p !== 'held' || page.balance < cost;
}

// loadWallet asks for the account's points; a fan without an account (403)
// or a pass that no longer works is offered none.
async function loadWallet() {
  try {
    const r = await api('GET', '/api/v1/booking/wallet', { token: pass.token });
    page.balance = r.ok && Number.isFinite(r.data.balance) ? r.data.balance : null;
  } catch {
    page.balance = null;
  }
  renderPoints(flow.state);
}

async function payWithPoints() {
  const balance = await flow.payPoints();
  if (Number.isFinite(balance)) {
    page.balance = balance;
    say(t('book.pointsPaid', { balance: count(balance) }));
    return;
  }
  if (flow.state === 'held') {
    await loadWallet();
    if (page.balance !== null) say(t('book.pointsShort', { balance: count(page.balance) }), 'error');
  }
}

// paying draws a booking that is still PENDING: "confirming" with the
// hold and its countdown while the hold lasts, and the way back to the
// provider's page; once the hold ran out, that a payment made is being
// refunded (no error: nothing is lost).
function paying(detail) {
  const booking = { ...flow.booking, ...(detail.booking || {}) };
  renderReceipt(booking);
  const lapsed = Boolean(detail.lapsed) && Boolean(detail.booking);
  if (lapsed) {
    showBooking('PENDING', t('book.result.lapsed'));
    setText(ui.resultDetail, t('book.detail.lapsed'));
    show(ui.held, false);
    if (page.told !== 'lapsed') say(t('book.detail.lapsed'));
    page.told = 'lapsed';
  } else {
    showBooking('PENDING', t('book.result.confirming'));
    setText(ui.resultDetail, t('book.detail.confirming'));
    show(ui.held, Boolean(flow.hold));
    if (flow.hold) renderHeld();
    if (ui.message.dataset.kind === 'net') say(t('book.result.confirming'));
  }
  show(ui.again, lapsed);
  // Not back from the provider (the fan came back by other means before
  // deciding): the way to its page again.
  const url = flow.booking && flow.booking.paymentUrl;
  const offer = Boolean(url) && !lapsed && !(returned && returned === flow.booking.bookingId);
  if (offer) ui.payLink.href = url;
  show(ui.payLink, offer);
}

// refunding: a payment that came after the hold ran out; the money is on
// its way back (REFUNDED once the provider says so).
function refunding(booking) {
  renderReceipt({ ...flow.booking, ...booking });
  showBooking('FAILED', t('book.result.refunding'));
  setText(ui.bookingStatus, t('book.status.REFUNDING'));
  setText(ui.resultDetail, t('book.detail.refunding'));
  show(ui.held, false);
  show(ui.payLink, false);
  show(ui.again, true);
  if (page.told !== 'refunding') say(t('book.say.refunding'));
  page.told = 'refunding';
}

function showBooking(status, title) {
  if (title) setText(ui.resultTitle, title);
  const id = flow.booking ? flow.booking.bookingId : '';
  setText(ui.bookingId, id ? reference(id) : '');
  ui.bookingId.dataset.id = id;
  show(ui.bookingId.closest('div'), Boolean(id));
  ui.bookingStatus.dataset.status = status || '';
  setText(ui.bookingStatus, status ? t(`book.status.${status}`) : '');
}

// renderReceipt says what is being bought: the event, the showtime and
// when, the places, the amount. b is a hold or a booking (the answer's
// title, startsAt and amountCents win over what the page knew).
function renderReceipt(b) {
  if (!b) return;
  const st = page.showtimes.find((x) => x.id === String(b.showtimeId)) || {};
  const title = b.title || st.title || '';
  setText(ui.receiptEvent, title ? `${ui.name.textContent} · ${title}` : ui.name.textContent);
  setText(ui.receiptWhen, when(b.startsAt || st.startsAt) || '');
  setText(ui.receiptPlaces, describe(b.seats, b.generalAdmission));
  setText(ui.receiptTotal, Number.isFinite(b.amountCents) ? price(b.amountCents, currency) : '');
}

function finished({ status, booking }) {
  clearTimeout(page.refreshTimer);
  showBooking(status);
  renderReceipt(booking);
  show(ui.again, status !== 'CONFIRMED');
  switch (status) {
    case 'CONFIRMED':
      setText(ui.resultTitle, t('book.result.confirmed'));
      setText(ui.resultDetail, t('book.detail.confirmed'));
      say(t('book.say.confirmed'));
      break;
    case 'REFUNDED':
      // Nothing was lost: the money went back. Told, not shown as an error.
      setText(ui.resultTitle, t('book.result.refunded'));
      setText(ui.resultDetail, t('book.detail.refunded'));
      say(t('book.say.refunded'));
      break;
    default:
      setText(ui.resultTitle, t('book.result.failed'));
      setText(ui.resultDetail, t('book.detail.failed'));
      say(t('book.say.failed'), 'error');
  }
  ui.resultTitle.focus();
}

function admissionEnded(hadToken) {
  clearTimeout(page.refreshTimer);
  show(ui.accessLeft, false);
  ui.backLink.href = `/e/${enc}`;
  show(ui.backToLine, true);
  say(hadToken ? t('book.ended.admission') : t('book.ended.notYet'), 'error');
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
  setText(ui.selectedCount, t('book.chosen', { n, max: MAX_PLACES }));
  const { seats, ga } = map.choice();
  setText(ui.selection, describe(seats, ga));
  const prices = map.prices;
  const total = n && prices.known() ? price(prices.total(seats, ga), prices.currency) : '';
  setText(ui.selectionTotal, total);
  show(ui.selectionTotal.parentElement, Boolean(total));
  setText(ui.seatPrice, prices.known() && map.seats.size ? t('book.seatPrice', { price: price(prices.seat, prices.currency) }) : '');
  const choosing = flow.state === 'choose';
  ui.hold.disabled = !choosing || n === 0 || flow.busy;
  ui.clear.disabled = !choosing || n === 0;
  setText(ui.hold, n ? t('book.hold', { n }) : t('book.holdPlain'));
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
        renderNothingLeft(r.data);
        return true;
      case 401:
        flow.end();
        return false;
      case 403:
        say(t('book.wrongShowtime'), 'error');
        return true;
      case 404:
        say(t('book.noShowtime'), 'error');
        return true;
      case 429:
        scheduleRefresh(retryAfterMs(r));
        return true;
      default:
        throw new NetworkError(`HTTP ${r.status}`);
    }
  } catch {
    say(t('book.reconnecting'), 'net');
    ui.message.dataset.kind = 'net';
    return true;
  } finally {
    page.loading = false;
  }
}

// renderNothingLeft tells a fan who is choosing that this showtime has no
// place left instead of showing a map of crosses: sold out (every place
// booked), or taken for now (others hold the last ones: they come back if
// not paid for, and the map keeps refreshing).
function renderNothingLeft(d) {
  const seats = Array.isArray(d.seats) ? d.seats : [];
  const blocks = Array.isArray(d.generalAdmission) ? d.generalAdmission : [];
  const free = seats.some((s) => s.status === 'AVAILABLE') || blocks.some((b) => b.available > 0);
  const was = page.nothingLeft;
  page.nothingLeft = !free;
  if (!free) {
    // A block says only what is left, not whether the rest is held or sold.
    const held = seats.some((s) => s.status === 'HELD') || (blocks.length > 0 && seats.length === 0);
    const kind = held ? 'allHeld' : 'soldout';
    ui.nothing.dataset.kind = kind;
    setText(ui.nothingTitle, t(`book.${kind}.title`));
    setText(ui.nothingDetail, t(`book.${kind}.detail`));
  }
  if (was !== page.nothingLeft && flow.state === 'choose') renderPhase(flow.state);
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
  // While places are held the hold's own clock is the one that matters
  // (the admission is stretched to cover it): one timer, not two.
  if (pass.expiresAt && (p === 'loading' || p === 'choose')) {
    const left = Date.parse(pass.expiresAt) - Date.now();
    if (Number.isFinite(left)) {
      show(ui.accessLeft, true);
      setText(ui.accessLeft, left > 0 ? t('book.accessLeft', { time: mmss(left) }) : t('book.accessEnded'));
      ui.accessLeft.classList.toggle('urgent', left <= 60000);
    }
  } else {
    show(ui.accessLeft, false);
  }
}

// ---------- start ----------

// readShowtimes takes the showtimes the server rendered into the picker.
function readShowtimes() {
  return [...ui.showtime.options].map((o) => ({
    id: o.value,
    title: o.dataset.title || '',
    startsAt: o.dataset.startsAt || '',
    past: o.dataset.past === 'true',
  }));
}

function showtimeOf(id) {
  return page.showtimes.find((x) => x.id === String(id)) || null;
}

// renderShowtime says which showtime the map is for, and when, in the
// event's time zone; a showtime that has begun says so.
function renderShowtime() {
  const st = showtimeOf(page.showtimeId);
  if (!st) return;
  ui.showtime.value = st.id;
  if (ui.stTitle) setText(ui.stTitle, st.title);
  if (ui.stWhen) {
    ui.stWhen.setAttribute('datetime', st.startsAt);
    setText(ui.stWhen, when(st.startsAt) || '');
  }
  if (ui.stPast) show(ui.stPast, st.past);
}

function wire() {
  map.wire();
  ui.hold.addEventListener('click', () => flow.take(page.showtimeId, map.choice()));
  ui.clear.addEventListener('click', () => map.clear());
  ui.pay.addEventListener('click', () => flow.pay());
  ui.payPoints.addEventListener('click', () => payWithPoints());
  ui.release.addEventListener('click', async () => {
    if (flow.state !== 'held') return;
    ui.release.disabled = true;
    ui.pay.disabled = true;
    ui.payPoints.disabled = true;
    if (!(await flow.release()) && flow.state === 'held') {
      ui.release.disabled = false;
      ui.pay.disabled = false;
      renderPoints(flow.state);
    }
  });
  ui.again.addEventListener('click', () => flow.again());
  ui.showtime.addEventListener('change', async () => {
    if (flow.state !== 'choose') return;
    page.showtimeId = ui.showtime.value;
    map.switchTo(page.showtimeId, (showtimeOf(page.showtimeId) || {}).title);
    renderShowtime();
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
    fail(t('book.fail.noEvent'));
    return;
  }
  ui.backLink.href = `/e/${enc}`;
  map.legend();
  wire();
  setInterval(() => {
    flow.clock();
    tick();
  }, 1000);

  page.showtimes = readShowtimes();
  const wanted = new URL(location.href).searchParams.get('showtime');
  const ids = page.showtimes.map((x) => x.id);
  page.showtimeId =
    (flow.booking && String(flow.booking.showtimeId)) ||
    (flow.hold && String(flow.hold.showtimeId)) ||
    (wanted && ids.includes(wanted) ? wanted : null) ||
    ids[0] ||
    null;
  if (!page.showtimeId) {
    fail(t('book.fail.noShowtime'));
    return;
  }
  map.switchTo(page.showtimeId, (showtimeOf(page.showtimeId) || {}).title);
  renderShowtime();
  flow.resume();
  tick();
  loadWallet();
  // Back from the provider the map is not shown (and a booking confirmed
  // meanwhile freed the fan's place: the map would answer 401).
  if (flow.state !== 'choose' && flow.state !== 'held') return;
  if (await loadSeats()) {
    if (flow.state === 'choose') scheduleRefresh(REFRESH_MS);
  }
}

main();
