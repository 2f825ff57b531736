// book.js: the booking page (GET /e/{event}/book).
//
// Seat map as inline SVG from GET /showtimes/{id}/seats, refreshed every few
// seconds while the fan chooses; general-admission blocks with a count
// picker; Hold → countdown → Pay (checkout with one Idempotency-Key per hold,
// reused on retry) → "processing payment" → polls the booking until
// CONFIRMED or FAILED. The access token comes from sessionStorage (stored by
// the waiting room); the gateway's cookie works too.
//
// Seat states are told apart by colour AND shape, for colour-blind fans:
// available = white with a green outline, empty; mine = solid blue with a
// check mark; held by someone else = amber with diagonal hatching; sold =
// dark grey with a cross.
//
// Stable hooks for end-to-end tests:
//   main[data-phase]          loading|choose|held|paying|done|ended
//   #event-name               the event's name
//   #showtime                 <select> of showtimes (#showtime-picker hidden when only one)
//   #seatmap                  the <svg>; data-showtime="<id>"
//   [data-seat="F5"]          a seat (<g>): data-state="available|mine|held|sold",
//                             role=checkbox, aria-checked, aria-label "Row F seat 5, available";
//                             click, or focus + Enter/Space, toggles it
//   [data-ga="FLOOR"]         a general-admission count <input type=number>
//   [data-ga-inc="FLOOR"], [data-ga-dec="FLOOR"]   its + and − buttons
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

import {
  api,
  store,
  Waiter,
  retryAfterMs,
  backoffMs,
  serverSkewMs,
  newKey,
  eventFromPath,
  NetworkError,
} from './api.js';
import { $, h, s, setText, show, mmss, listWords, clock } from './ui.js';

// MAX_PLACES mirrors booking.max_seats_per_hold's default; the server has the
// last word (422 too_many_seats) if an operator set it lower.
const MAX_PLACES = 8;
const REFRESH_MS = 4000;
const BOOKING_POLL_MS = 1500;

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

const S = {
  phase: 'loading',
  token: null,
  tokenExpiresAt: null,
  showtimes: [],
  showtimeId: null,
  seats: new Map(), // code → {code,row,number,status}
  rows: [], // [{row, seats:[codes in number order]}]
  mapKey: '', // which layout the SVG was built for
  ga: [], // [{code,capacity,available}]
  gaKey: '',
  selected: new Set(),
  gaCount: new Map(),
  focusCode: null,
  hold: null, // {holdId, expiresAt, seats, generalAdmission, showtimeId, idemKey, skew}
  booking: null, // {bookingId, showtimeId, seats, generalAdmission}
  gen: 0, // bumped when a hold starts or ends: stale seat maps are dropped
  loading: false,
  busy: false, // a hold request is in flight (or we were told to wait)
  refreshTimer: 0,
  warned: false,
};

// ---------- messages and phases ----------

function say(text, kind = 'info') {
  ui.message.dataset.kind = kind;
  // The same words again (a second conflict) must still be heard.
  if (ui.message.textContent === text) ui.message.textContent = '';
  setText(ui.message, text);
}

function setPhase(p) {
  S.phase = p;
  ui.main.dataset.phase = p;
  show(ui.choose, p === 'choose' || p === 'held');
  show(ui.held, p === 'held' || p === 'paying');
  show(ui.result, p === 'paying' || p === 'done');
  const choosing = p === 'choose';
  show(ui.hold.parentElement, choosing);
  ui.showtime.disabled = !choosing;
  ui.pay.disabled = p !== 'held';
  ui.release.disabled = p !== 'held';
  for (const el of ui.ga.querySelectorAll('input, button')) el.disabled = !choosing;
  setText(ui.chooseTitle, choosing ? `Pick up to ${MAX_PLACES} places` : 'Your places on the map');
  show(ui.mapHelp, choosing);
  if (S.seats.size) renderSeats();
  renderGA();
  renderSelection();
  tick();
  if (choosing) scheduleRefresh(REFRESH_MS);
}

