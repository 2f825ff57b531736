// places.js: what the seat map (seatmap.js) and the booking flow
// (checkout.js) both speak of: how many places a fan may take, how seat codes
// sort, and how a set of places reads in a sentence.
//
// No DOM ids, no state.

import { listWords } from './ui.js';

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
  if (seats && seats.length) parts.push(listWords([...seats].sort(seatOrder)));
  for (const [code, n] of Object.entries(ga || {})) if (n > 0) parts.push(`${n} × ${code}`);
  return parts.join(' · ');
}

// takenWords tells the fan that someone was faster.
export function takenWords(codes) {
  const list = listWords([...codes].sort(seatOrder));
  return codes.length === 1
    ? `Someone just took ${list} — pick another seat.`
    : `Someone just took ${list} — pick other seats.`;
}
