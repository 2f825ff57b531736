// room.js: the waiting room (GET /e/{event}).
//
// Joins on load, or resumes: the ticket is kept in localStorage per event and
// sent back as X-Waitroom-Ticket, so a reload or a second tab keeps the same
// place. Then polls the ticket at the pollAfterMs the gateway asks for, and
// moves on to /e/{event}/book by itself once admitted (after storing the
// access token in sessionStorage). 429: waits Retry-After. No answer: backs
// off and says "reconnecting".
//
// Stable hooks for end-to-end tests:
//   #event-name     the event's name
//   #state          event state in words; data-state="prequeue|open|paused|passthrough|closed"
//   #state-detail   e.g. "The order will be drawn at 10:00." (local time)
//   #status         the fan's status in words; data-status="joining|waiting|next|admitted|
//                   not-open|left|expired|closed|unknown-event|error"
//   #position       place in line (1 = next in)
//   #ahead          people ahead
//   #eta            wait in words: "about 4 minutes", "less than a minute",
//                   "we'll tell you when the line opens"
//   #progress       <progress max=1000>: from the place at join to the front
//   #message        transient notes: "Reconnecting…", "Busy, retrying in 5 s"
//   #leave          "Leave the line" (shown while waiting)
//   #rejoin         "Join the line again" (shown after leaving, expiry, close)
//   #live           the polite live region (position by bucket, state changes)

import { api, store, Waiter, NetworkError, retryAfterMs, backoffMs, eventFromPath } from './api.js';
import { $, setText, show, count, etaWords, clock, Announcer, STATE_WORDS } from './ui.js';

const ui = {
  name: $('event-name'),
  state: $('state'),
  stateDetail: $('state-detail'),
  status: $('status'),
  position: $('position'),
  ahead: $('ahead'),
  eta: $('eta'),
  progress: $('progress'),
  message: $('message'),
  leave: $('leave'),
  rejoin: $('rejoin'),
};
const live = new Announcer($('live'));
const waiter = new Waiter();

const event = eventFromPath(location.pathname);
const enc = event ? encodeURIComponent(event) : '';

// Poll bounds: the gateway's pollAfterMs is obeyed, but a bad value must
// neither spin the page nor park it longer than a fan would tolerate.
const MIN_POLL_MS = 500;
const MAX_POLL_MS = 60000;
// The event itself (state, opensAt) changes rarely: refresh it at most this
// often, and never more often than every few polls, so a long line does not
// double the gateway's load.
const EVENT_REFRESH_MS = 30000;

let ticket = null; // the ticket this tab polls
let info = null; // GET /api/v1/events/{event}
let infoAt = 0;
let infoLoading = false;
let phase = 'join'; // join | poll
let run = 0; // bumped on leave/rejoin so an old loop stops
let failures = 0;
let lastBucket = null;
let lastEtaNull = null;

// Bucket bounds for announcing the place in line: a screen reader hears
// "within the first 100" once, not every step of a moving line.
const BUCKETS = [1, 2, 3, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 25000, 50000, 100000];

function bucketOf(pos) {
  for (const b of BUCKETS) if (pos <= b) return b;
  return Infinity;
}

function bucketWords(b) {
  if (b === 1) return "You're next in line.";
  if (b <= 3) return `You're number ${b} in line.`;
  if (b === Infinity) return null;
  return `You're now within the first ${count(b)} in line.`;
}

function setStatus(kind, words) {
  ui.status.dataset.status = kind;
  setText(ui.status, words);
}

function clearFigures() {
  setText(ui.position, '–');
  setText(ui.ahead, '–');
  setText(ui.eta, '–');
  ui.progress.value = 0;
}