function admissionEnded() {
  const hadToken = Boolean(S.token);
  clearTimeout(S.refreshTimer);
  store.access.clear(event);
  store.hold.clear(event);
  S.hold = null;
  setPhase('ended');
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

// ---------- seat map ----------

const CELL = 30;
const SEAT = 24;
const LABEL_W = 26;
const TOP = 54;

const MARKS = {
  available: '',
  mine: 'M6 12.5 L10.5 17 L18 7.5',
  held: 'M3 13 L13 3 M3 21 L21 3 M11 21 L21 11',
  sold: 'M7 7 L17 17 M17 7 L7 17',
};

const STATE_LABEL = {
  available: 'available',
  mine: 'selected',
  held: 'held by someone else',
  sold: 'sold',
};

function rowOrder(a, b) {
  return a.length - b.length || (a < b ? -1 : a > b ? 1 : 0);
}

function seatView(code) {
  const seat = S.seats.get(code);
  if (S.hold && S.hold.showtimeId === S.showtimeId && (S.hold.seats || []).includes(code)) return 'mine';
  if (S.phase === 'choose' && S.selected.has(code)) return 'mine';
  if (!seat) return 'sold';
  if (seat.status === 'AVAILABLE') return 'available';
  if (seat.status === 'HELD') return 'held';
  return 'sold';
}

function seatLabel(code, view) {
  const seat = S.seats.get(code);
  let state = STATE_LABEL[view];
  if (view === 'mine' && S.phase !== 'choose') state = 'held for you';
  return `Row ${seat.row} seat ${seat.number}, ${state}`;
}

function seatShape(view) {
  return [
    s('rect', { class: 'seat-base', x: 0, y: 0, width: SEAT, height: SEAT, rx: 6 }),
    s('path', { class: 'seat-mark', d: MARKS[view] || 'M0 0' }),
  ];
}

function buildMap() {
  const maxNum = Math.max(1, ...[...S.seats.values()].map((x) => x.number));
  const width = LABEL_W * 2 + maxNum * CELL;
  const height = TOP + S.rows.length * CELL + 6;
  const stageWord = S.ga.length ? 'STAGE' : 'SCREEN';
  const st = S.showtimes.find((x) => String(x.id) === String(S.showtimeId));
  const svg = s('svg', {
    id: 'seatmap',
    viewBox: `0 0 ${width} ${height}`,
    role: 'group',
    'aria-label': `Seat map${st && st.title ? ` for ${st.title}` : ''}. The ${stageWord.toLowerCase()} is at the top; rows run from ${S.rows[0] ? S.rows[0].row : ''} nearest it.`,
    dataset: { showtime: String(S.showtimeId) },
  });
  // Keep seats at least ~24 CSS px on a phone (the map then scrolls
  // sideways) and stop small maps from blowing up on a desktop. CSSOM writes
  // are allowed under style-src 'self'; style attributes are not.
  svg.style.minWidth = `${Math.round((width * 24) / CELL)}px`;
  svg.style.maxWidth = `${Math.round(width * 1.35)}px`;

  const stageX = LABEL_W + maxNum * CELL * 0.15;
  const stageW = maxNum * CELL * 0.7;
  svg.append(
    s(
      'g',
      { class: 'stage', 'aria-hidden': 'true' },
      s('rect', { x: stageX, y: 4, width: stageW, height: 22, rx: 4 }),
      s('text', { x: stageX + stageW / 2, y: 19.5, 'text-anchor': 'middle' }, stageWord),
    ),
  );
  const nums = s('g', { class: 'col-labels', 'aria-hidden': 'true' });
  for (let n = 1; n <= maxNum; n += 1) {
    if (n === 1 || n % 5 === 0 || n === maxNum) {
      nums.append(s('text', { x: LABEL_W + (n - 1) * CELL + CELL / 2, y: TOP - 8, 'text-anchor': 'middle' }, String(n)));
    }
  }
  svg.append(nums);

  S.rows.forEach((r, i) => {
    const y = TOP + i * CELL;
    const g = s('g', { class: 'row', role: 'group', 'aria-label': `Row ${r.row}` });
    g.append(
      s('text', { class: 'row-label', x: LABEL_W / 2, y: y + CELL / 2 + 4.5, 'text-anchor': 'middle', 'aria-hidden': 'true' }, r.row),
      s('text', { class: 'row-label', x: width - LABEL_W / 2, y: y + CELL / 2 + 4.5, 'text-anchor': 'middle', 'aria-hidden': 'true' }, r.row),
    );
    for (const code of r.seats) {
      const seat = S.seats.get(code);
      const x = LABEL_W + (seat.number - 1) * CELL + (CELL - SEAT) / 2;
      const seatEl = s(
        'g',
        {
          class: 'seat',
          role: 'checkbox',
          tabindex: '-1',
          transform: `translate(${x} ${y + (CELL - SEAT) / 2})`,
          dataset: { seat: code },
        },
        s('rect', { class: 'seat-hit', x: -3, y: -3, width: SEAT + 6, height: SEAT + 6, rx: 8 }),
        ...seatShape('available'),
        s('rect', { class: 'seat-focus', x: -3, y: -3, width: SEAT + 6, height: SEAT + 6, rx: 8 }),
      );
      g.append(seatEl);
    }
    svg.append(g);
  });
  ui.mapScroll.replaceChildren(svg);
  // On a narrow screen the map scrolls sideways: start at its middle, under
  // the screen/stage, and say that there is more to either side.
  const overflow = ui.mapScroll.scrollWidth - ui.mapScroll.clientWidth;
  ui.mapScroll.scrollLeft = overflow > 0 ? overflow / 2 : 0;
  show(ui.scrollHint, overflow > 8);
}

function renderSeats() {
  const svg = document.getElementById('seatmap');
  if (!svg) return;
  const readOnly = S.phase !== 'choose';
  let focusable = null;
  for (const el of svg.querySelectorAll('[data-seat]')) {
    const code = el.dataset.seat;
    const view = seatView(code);
    if (el.dataset.state !== view) {
      el.dataset.state = view;
      el.querySelector('.seat-mark').setAttribute('d', MARKS[view] || 'M0 0');
    }
    const label = seatLabel(code, view);
    if (el.getAttribute('aria-label') !== label) el.setAttribute('aria-label', label);
    el.setAttribute('aria-checked', view === 'mine' ? 'true' : 'false');
    const disabled = readOnly || view === 'held' || view === 'sold';
    el.setAttribute('aria-disabled', disabled ? 'true' : 'false');
    if (code === S.focusCode) focusable = el;
  }
  // Roving tabindex: one Tab stop for the whole map, arrows inside it.
  if (!focusable) {
    focusable =
      svg.querySelector('[data-seat][data-state="mine"]') ||
      svg.querySelector('[data-seat][data-state="available"]') ||
      svg.querySelector('[data-seat]');
    if (focusable) S.focusCode = focusable.dataset.seat;
  }
  for (const el of svg.querySelectorAll('[data-seat][tabindex="0"]')) if (el !== focusable) el.setAttribute('tabindex', '-1');
  if (focusable) focusable.setAttribute('tabindex', '0');
}

function focusSeat(code) {
  const el = ui.mapScroll.querySelector(`[data-seat="${CSS.escape(code)}"]`);
  if (!el) return;
  S.focusCode = code;
  renderSeats();
  el.focus();
}

function neighbour(code, key) {
  const seat = S.seats.get(code);
  if (!seat) return null;
  const ri = S.rows.findIndex((r) => r.row === seat.row);
  const row = S.rows[ri];
  const i = row.seats.indexOf(code);
  switch (key) {
    case 'ArrowLeft':
      return row.seats[i - 1] || null;
    case 'ArrowRight':
      return row.seats[i + 1] || null;
    case 'Home':
      return row.seats[0];
    case 'End':
      return row.seats[row.seats.length - 1];
    case 'ArrowUp':
    case 'ArrowDown': {
      const other = S.rows[ri + (key === 'ArrowUp' ? -1 : 1)];
      if (!other) return null;
      let best = null;
      let bestD = Infinity;
      for (const c of other.seats) {
        const d = Math.abs(S.seats.get(c).number - seat.number);
        if (d < bestD) {
          best = c;
          bestD = d;
        }
      }
      return best;
    }
    default:
      return null;
  }
}

function totalPlaces() {
  let n = S.selected.size;
  for (const v of S.gaCount.values()) n += v;
  return n;
}

function toggle(code) {
  const seat = S.seats.get(code);
  if (!seat) return;
  S.focusCode = code;
  if (S.phase !== 'choose') {
    say('Release your hold first to change seats.');
    return;
  }
  const view = seatView(code);
  if (view === 'mine') {
    S.selected.delete(code);
  } else if (view === 'available') {
    if (totalPlaces() >= MAX_PLACES) {
      say(`You can choose up to ${MAX_PLACES} places.`, 'error');
      return;
    }
    S.selected.add(code);
  } else {
    say(`${code} is ${view === 'held' ? 'held by someone else' : 'sold'}.`);
    return;
  }
  renderSeats();
  renderGA();
  renderSelection();
}

// ---------- general admission ----------

function buildGA() {
  ui.ga.replaceChildren(
    h('h3', {}, 'Standing / general admission'),
    ...S.ga.map((b) => {
      const labelId = `ga-label-${b.code}`;
      return h(
        'div',
        { class: 'ga-block', dataset: { gaBlock: b.code } },
        h(
          'div',
          { class: 'ga-info' },
          h('span', { class: 'ga-name', id: labelId }, b.code),
          h('span', { class: 'ga-avail' }),
        ),
        h(
          'div',
          { class: 'stepper' },
          h('button', { type: 'button', class: 'secondary step', 'aria-label': `One fewer ${b.code}`, dataset: { gaDec: b.code } }, '−'),
          h('input', {
            type: 'number',
            inputmode: 'numeric',
            min: 0,
            value: 0,
            'aria-labelledby': labelId,
            dataset: { ga: b.code },
          }),
          h('button', { type: 'button', class: 'secondary step', 'aria-label': `One more ${b.code}`, dataset: { gaInc: b.code } }, '+'),
        ),
      );
    }),
  );
}

function gaRoom(code) {
  const b = S.ga.find((x) => x.code === code);
  const mine = S.gaCount.get(code) || 0;
  const left = MAX_PLACES - (totalPlaces() - mine);
  return Math.max(0, Math.min(b ? b.available : 0, left));
}

function renderGA() {
  show(ui.ga, S.ga.length > 0);
  const choosing = S.phase === 'choose';
  for (const b of S.ga) {
    const block = ui.ga.querySelector(`[data-ga-block="${CSS.escape(b.code)}"]`);
    if (!block) continue;
    const soldOut = b.available <= 0;
    block.dataset.soldOut = soldOut ? 'true' : 'false';
    setText(block.querySelector('.ga-avail'), soldOut ? 'Sold out' : `${b.available.toLocaleString()} of ${b.capacity.toLocaleString()} left`);
    const input = block.querySelector('[data-ga]');
    const n = S.gaCount.get(b.code) || 0;
    const max = gaRoom(b.code);
    input.max = String(max);
    if (document.activeElement !== input || !choosing) input.value = String(n);
    input.disabled = !choosing || (soldOut && n === 0);
    block.querySelector('[data-ga-dec]').disabled = !choosing || n <= 0;
    block.querySelector('[data-ga-inc]').disabled = !choosing || n >= max;
  }
}

function setGA(code, n) {
  const max = gaRoom(code);
  const want = Number.isFinite(n) ? Math.floor(n) : 0;
  const v = Math.max(0, Math.min(want, max));
  if (want > max) {
    const b = S.ga.find((x) => x.code === code);
    if (b && b.available < want) say(`Only ${b.available} left in ${code}.`);
    else say(`You can choose up to ${MAX_PLACES} places.`, 'error');
  }
  if (v) S.gaCount.set(code, v);
  else S.gaCount.delete(code);
  renderGA();
  renderSelection();
}

// ---------- selection summary ----------

function describe(seats, ga) {
  const parts = [];
  if (seats && seats.length) parts.push(listWords([...seats].sort(seatSort)));
  for (const [code, n] of Object.entries(ga || {})) if (n > 0) parts.push(`${n} × ${code}`);
  return parts.join(' · ');
}

function seatSort(a, b) {
  const x = S.seats.get(a);
  const y = S.seats.get(b);
  if (!x || !y) return a < b ? -1 : 1;
  return rowOrder(x.row, y.row) || x.number - y.number;
}

function renderSelection() {
  const n = totalPlaces();
  ui.selectedCount.dataset.count = String(n);
  setText(ui.selectedCount, `${n} of ${MAX_PLACES} places chosen`);
  setText(ui.selection, describe([...S.selected], Object.fromEntries(S.gaCount)));
  ui.hold.disabled = S.phase !== 'choose' || n === 0 || S.busy;
  ui.clear.disabled = S.phase !== 'choose' || n === 0;
  setText(ui.hold, n ? `Hold ${n} place${n === 1 ? '' : 's'}` : 'Hold these places');
}

// ---------- loading the map ----------

function applySeats(d) {
  const seats = Array.isArray(d.seats) ? d.seats : [];
  S.seats = new Map(seats.map((x) => [x.code, x]));
  const byRow = new Map();
  for (const x of seats) {
    if (!byRow.has(x.row)) byRow.set(x.row, []);
    byRow.get(x.row).push(x);
  }
  S.rows = [...byRow.keys()].sort(rowOrder).map((row) => ({
    row,
    seats: byRow
      .get(row)
      .sort((a, b) => a.number - b.number)
      .map((x) => x.code),
  }));
  S.ga = Array.isArray(d.generalAdmission) ? d.generalAdmission : [];

  const mapKey = `${S.showtimeId}|${seats.map((x) => x.code).join(',')}|${S.ga.length > 0}`;
  if (mapKey !== S.mapKey) {
    S.mapKey = mapKey;
    buildMap();
  }
  const gaKey = `${S.showtimeId}|${S.ga.map((b) => b.code).join(',')}`;
  if (gaKey !== S.gaKey) {
    S.gaKey = gaKey;
    buildGA();
  }

  // What we chose may have gone to someone faster since: drop it and say so.
  if (S.phase === 'choose') {
    const taken = [...S.selected].filter((c) => !S.seats.has(c) || S.seats.get(c).status !== 'AVAILABLE');
    for (const c of taken) S.selected.delete(c);
    const notes = [];
    if (taken.length) notes.push(takenWords(taken));
    for (const b of S.ga) {
      const n = S.gaCount.get(b.code) || 0;
      if (n > b.available) {
        if (b.available > 0) S.gaCount.set(b.code, b.available);
        else S.gaCount.delete(b.code);
        notes.push(b.available > 0 ? `Only ${b.available} left in ${b.code}.` : `${b.code} just sold out.`);
      }
    }
    if (notes.length) say(notes.join(' '), 'error');
  }
  renderSeats();
  renderGA();
  renderSelection();
}

function takenWords(codes) {
  const list = listWords([...codes].sort(seatSort));
  return codes.length === 1
    ? `Someone just took ${list} — pick another seat.`
    : `Someone just took ${list} — pick other seats.`;
}

// loadSeats fetches the map; returns false when the page must stop.
async function loadSeats() {
  if (S.loading || !S.showtimeId) return true;
  S.loading = true;
  const gen = S.gen;
  const showtime = S.showtimeId;
  try {
    const r = await api('GET', `/api/v1/booking/showtimes/${encodeURIComponent(showtime)}/seats`, { token: S.token });
    if (gen !== S.gen || showtime !== S.showtimeId) return true; // a hold or a switch overtook this answer
    switch (r.status) {
      case 200:
        if (ui.message.dataset.kind === 'net') say('');
        applySeats(r.data);
        return true;
      case 401:
        admissionEnded();
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
    S.loading = false;
  }
}

function scheduleRefresh(ms) {
  clearTimeout(S.refreshTimer);
  S.refreshTimer = setTimeout(refresh, ms);
}

async function refresh() {
  if (S.phase !== 'choose') return;
  if (document.hidden || S.busy) {
    scheduleRefresh(REFRESH_MS);
    return;
  }
  const before = S.refreshTimer;
  const keepGoing = await loadSeats();
  // loadSeats may have rescheduled itself (429); otherwise keep the rhythm.
  if (keepGoing && S.phase === 'choose' && S.refreshTimer === before) scheduleRefresh(REFRESH_MS);
}

// ---------- hold, release, pay ----------

async function hold() {
  if (S.phase !== 'choose' || S.busy) return;
  const seats = [...S.selected].sort(seatSort);
  const ga = Object.fromEntries([...S.gaCount].filter(([, n]) => n > 0));
  if (!seats.length && !Object.keys(ga).length) return;
  const body = {};
  if (seats.length) body.seats = seats;
  if (Object.keys(ga).length) body.generalAdmission = ga;

  S.busy = true;
  S.gen += 1;
  renderSelection();
  say('Holding your places…');
  let r;
  try {
    r = await api('POST', `/api/v1/booking/showtimes/${encodeURIComponent(S.showtimeId)}/holds`, { body, token: S.token });
  } catch {
    // Not retried by itself: a hold is not idempotent, and one that did land
    // simply lapses at its expiry.
    S.busy = false;
    renderSelection();
    say("We couldn't reach the booking service. Check your connection and try again.", 'error');
    return;
  } finally {
    S.gen += 1;
  }
  S.busy = false;
  const d = r.data;
  // The gateway stretches the admission to cover the hold and hands out a
  // pass that lasts as long.
  const fresh = r.headers && r.headers.get('X-Waitroom-Access-Token');
  if (fresh) {
    S.token = fresh;
    S.tokenExpiresAt = r.headers.get('X-Waitroom-Access-Expires') || S.tokenExpiresAt;
    store.access.set(event, { token: S.token, expiresAt: S.tokenExpiresAt });
  }
  switch (r.status) {
    case 201:
    case 200:
      S.hold = {
        holdId: d.holdId,
        expiresAt: d.expiresAt,
        seats: Array.isArray(d.seats) ? d.seats : seats,
        generalAdmission: d.generalAdmission && typeof d.generalAdmission === 'object' ? d.generalAdmission : ga,
        showtimeId: S.showtimeId,
        idemKey: newKey(),
        skew: serverSkewMs(r),
      };
      store.hold.set(event, S.hold);
      S.selected.clear();
      S.gaCount.clear();
      S.warned = false;
      setPhase('held');
      tick();
      setText(ui.heldSummary, describe(S.hold.seats, S.hold.generalAdmission));
      say(`Held: ${describe(S.hold.seats, S.hold.generalAdmission)}. Pay before the timer runs out.`);
      ui.heldTitle.focus();
      ui.held.scrollIntoView({ block: 'nearest' });
      return;
    case 409:
      if (d.error === 'sold_out') {
        const block = d.block || '';
        if (block) S.gaCount.delete(block);
        say(block ? `Sold out: no places left in ${block}.` : 'Sold out.', 'error');
      } else {
        const taken = Array.isArray(d.seats) && d.seats.length ? d.seats : seats;
        for (const c of taken) S.selected.delete(c);
        say(takenWords(taken), 'error');
      }
      renderSelection();
      await loadSeats();
      return;
    case 422:
      say(d.message || `You can hold up to ${MAX_PLACES} places at once.`, 'error');
      break;
    case 429: {
      const ms = retryAfterMs(r);
      say(`Lots of people are booking right now. Try again in ${Math.ceil(ms / 1000)} seconds.`, 'error');
      S.busy = true;
      setTimeout(() => {
        S.busy = false;
        renderSelection();
      }, ms);
      break;
    }
    case 401:
      admissionEnded();
      return;
    case 403:
      say('This showtime is not part of this event.', 'error');
      break;
    default:
      say(d.message || "That didn't work. Please try again.", 'error');
  }
  renderSelection();
}

function dropHold() {
  S.hold = null;
  store.hold.clear(event);
  S.gen += 1;
}

async function holdExpired() {
  dropHold();
  setPhase('choose');
  say('Your hold expired — pick your seats again.', 'error');
  await loadSeats();
}

async function release() {
  if (!S.hold || S.phase !== 'held') return;
  ui.release.disabled = true;
  ui.pay.disabled = true;
  let r;
  try {
    r = await api('DELETE', `/api/v1/booking/holds/${encodeURIComponent(S.hold.holdId)}`, { token: S.token });
  } catch {
    ui.release.disabled = false;
    ui.pay.disabled = false;
    say("We couldn't reach the booking service to release. Try again; otherwise it ends by itself when the timer runs out.", 'error');
    return;
  }
  if (r.status === 401) {
    admissionEnded();
    return;
  }
  if (r.status !== 204 && r.status !== 404 && r.status !== 410 && !r.ok) {
    ui.release.disabled = false;
    ui.pay.disabled = false;
    say(r.data.message || "That didn't work. Please try again.", 'error');
    return;
  }
  dropHold();
  setPhase('choose');
  say('Released. Those places are free for others now.');
  await loadSeats();
}

async function pay() {
  if (!S.hold || S.phase !== 'held') return;
  const h0 = S.hold;
  setPhase('paying');
  showBooking(null, 'Starting payment…');
  let attempt = 0;
  for (;;) {
    let r = null;
    try {
      r = await api('POST', `/api/v1/booking/holds/${encodeURIComponent(h0.holdId)}/checkout`, {
        headers: { 'Idempotency-Key': h0.idemKey },
        token: S.token,
      });
    } catch {
      r = null;
    }
    if (r && (r.status === 201 || r.status === 200)) {
      S.booking = {
        bookingId: r.data.bookingId,
        showtimeId: h0.showtimeId,
        seats: h0.seats,
        generalAdmission: h0.generalAdmission,
      };
      store.booking.set(event, S.booking);
      showBooking('PENDING', 'Processing payment…');
      say('Processing payment…');
      pollBooking();
      return;
    }
    if (r && (r.status === 409 || r.status === 404)) {
      show(ui.result, false);
      await holdExpired();
      return;
    }
    if (r && r.status === 401) {
      admissionEnded();
      return;
    }
    if (r && r.status >= 400 && r.status < 500 && r.status !== 429) {
      setPhase('held');
      say(r.data.message || "We couldn't start the payment.", 'error');
      return;
    }
    // No answer, 429 or 5xx: retry with the same Idempotency-Key, which
    // returns the same booking if the first attempt did land.
    attempt += 1;
    if (attempt > 6) {
      setPhase('held');
      say("We couldn't start the payment. Press Pay again — you won't be charged twice.", 'error');
      return;
    }
    say('Reconnecting…', 'net');
    await waiter.sleep(r && r.status === 429 ? retryAfterMs(r) : backoffMs(attempt));
  }
}

function showBooking(status, title) {
  if (title) setText(ui.resultTitle, title);
  setText(ui.bookingId, S.booking ? S.booking.bookingId : '');
  ui.bookingStatus.dataset.status = status || '';
  setText(ui.bookingStatus, status || '');
}

async function pollBooking() {
  const id = S.booking && S.booking.bookingId;
  if (!id) return;
  const started = Date.now();
  let fails = 0;
  while (S.booking && S.booking.bookingId === id && (S.phase === 'paying' || S.phase === 'done')) {
    // Slower after a minute: the simulator answers in seconds, a real
    // provider may take much longer, and nothing is lost by asking less.
    let delay = Date.now() - started > 60000 ? 5000 : BOOKING_POLL_MS;
    try {
      const r = await api('GET', `/api/v1/booking/bookings/${encodeURIComponent(id)}`, { token: S.token });
      if (r.ok) {
        fails = 0;
        const st = r.data.status;
        if (st && st !== 'PENDING') {
          finish(st, r.data);
          return;
        }
        showBooking('PENDING', 'Processing payment…');
        if (ui.message.dataset.kind === 'net') say('Processing payment…');
      } else if (r.status === 401) {
        finishUnknown('Your turn to book ended before we could check the payment. If it went through, your booking stands.');
        return;
      } else if (r.status === 404) {
        finishUnknown("We can't find this booking.");
        return;
      } else if (r.status === 429) {
        delay = retryAfterMs(r);
      } else {
        throw new NetworkError(`HTTP ${r.status}`);
      }
    } catch {
      fails += 1;
      delay = backoffMs(fails);
      say('Reconnecting…', 'net');
    }
    await waiter.sleep(delay);
  }
}

function finish(status, d) {
  const seats = Array.isArray(d.seats) ? d.seats : S.booking.seats;
  const what = describe(seats, S.booking.generalAdmission);
  dropHold();
  clearTimeout(S.refreshTimer);
  setPhase('done');
  showBooking(status);
  show(ui.again, status !== 'CONFIRMED');
  switch (status) {
    case 'CONFIRMED':
      setText(ui.resultTitle, "You're booked!");
      setText(ui.resultDetail, `${what}. Keep your booking number: ${S.booking.bookingId}.`);
      say(`Booking ${S.booking.bookingId} is confirmed.`);
      break;
    case 'REFUNDED':
      setText(ui.resultTitle, 'Payment refunded');
      setText(ui.resultDetail, 'Your payment came in after your hold had run out, so it has been refunded and the places were released.');
      say('Your payment arrived too late and has been refunded.', 'error');
      store.booking.clear(event);
      break;
    default:
      setText(ui.resultTitle, 'Payment failed');
      setText(ui.resultDetail, "The payment didn't go through, so your places were released.");
      say("The payment didn't go through. Your places were released.", 'error');
      store.booking.clear(event);
  }
  ui.resultTitle.focus();
}

function finishUnknown(words) {
  dropHold();
  setPhase('done');
  showBooking(ui.bookingStatus.dataset.status || 'PENDING', 'Payment status unknown');
  setText(ui.resultDetail, words);
  say(words, 'error');
}

async function again() {
  S.booking = null;
  store.booking.clear(event);
  show(ui.again, false);
  setPhase('choose');
  say('');
  await loadSeats();
}

// ---------- clocks ----------

function tick() {
  if (S.hold && (S.phase === 'held' || S.phase === 'paying')) {
    const left = Date.parse(S.hold.expiresAt) - (Date.now() + (S.hold.skew || 0));
    if (Number.isFinite(left)) {
      setText(ui.countdown, mmss(left));
      ui.countdown.dataset.remainingMs = String(Math.max(0, Math.round(left)));
      ui.countdown.classList.toggle('urgent', left <= 60000);
      if (left <= 60000 && left > 0 && !S.warned && S.phase === 'held') {
        S.warned = true;
        say('One minute left to pay before your hold ends.');
      }
      // While paying, the server decides what a late payment means; only an
      // unpaid hold is dropped here.
      if (left <= 0 && S.phase === 'held') holdExpired();
    }
  }
  if (S.tokenExpiresAt && S.phase !== 'ended' && S.phase !== 'done') {
    const left = Date.parse(S.tokenExpiresAt) - Date.now();
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

function legend() {
  const items = [
    ['available', 'Available'],
    ['mine', 'Your seats'],
    ['held', 'Held by someone else'],
    ['sold', 'Sold'],
  ];
  ui.legend.replaceChildren(
    ...items.map(([view, words]) =>
      h(
        'li',
        {},
        s(
          'svg',
          { viewBox: '-2 -2 28 28', width: 22, height: 22, 'aria-hidden': 'true', focusable: 'false' },
          s('g', { class: 'seat', dataset: { state: view } }, ...seatShape(view)),
        ),
        words,
      ),
    ),
  );
}

function fillShowtimes() {
  ui.showtime.replaceChildren(
    ...S.showtimes.map((st) => {
      const when = clock(st.startsAt);
      const words = st.title ? (when && !String(st.title).includes(when) ? `${st.title} (${when})` : st.title) : when || `Showtime ${st.id}`;
      return h('option', { value: String(st.id) }, words);
    }),
  );
  ui.showtime.value = String(S.showtimeId);
  show(ui.picker, S.showtimes.length > 1);
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
  ui.mapScroll.addEventListener('click', (e) => {
    const el = e.target.closest('[data-seat]');
    if (!el) return;
    toggle(el.dataset.seat);
    el.focus();
  });
  ui.mapScroll.addEventListener('keydown', (e) => {
    const el = e.target.closest('[data-seat]');
    if (!el) return;
    if (e.key === 'Enter' || e.key === ' ') {
      e.preventDefault();
      toggle(el.dataset.seat);
      return;
    }
    const next = neighbour(el.dataset.seat, e.key);
    if (next) {
      e.preventDefault();
      focusSeat(next);
    }
  });
  ui.ga.addEventListener('click', (e) => {
    const inc = e.target.closest('[data-ga-inc]');
    const dec = e.target.closest('[data-ga-dec]');
    if (inc) setGA(inc.dataset.gaInc, (S.gaCount.get(inc.dataset.gaInc) || 0) + 1);
    if (dec) setGA(dec.dataset.gaDec, (S.gaCount.get(dec.dataset.gaDec) || 0) - 1);
  });
  ui.ga.addEventListener('change', (e) => {
    const input = e.target.closest('[data-ga]');
    if (input) setGA(input.dataset.ga, Number(input.value));
  });
  ui.hold.addEventListener('click', hold);
  ui.clear.addEventListener('click', () => {
    S.selected.clear();
    S.gaCount.clear();
    renderSeats();
    renderGA();
    renderSelection();
  });
  ui.pay.addEventListener('click', pay);
  ui.release.addEventListener('click', release);
  ui.again.addEventListener('click', again);
  ui.showtime.addEventListener('change', async () => {
    if (S.phase !== 'choose') return;
    S.showtimeId = ui.showtime.value;
    S.selected.clear();
    S.gaCount.clear();
    S.focusCode = null;
    S.gen += 1;
    const url = new URL(location.href);
    url.searchParams.set('showtime', S.showtimeId);
    history.replaceState(null, '', url);
    await loadSeats();
  });
  document.addEventListener('visibilitychange', () => {
    if (!document.hidden && S.phase === 'choose') scheduleRefresh(0);
  });
}

async function main() {
  if (!event) {
    setPhase('ended');
    say("This link doesn't name an event.", 'error');
    return;
  }
  const access = store.access.get(event);
  S.token = access && access.token ? access.token : null;
  S.tokenExpiresAt = access && access.expiresAt ? access.expiresAt : null;
  ui.backLink.href = `/e/${enc}`;
  legend();
  wire();
  setInterval(tick, 1000);

  const info = await loadEvent();
  if (!info) {
    setPhase('ended');
    say("We can't find this event.", 'error');
    return;
  }
  if (info.name) {
    setText(ui.name, info.name);
    document.title = `${info.name} · choose your seats`;
  }
  S.showtimes = Array.isArray(info.showtimes) ? info.showtimes : [];

  S.hold = store.hold.get(event);
  S.booking = store.booking.get(event);
  const wanted = new URL(location.href).searchParams.get('showtime');
  const ids = S.showtimes.map((x) => String(x.id));
  S.showtimeId =
    (S.booking && String(S.booking.showtimeId)) ||
    (S.hold && String(S.hold.showtimeId)) ||
    (wanted && (ids.includes(wanted) || !ids.length) ? wanted : null) ||
    ids[0] ||
    null;
  if (!S.showtimeId) {
    setPhase('ended');
    say('There are no showtimes on sale for this event.', 'error');
    return;
  }
  if (S.hold) S.hold.showtimeId = String(S.hold.showtimeId);
  fillShowtimes();

  if (S.booking) {
    setPhase('paying');
    showBooking('PENDING', 'Processing payment…');
    pollBooking();
  } else if (S.hold && Date.parse(S.hold.expiresAt) - (Date.now() + (S.hold.skew || 0)) > 0) {
    setPhase('held');
    setText(ui.heldSummary, describe(S.hold.seats, S.hold.generalAdmission));
  } else {
    if (S.hold) say('Your hold expired — pick your seats again.', 'error');
    dropHold();
    setPhase('choose');
  }
  tick();
  if (await loadSeats()) {
    if (S.phase === 'choose') scheduleRefresh(REFRESH_MS);
  }
}

main();
