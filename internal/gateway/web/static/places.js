// places.js: what the seat map (seatmap.js) and the booking flow
// (checkout.js) both speak of: how many places a fan may take, how seat codes
// sort, what places cost, how they read in a sentence, and the booking's
// short reference.
//
// No DOM ids, no state.

import { t, list } from './i18n.js';

// MAX_PLACES mirrors booking.max_seats_per_hold's default; the server has the
// last word (422 too_many_seats) if an operator set it lower.
export const MAX_PLACES = 8;

// rowOrder sorts row letters A…Z, then AA… (shorter first).
export function rowOrder(a, b) {
  return a.length - b.length || (a < b ? -1 : a > b ? 1 : 0);
}

// seatParts splits a seat code ("F12") into its row and number; null for a
// code that is not one.
export function seatParts(code) {
  const m = /^([A-Z]+)([1-9][0-9]*)$/.exec(String(code));
  return m ? { row: m[1], number: Number(m[2]) } : null;
}

// seatOrder sorts seat codes by row, then by number: F2 before F10.
export function seatOrder(a, b) {
  const x = seatParts(a);
  const y = seatParts(b);
  if (!x || !y) return a < b ? -1 : 1;
  return rowOrder(x.row, y.row) || x.number - y.number;
}

// describe reads seats and standing places as one line: "C5 and C6 · 1 × FLOOR".
export function describe(seats, ga) {
  const parts = [];
  if (seats && seats.length) parts.push(list([...seats].sort(seatOrder)));
  for (const [code, n] of Object.entries(ga || {})) if (n > 0) parts.push(t('places.standing', { n, code }));
  return parts.join(' · ');
}

// takenWords tells the fan that someone was faster.
export function takenWords(codes) {
  return t('book.taken', { n: codes.length, seats: list([...codes].sort(seatOrder)) });
}

// Prices of one showtime, from its seat map answer: every amount is in the
// currency's minor unit.
export class Prices {
  constructor(d = {}) {
    this.currency = d.currency || '';
    this.seat = Number.isFinite(d.priceCents) ? d.priceCents : null;
    this.blocks = new Map((Array.isArray(d.generalAdmission) ? d.generalAdmission : []).map((b) => [b.code, b.priceCents]));
  }

  known() {
    return Boolean(this.currency) && this.seat != null;
  }

  // total is what seats and standing places cost together.
  total(seats, ga) {
    let sum = (seats ? seats.length : 0) * (this.seat || 0);
    for (const [code, n] of Object.entries(ga || {})) sum += n * (this.blocks.get(code) || 0);
    return sum;
  }
}

// Crockford's base 32: no I, L, O or U, so a reference read out on the phone
// cannot be misheard as another.
const CROCKFORD = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';

// reference is the booking's short reference for people: the first 40 bits
// of its id in Crockford base 32, as XXXX-XXXX ("7F3A92C1…" → "FWX9-5G84").
// Support finds the booking from it (docs/BOOKING.md): decode to 10 hex
// digits h, then id::text LIKE 'hhhhhhhh-hh%'.
export function reference(id) {
  const hex = String(id || '')
    .replace(/-/g, '')
    .slice(0, 10);
  if (!/^[0-9a-f]{10}$/i.test(hex)) return String(id || '');
  let n = BigInt(`0x${hex}`);
  let out = '';
  for (let i = 0; i < 8; i += 1) {
    out = CROCKFORD[Number(n & 31n)] + out;
    n >>= 5n;
  }
  return `${out.slice(0, 4)}-${out.slice(4)}`;
}