function renderState() {
  if (!info) return;
  if (info.name) {
    setText(ui.name, info.name);
    document.title = `${info.name} · waiting room`;
  }
  const st = info.state || '';
  const before = ui.state.dataset.state;
  ui.state.dataset.state = st;
  setText(ui.state, STATE_WORDS[st] || st);
  let detail = '';
  switch (st) {
    case 'prequeue': {
      const at = clock(info.opensAt);
      detail = at
        ? `You're in the pre-queue: the order will be drawn at ${at}. Everyone here by then gets a random place.`
        : "You're in the pre-queue: the order will be drawn when the sale opens.";
      break;
    }
    case 'paused':
      detail = "The line is paused for a moment. You keep your place; we'll move on as soon as it restarts.";
      break;
    case 'closed':
      detail = 'This sale has ended.';
      break;
    case 'passthrough':
      detail = 'No waiting right now: you go straight to booking.';
      break;
    default:
      detail = '';
  }
  setText(ui.stateDetail, detail);
  if (before && before !== st) {
    if (st === 'paused') live.say('The line is paused. You keep your place.');
    else if (st === 'open' && (before === 'paused' || before === 'prequeue')) live.say('The line is moving.');
  }
}

async function loadInfo() {
  if (infoLoading) return;
  infoLoading = true;
  try {
    const r = await api('GET', `/api/v1/events/${enc}`);
    if (r.ok) {
      info = r.data;
      infoAt = Date.now();
      renderState();
    } else if (r.status === 404) {
      info = null;
      infoAt = Date.now();
    }
  } catch {
    // The poll loop reports connectivity; the state line just stays as it was.
  } finally {
    infoLoading = false;
  }
}

function maybeRefreshInfo(pollMs, etaNull) {
  const due = Date.now() - infoAt > Math.max(EVENT_REFRESH_MS, 3 * pollMs);
  // An ETA turning null (or back) means paused/resumed or opened: worth a
  // look at once, which is what the fan wants explained.
  const flipped = lastEtaNull !== null && etaNull !== lastEtaNull && Date.now() - infoAt > 3000;
  lastEtaNull = etaNull;
  if (due || flipped) loadInfo();
}

function pollDelay(ms) {
  const v = Number.isFinite(ms) ? ms : 2000;
  return Math.min(Math.max(v, MIN_POLL_MS), MAX_POLL_MS);
}

function renderWaiting(d) {
  const saved = store.ticket.get(event);
  const pos = Number(d.position);
  const ahead = Number.isFinite(d.ahead) ? d.ahead : Math.max(0, pos - 1);
  // The progress bar runs from the place at join to the front. In the
  // pre-queue later joiners can be drawn ahead of us, so the place can grow:
  // then the baseline grows with it rather than showing negative progress.
  const ours = saved && saved.ticket === ticket;
  let start = ours && Number.isFinite(saved.start) ? saved.start : pos;
  if (pos > start) {
    start = pos;
    if (ours) store.ticket.set(event, { ticket, start });
  }
  const frac = start > 1 ? (start - pos) / (start - 1) : 1;
  ui.progress.value = Math.round(Math.min(Math.max(frac, 0), 1) * 1000);
  ui.progress.setAttribute('aria-valuetext', `${Math.round(frac * 100)}% of the way to the front`);

  setText(ui.position, count(pos));
  setText(ui.ahead, count(ahead));
  const words = etaWords(d.etaSeconds);
  if (words) setText(ui.eta, words);
  else if (info && info.state === 'paused') setText(ui.eta, "paused, we'll tell you when the line moves again");
  else setText(ui.eta, "we'll tell you when the line opens");

  if (pos === 1) setStatus('next', "You're next!");
  else setStatus('waiting', "You're in line");
  show(ui.leave, true);
  ui.leave.disabled = false;
  show(ui.rejoin, false);

  const b = bucketOf(pos);
  if (lastBucket === null) {
    live.say(`You're in line. Place ${count(pos)}${words ? `, wait ${words}` : ''}.`);
  } else if (b < lastBucket) {
    const w = bucketWords(b);
    if (w) live.say(w);
  }
  lastBucket = b;
  maybeRefreshInfo(pollDelay(d.pollAfterMs), d.etaSeconds == null);
}

