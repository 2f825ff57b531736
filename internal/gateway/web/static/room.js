// room.js: the waiting room (GET /e/{event}), over the page the server
// rendered (which works by itself without JavaScript: it refreshes).
//
// The fan's place is line.js's: it joins or resumes, pays a proof of work
// when the sale asks one, polls, and moves on to /e/{event}/book once
// admitted, with no DOM. The page is roomview.js's: it draws each snapshot
// the line publishes (its hooks for end-to-end tests are listed there). This
// file ties the two together and to the tab: the event from the path, the
// query dropped from the address bar once read (?t=, ?moved=, ?from=), a
// wake-up when the tab comes back or the network does (rather than at the
// end of a long backoff), and the clock of the "updated" line.
//
// A place opened here from another device (/e/{event}?t=…, which the server
// turns into the ticket cookie and ?moved=1; from another site, only once
// the fan said yes) is taken over: when the server marks the page
// data-moved (after a move of its own, never for a link to ?moved=1 from
// elsewhere), the line drops the ticket this browser kept so that the
// cookie's is the one resumed.

import { api, store, Waiter, eventFromPath } from './api.js';
import { canSolve, solve } from './proof.js';
import { Line } from './line.js';
import { RoomView } from './roomview.js';

const event = eventFromPath(location.pathname);
const view = new RoomView(event);
// A sale with access codes: the code form's field is the code every join
// sends; submitting it joins again with it (without JavaScript the form
// posts to /e/{event}/join).
const codeForm = document.getElementById('code-form');
const codeField = document.getElementById('code');
const line = new Line({ event, api, store, waiter: new Waiter(), proof: { canSolve, solve }, code: () => (codeField ? codeField.value.trim() : '') });
line.subscribe((s, prev) => {
  view.render(s, prev);
  if (codeForm) codeForm.hidden = Boolean(s.ticket);
});
if (codeForm) {
  codeForm.addEventListener('submit', (e) => {
    e.preventDefault();
    line.rejoin();
  });
}

if (event) {
  if ([...new URLSearchParams(location.search).keys()].length) history.replaceState(null, '', location.pathname);
  view.wire({ leave: () => line.leave(), rejoin: () => line.rejoin() });
  document.addEventListener('visibilitychange', () => {
    if (!document.hidden) line.wake();
  });
  window.addEventListener('online', () => line.wake());
  setInterval(() => view.updated(line.snapshot), 1000);
}
line.start(view.page());
