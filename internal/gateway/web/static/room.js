// room.js: the waiting room (GET /e/{event}), over the page the server
// rendered (which works by itself without JavaScript: it refreshes).
//
// The fan's place is the room's SDK's (/sdk/waitroom.js, the same module
// apps use): it joins or resumes, pays a proof of work when the sale asks
// one, and polls until the fan is admitted, with no DOM. The page is
// roomview.js's: it draws each snapshot the SDK publishes (its hooks for
// end-to-end tests are listed there). This file ties the two together and
// to the tab: the event from the path, the query dropped from the address
// bar once read (?t=, ?moved=, ?from=), the status the server drew, a
// wake-up when the tab comes back or the network does (rather than at the
// end of a long backoff), the clock of the "updated" line, and the move on
// to booking (or back to the site that sent the fan) once admitted, with
// the pass kept for the booking page.
//
// A place opened here from another device (/e/{event}?t=…, which the server
// turns into the ticket cookie and ?moved=1; from another site, only once
// the fan said yes) is taken over: when the server marks the page
// data-moved (after a move of its own, never for a link to ?moved=1 from
// elsewhere), the SDK forgets the ticket this browser kept so that the
// cookie's is the one resumed.

import { Waitroom } from '/sdk/waitroom.js';
import { store, eventFromPath } from './api.js';
import { RoomView } from './roomview.js';

// How long the admitted screen shows before the booking page opens.
const TURN_PAUSE_MS = 1200;

const event = eventFromPath(location.pathname);
const view = new RoomView(event);
const page = view.page();
// A sale with access codes: the code form's field is the code every join
// sends; submitting it joins again with it (without JavaScript the form
// posts to /e/{event}/join).
const codeForm = document.getElementById('code-form');
const codeField = document.getElementById('code');
const room = new Waitroom({ event, returnTo: page.returnTo, code: () => (codeField ? codeField.value.trim() : '') });
room.on('change', (s, prev) => {
  view.render(s, prev);
  if (codeForm) codeForm.hidden = Boolean(s.ticket);
});
room.on('admitted', (s) => {
  if (s.pass.accessToken) store.access.set(event, { token: s.pass.accessToken, expiresAt: s.pass.expiresAt });
  // replace, not assign: Back from booking should not land on a page that
  // forwards again at once. A fan who came from a site behind the room goes
  // back there (returnUrl: the way back with its one-use token).
  setTimeout(() => location.replace(s.pass.returnUrl || `/e/${encodeURIComponent(event)}/book`), TURN_PAUSE_MS);
});
if (codeForm) {
  codeForm.addEventListener('submit', (e) => {
    e.preventDefault();
    room.rejoin();
  });
}

if (event) {
  if ([...new URLSearchParams(location.search).keys()].length) history.replaceState(null, '', location.pathname);
  view.wire({ leave: () => room.leave(), rejoin: () => room.rejoin() });
  document.addEventListener('visibilitychange', () => {
    if (!document.hidden) room.wake();
  });
  window.addEventListener('online', () => room.wake());
  setInterval(() => view.updated(room.snapshot), 1000);
}
if (page.moved) room.forget();
switch (page.status) {
  case 'left':
    // Left on the page without JavaScript: stay out until asked.
    view.ended({ status: 'left', info: null });
    break;
  case 'away':
    // The fan just stepped away (the server keeps the place and will
    // email): no polls from here. Opening the room again shows the place,
    // as any page load does.
    break;
  default:
    // None joins; any other (waiting, next, admitted, expired, …) joins
    // again, which resumes a live place (the same ticket).
    room.join({ start: page.from });
}