function admitted(d) {
  if (d.accessToken) store.access.set(event, { token: d.accessToken, expiresAt: d.expiresAt || null });
  setStatus('admitted', "It's your turn! Taking you to booking…");
  ui.progress.value = 1000;
  show(ui.leave, false);
  live.say("It's your turn. Taking you to booking.");
  // replace, not assign: Back from booking should not land on a page that
  // forwards again at once.
  location.replace(`/e/${enc}/book`);
}

function ended(kind) {
  clearFigures();
  show(ui.leave, false);
  show(ui.rejoin, true);
  setText(ui.message, '');
  switch (kind) {
    case 'left':
      setStatus('left', 'You left the line.');
      ui.rejoin.textContent = 'Join the line again';
      live.say('You left the line.');
      break;
    case 'expired':
      setStatus('expired', 'Your place in line expired.');
      setText(ui.message, 'Places expire when the page stops checking in for a while, or when a turn to book runs out.');
      ui.rejoin.textContent = 'Join the line again';
      live.say('Your place in line expired. You can join the line again.');
      break;
    case 'closed':
      setStatus('closed', 'The sale has closed (sold out or ended).');
      ui.rejoin.textContent = 'Check again';
      live.say('The sale has closed.');
      if (info) {
        info.state = 'closed';
        renderState();
      }
      break;
    default:
      break;
  }
}

function fatal(kind, words) {
  clearFigures();
  show(ui.leave, false);
  show(ui.rejoin, false);
  setStatus(kind, words);
  live.say(words);
}

function onTicket(d, sent) {
  if (!d.ticket && !(sent && d.status)) throw new NetworkError('join answer without a ticket');
  ticket = d.ticket || sent.ticket;
  const saved = store.ticket.get(event);
  const keep = saved && saved.ticket === ticket && Number.isFinite(saved.start);
  store.ticket.set(event, { ticket, start: keep ? saved.start : Number(d.position) || 1 });
  if (d.status === 'admitted') {
    admitted(d);
    return null;
  }
  renderWaiting(d);
  phase = 'poll';
  return pollDelay(d.pollAfterMs);
}

// join returns the next delay in ms, or null when the loop should stop.
async function join() {
  const sent = store.ticket.get(event);
  const headers = sent && sent.ticket ? { 'X-Waitroom-Ticket': sent.ticket } : {};
  const r = await api('POST', `/api/v1/events/${enc}/tickets`, { headers });
  switch (r.status) {
    case 200:
    case 201:
      setText(ui.message, '');
      return onTicket(r.data, sent);
    case 403: {
      // not_open: the waiting room itself opens later. Come back then
      // (checking at least every minute in case the schedule moves), with a
      // little jitter so not everyone arrives in the same millisecond.
      const at = clock(r.data.opensAt);
      setStatus('not-open', at ? `The waiting room opens at ${at}.` : "The waiting room isn't open yet.");
      setText(ui.message, 'Keep this page open: it joins the line by itself when the waiting room opens.');
      const until = Date.parse(r.data.opensAt || '') - Date.now();
      const base = Number.isFinite(until) ? Math.min(Math.max(until, 2000), 60000) : 30000;
      return base + Math.random() * 3000;
    }
    case 409:
      ended('closed');
      return null;
    case 404:
      fatal('unknown-event', "We can't find this event. Check the link, or pick an event from the list.");
      return null;
    case 429: {
      const ms = retryAfterMs(r);
      setText(ui.message, `Lots of people are joining right now. Trying again in ${Math.ceil(ms / 1000)} s…`);
      return ms;
    }
    case 400:
      // The stored ticket is not one the gateway accepts (malformed, or from
      // another deployment): forget it and join afresh.
      if (sent) {
        store.ticket.clear(event);
        return 0;
      }
      fatal('error', "Something went wrong joining the line. Please reload the page.");
      return null;
    default:
      throw new NetworkError(`HTTP ${r.status}`);
  }
}

// poll returns the next delay in ms, or null when the loop should stop.
async function poll() {
  // The fan may have left, or joined again, in another tab: follow it rather
  // than join behind their back.
  const saved = store.ticket.get(event);
  if (!saved || !saved.ticket) {
    ticket = null;
    ended('left');
    return null;
  }
  ticket = saved.ticket;
  const r = await api('GET', `/api/v1/events/${enc}/tickets/${encodeURIComponent(ticket)}`);
  switch (r.status) {
    case 200:
      setText(ui.message, '');
      if (r.data.status === 'admitted') {
        admitted(r.data);
        return null;
      }
      renderWaiting(r.data);
      return pollDelay(r.data.pollAfterMs);
    case 410:
      if (store.ticket.get(event)?.ticket === ticket) store.ticket.clear(event);
      ended(r.data.status === 'closed' ? 'closed' : 'expired');
      return null;
    case 400:
      if (store.ticket.get(event)?.ticket === ticket) store.ticket.clear(event);
      phase = 'join';
      return 0;
    case 404:
      fatal('unknown-event', "We can't find this event any more.");
      return null;
    case 429: {
      const ms = retryAfterMs(r);
      setText(ui.message, `Busy right now. Checking again in ${Math.ceil(ms / 1000)} s…`);
      return ms;
    }
    default:
      throw new NetworkError(`HTTP ${r.status}`);
  }
}

async function loop(mine) {
  while (mine === run) {
    let delay;
    try {
      ui.message.dataset.kind = 'info';
      delay = phase === 'join' ? await join() : await poll();
      if (failures >= 2) live.say('Connected again.');
      failures = 0;
    } catch (err) {
      // Any failure here is treated like a lost connection: the place in
      // line is safe on the server, so the page only needs to come back.
      failures += 1;
      delay = backoffMs(failures);
      ui.message.dataset.kind = 'net';
      setText(ui.message, `Reconnecting… (trying again in ${Math.ceil(delay / 1000)} s)`);
      if (failures === 2) live.say('Connection lost. Reconnecting. You keep your place.');
      if (!(err instanceof NetworkError)) ui.message.dataset.error = String(err && err.message);
    }
    if (delay == null || mine !== run) return;
    if (delay > 0) await waiter.sleep(delay);
  }
}

function start() {
  run += 1;
  phase = 'join';
  lastBucket = null;
  failures = 0;
  waiter.wake();
  loop(run);
}

async function leave() {
  run += 1; // stop the loop first, so no poll races the DELETE
  waiter.wake();
  ui.leave.disabled = true;
  const saved = store.ticket.get(event);
  const gone = (saved && saved.ticket) || ticket;
  store.ticket.clear(event);
  ticket = null;
  if (gone) {
    try {
      await api('DELETE', `/api/v1/events/${enc}/tickets/${encodeURIComponent(gone)}`);
    } catch {
      // Unreachable: the place lapses by itself once nobody polls for it.
    }
  }
  ended('left');
  ui.rejoin.focus();
}

function rejoin() {
  store.ticket.clear(event);
  show(ui.rejoin, false);
  setStatus('joining', 'Joining the line…');
  setText(ui.message, '');
  start();
}

async function main() {
  if (!event) {
    fatal('unknown-event', "This link doesn't name an event. Pick one from the list.");
    return;
  }
  ui.leave.addEventListener('click', leave);
  ui.rejoin.addEventListener('click', rejoin);
  // Coming back to the tab, or back online: check now rather than at the end
  // of a long backoff.
  document.addEventListener('visibilitychange', () => {
    if (!document.hidden) waiter.wake();
  });
  window.addEventListener('online', () => waiter.wake());
  await loadInfo();
  if (!info && infoAt) {
    fatal('unknown-event', "We can't find this event. Check the link, or pick an event from the list.");
    return;
  }
  if (info && info.state === 'closed' && !store.ticket.get(event)) {
    // Nothing to join; "Check again" still asks the gateway, which decides.
    ended('closed');
    return;
  }
  start();
}

main();
