// room.js: the waiting room (GET /e/{event}), over the page the server
// rendered (which works by itself without JavaScript: it refreshes).
//
// Joins on load, or resumes: the ticket is kept in localStorage per event and
// sent back as X-Waitroom-Ticket, so a reload or a second tab keeps the same
// place. Then polls the ticket at the pollAfterMs the gateway asks for, and
// moves on to /e/{event}/book by itself once admitted (after storing the
// access token in sessionStorage). 429: waits Retry-After. No answer: backs
// off and says "reconnecting". A place opened here from another device
// (/e/{event}?t=…, which the server turns into the ticket cookie and
// ?moved=1; from another site, only once the fan said yes) is taken over:
// when the server marks the page data-moved (after a move of its own, never
// for a link to ?moved=1 from elsewhere), the ticket this browser kept is
// dropped so that the cookie's is the one resumed. A sale that asks a proof
// of work answers the first join 428 with a challenge: the page says it is
// checking the browser, solves it in workers (proof.js) and joins again with
// the proof; a browser without workers is told it cannot join this sale.
//
// Stable hooks for end-to-end tests:
//   #event-name     the event's name
//   #state          event state in words; data-state="prequeue|open|paused|passthrough|closed|soldout"
//   #state-detail   e.g. "The order will be drawn at 10:00." (the event's time zone)
//   #status         the fan's status in words; data-status="none|joining|checking|waiting|next|
//                   admitted|not-open|left|expired|closed|soldout|unknown-event|no-worker|error"
//   #position       place in line (1 = next in)
//   #ahead          people ahead
//   #eta            wait in words: "about 4 minutes", "less than a minute", …
//   #left           the places left to hold: "312 places left"
//   #progress       <progress max=1000>: from the fan's own place at join to the front
//   #progress-from  "You joined at place 230: 13% of the way to the front."
//   #updated        "Updated 5 s ago"
//   #message        transient notes: "Reconnecting…", "Busy, retrying in 5 s"
//   #leave          "Leave the line" (shown while waiting); opens #leave-dialog
//   #leave-dialog   "Leave the line? You will lose your place": #leave-yes, #leave-no
//   #rejoin         "Join the line again" (shown after leaving, expiry, close)
//   #turn, #to-booking  the admitted screen's way on
//   #share, #share-link, #share-qr  the place as a link and a QR code
//   #notify         asks for a browser notification at admission
//   #hint           what keeps (or lost) the place
//   #live           the polite live region (position by bucket, state changes)
//   main[data-moved]  set by the server after a move this site made: drop the kept ticket

import { api, store, Waiter, NetworkError, retryAfterMs, backoffMs, eventFromPath } from './api.js';
import { $, setText, show, Announcer } from './ui.js';
import { t, count, etaWords, clock } from './i18n.js';
import { EtaSmoother } from './eta.js';
import { canSolve, solve, ProofError } from './proof.js';

const ui = {
  main: $('main'),
  name: $('event-name'),
  state: $('state'),
  stateDetail: $('state-detail'),
  status: $('status'),
  waiting: $('waiting'),
  position: $('position'),
  ahead: $('ahead'),
  eta: $('eta'),
  left: $('left'),
  progress: $('progress'),
  progressFrom: $('progress-from'),
  updated: $('updated'),
  message: $('message'),
  turn: $('turn'),
  leave: $('leave'),
  leaveLine: $('leave').parentElement,
  leaveDialog: $('leave-dialog'),
  leaveYes: $('leave-yes'),
  leaveNo: $('leave-no'),
  rejoin: $('rejoin'),
  notify: $('notify'),
  share: $('share'),
  shareLink: $('share-link'),
  shareQR: $('share-qr'),
  copyLink: $('copy-link'),
  hint: $('hint'),
};
const live = new Announcer($('live'));
const waiter = new Waiter();
const smoother = new EtaSmoother();

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
// How long the admitted screen shows before the booking page opens.
const TURN_PAUSE_MS = 1200;

// The room's own state: which ticket this tab follows and how the loop goes.
const room = {
  ticket: null,
  info: null, // GET /api/v1/events/{event}
  infoAt: 0,
  infoLoading: false,
  phase: 'join', // join | poll
  run: 0, // bumped on leave/rejoin so an old loop stops
  failures: 0,
  lastBucket: null,
  lastEtaNull: null,
  updatedAt: 0, // when the last answer came
  proof: null, // X-Waitroom-Proof for the next join, once solved
  proofRounds: 0, // 428s in a row
};

// Bucket bounds for announcing the place in line: a screen reader hears
// "within the first 100" once, not every step of a moving line.
const BUCKETS = [1, 2, 3, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 25000, 50000, 100000];

function bucketOf(pos) {
  for (const b of BUCKETS) if (pos <= b) return b;
  return Infinity;
}

function bucketWords(b) {
  if (b === 1) return t('room.live.next');
  if (b <= 3) return t('room.live.number', { n: b });
  if (b === Infinity) return null;
  return t('room.live.within', { n: b });
}

function setStatus(kind, words) {
  ui.status.dataset.status = kind;
  setText(ui.status, words ?? t(`room.status.${kind}`));
}

function setHint(kind) {
  setText(ui.hint, t(`room.hint.${kind}`));
}

// inLine shows what belongs to a fan with a place: the figures, the way to
// another device, the leave button, the offer to notify.
function inLine(yes) {
  show(ui.waiting, yes);
  show(ui.share, yes && Boolean(ui.shareLink.getAttribute('href')));
  show(ui.leaveLine, yes);
  ui.leave.removeAttribute('aria-disabled');
  show(ui.notify, yes && 'Notification' in window && Notification.permission === 'default');
}

function renderState() {
  const info = room.info;
  if (!info) return;
  if (info.name) setText(ui.name, info.name);
  const st = info.state || '';
  const before = ui.state.dataset.state;
  ui.state.dataset.state = st;
  setText(ui.state, t(`state.${st}`));
  let detail = '';
  switch (st) {
    case 'prequeue': {
      const at = clock(info.opensAt);
      detail = at ? t('room.detail.prequeue', { at }) : t('room.detail.prequeueSoon');
      break;
    }
    case 'paused':
    case 'closed':
    case 'passthrough':
    case 'soldout':
      detail = t(`room.detail.${st}`);
      break;
    default:
      detail = '';
  }
  setText(ui.stateDetail, detail);
  if (before && before !== st) {
    if (st === 'paused') live.say(t('room.live.paused'));
    else if (st === 'open' && (before === 'paused' || before === 'prequeue')) live.say(t('room.live.moving'));
  }
}

async function loadInfo() {
  if (room.infoLoading) return;
  room.infoLoading = true;
  try {
    const r = await api('GET', `/api/v1/events/${enc}`);
    if (r.ok) {
      room.info = r.data;
      room.infoAt = Date.now();
      renderState();
    } else if (r.status === 404) {
      room.info = null;
      room.infoAt = Date.now();
    }
  } catch {
    // The poll loop reports connectivity; the state line just stays as it was.
  } finally {
    room.infoLoading = false;
  }
}

function maybeRefreshInfo(pollMs, etaNull) {
  const due = Date.now() - room.infoAt > Math.max(EVENT_REFRESH_MS, 3 * pollMs);
  // An ETA turning null (or back) means paused/resumed or opened: worth a
  // look at once, which is what the fan wants explained.
  const flipped = room.lastEtaNull !== null && etaNull !== room.lastEtaNull && Date.now() - room.infoAt > 3000;
  room.lastEtaNull = etaNull;
  if (due || flipped) loadInfo();
}

function pollDelay(ms) {
  const v = Number.isFinite(ms) ? ms : 2000;
  return Math.min(Math.max(v, MIN_POLL_MS), MAX_POLL_MS);
}

function renderUpdated() {
  if (!room.updatedAt || ui.waiting.hidden) return;
  const secs = Math.floor((Date.now() - room.updatedAt) / 1000);
  setText(ui.updated, secs < 3 ? t('room.updated.now') : t('room.updated.ago', { n: secs }));
}

function renderShare(start) {
  if (!room.ticket) return;
  const link = `${location.origin}/e/${enc}?t=${encodeURIComponent(room.ticket)}&from=${start}`;
  if (ui.shareLink.getAttribute('href') !== link) {
    ui.shareLink.href = link;
    setText(ui.shareLink, link);
    // The QR code is drawn by the gateway from the ticket cookie the join
    // just set; the query only makes a new place a new image.
    ui.shareQR.src = `/e/${enc}/qr.svg?from=${start}&v=${encodeURIComponent(room.ticket.slice(-8))}`;
    show(ui.shareQR, true);
  }
  show(ui.copyLink, Boolean(navigator.clipboard));
}

function renderWaiting(d) {
  const saved = store.ticket.get(event);
  const pos = Number(d.position);
  const ahead = Number.isFinite(d.ahead) ? d.ahead : Math.max(0, pos - 1);
  room.updatedAt = Date.now();
  // The progress bar runs from the fan's own place at join to the front. In
  // the pre-queue later joiners can be drawn ahead of us, so the place can
  // grow: then the baseline grows with it rather than showing negative
  // progress.
  const ours = saved && saved.ticket === room.ticket;
  let start = ours && Number.isFinite(saved.start) ? saved.start : pos;
  if (pos > start) {
    start = pos;
    if (ours) store.ticket.set(event, { ticket: room.ticket, start });
  }
  const frac = start > 1 ? (start - pos) / (start - 1) : 1;
  const pct = Math.round(Math.min(Math.max(frac, 0), 1) * 100);
  ui.progress.value = Math.round(Math.min(Math.max(frac, 0), 1) * 1000);
  ui.progress.setAttribute('aria-valuetext', t('room.progressValue', { pct }));
  setText(ui.progressFrom, t('room.progressFrom', { n: start, pct }));

  setText(ui.position, count(pos));
  setText(ui.ahead, count(ahead));
  const shown = smoother.update(pos, d.etaSeconds, Date.now());
  const words = etaWords(shown);
  if (words) setText(ui.eta, words);
  else if (room.info && room.info.state === 'paused') setText(ui.eta, t('room.eta.paused'));
  else setText(ui.eta, t('room.eta.unknown'));

  // The places left, as the booking core last told the line (absent until
  // it has).
  if (Number.isFinite(d.available)) {
    setText(ui.left, d.available > 0 ? t('room.left', { n: count(d.available) }) : t('room.leftNone'));
    show(ui.left, true);
  }
  if (pos === 1) setStatus('next');
  else setStatus('waiting');
  setHint('waiting');
  renderShare(start);
  inLine(true);
  show(ui.turn, false);
  show(ui.rejoin, false);
  renderUpdated();

  const b = bucketOf(pos);
  if (room.lastBucket === null) {
    live.say(words ? t('room.live.joinedEta', { n: pos, eta: words }) : t('room.live.joined', { n: pos }));
  } else if (b < room.lastBucket) {
    const w = bucketWords(b);
    if (w) live.say(w);
  }
  room.lastBucket = b;
  maybeRefreshInfo(pollDelay(d.pollAfterMs), d.etaSeconds == null);
}

function notifyTurn() {
  if (!('Notification' in window) || Notification.permission !== 'granted') return;
  try {
    const name = (room.info && room.info.name) || ui.name.textContent;
    new Notification(t('room.notification.title'), { body: t('room.notification.body', { event: name }), tag: `waitroom-${event}` });
  } catch {
    // Some phones only notify from a service worker: the title still says it.
  }
}

function admitted(d) {
  if (d.accessToken) store.access.set(event, { token: d.accessToken, expiresAt: d.expiresAt || null });
  smoother.reset();
  setStatus('admitted');
  inLine(false);
  show(ui.turn, true);
  setHint('admitted');
  setText(ui.message, '');
  document.title = t('room.turnTitle', { event: (room.info && room.info.name) || ui.name.textContent });
  live.say(t('room.live.admitted'));
  notifyTurn();
  // replace, not assign: Back from booking should not land on a page that
  // forwards again at once.
  setTimeout(() => location.replace(`/e/${enc}/book`), TURN_PAUSE_MS);
}

function ended(kind) {
  smoother.reset();
  inLine(false);
  show(ui.turn, false);
  show(ui.rejoin, true);
  setText(ui.message, '');
  setHint('ended');
  switch (kind) {
    case 'left':
      setStatus('left');
      setHint('left');
      ui.rejoin.textContent = t('room.rejoin');
      live.say(t('room.live.left'));
      break;
    case 'expired':
      setStatus('expired');
      setText(ui.message, t('room.msg.expired'));
      ui.rejoin.textContent = t('room.rejoin');
      live.say(t('room.live.expired'));
      break;
    case 'closed':
      setStatus('closed');
      ui.rejoin.textContent = t('room.checkAgain');
      live.say(t('room.live.closed'));
      if (room.info) {
        room.info.state = 'closed';
        renderState();
      }
      break;
    case 'soldout':
      // Nothing left to wait for: say so plainly, and stop (no polling, no
      // offer to join again).
      setStatus('soldout');
      setHint('soldout');
      setText(ui.message, t('room.msg.soldout'));
      show(ui.rejoin, false);
      live.say(t('room.live.soldout'));
      if (room.info) {
        room.info.state = 'soldout';
        renderState();
      }
      break;
    default:
      break;
  }
}

function fatal(kind) {
  inLine(false);
  show(ui.rejoin, false);
  const words = t(`room.status.${kind}`);
  setStatus(kind, words);
  live.say(words);
}

function onTicket(d, sent) {
  if (!d.ticket && !(sent && d.status)) throw new NetworkError('join answer without a ticket');
  room.ticket = d.ticket || sent.ticket;
  const saved = store.ticket.get(event);
  const keep = saved && saved.ticket === room.ticket && Number.isFinite(saved.start);
  const from = Number(ui.main.dataset.from);
  const start = keep ? saved.start : Math.max(Number(d.position) || 1, Number.isFinite(from) ? from : 0);
  store.ticket.set(event, { ticket: room.ticket, start });
  if (d.status === 'admitted') {
    admitted(d);
    return null;
  }
  renderWaiting(d);
  room.phase = 'poll';
  return pollDelay(d.pollAfterMs);
}

// noWorker: this browser cannot pay the sale's proof of work.
function noWorker() {
  inLine(false);
  show(ui.rejoin, false);
  setStatus('no-worker');
  setText(ui.message, t('room.msg.noWorker'));
  setText(ui.hint, ''); // "join to get your place" would promise what cannot be
  live.say(t('room.status.no-worker'));
}

// prove solves a 428's challenge for the next join and returns the delay
// before it (0: at once), or null when this browser cannot.
async function prove(d) {
  room.proofRounds += 1;
  if (!canSolve()) {
    noWorker();
    return null;
  }
  if (typeof d.challenge !== 'string' || !Number.isInteger(d.bits)) throw new NetworkError('428 without a challenge');
  const mine = room.run;
  setStatus('checking');
  setText(ui.message, t('room.msg.checking'));
  if (room.proofRounds === 1) live.say(t('room.live.checking'));
  try {
    const p = await solve(d.challenge, d.bits);
    if (mine !== room.run) return null;
    room.proof = p.header;
  } catch (err) {
    if (!(err instanceof ProofError)) throw err;
    noWorker();
    return null;
  }
  // A proof refused over and over (a clock far off, a proxy eating the
  // header) must not spin the fan's phone: after three, back off.
  return room.proofRounds > 3 ? backoffMs(room.proofRounds - 3) : 0;
}

// join returns the next delay in ms, or null when the loop should stop.
async function join() {
  const sent = store.ticket.get(event);
  const headers = sent && sent.ticket ? { 'X-Waitroom-Ticket': sent.ticket } : {};
  if (room.proof) {
    headers['X-Waitroom-Proof'] = room.proof;
    room.proof = null; // good for one join only
  }
  const r = await api('POST', `/api/v1/events/${enc}/tickets`, { headers });
  if (r.status !== 428) room.proofRounds = 0;
  switch (r.status) {
    case 200:
    case 201:
      setText(ui.message, '');
      return onTicket(r.data, sent);
    case 428:
      // proof_required: this sale asks a proof of work for a new place.
      return prove(r.data);
    case 403: {
      // not_open: the waiting room itself opens later. Come back then
      // (checking at least every minute in case the schedule moves), with a
      // little jitter so not everyone arrives in the same millisecond.
      const at = clock(r.data.opensAt);
      setStatus('not-open', at ? t('room.status.not-open', { at }) : t('room.status.not-open-soon'));
      setText(ui.message, t('room.msg.notOpen'));
      const until = Date.parse(r.data.opensAt || '') - Date.now();
      const base = Number.isFinite(until) ? Math.min(Math.max(until, 2000), 60000) : 30000;
      return base + Math.random() * 3000;
    }
    case 401:
      // account_required or invalid_account: the organiser's site signs the
      // fan in (cookie wr_u); there is nothing to retry until it has.
      setText(ui.message, t(r.data && r.data.error === 'invalid_account' ? 'room.notice.invalid_account' : 'room.notice.account_required'));
      return null;
    case 409:
      ended(r.data && r.data.error === 'sold_out' ? 'soldout' : 'closed');
      return null;
    case 404:
      fatal('unknown-event');
      return null;
    case 429: {
      const ms = retryAfterMs(r);
      setText(ui.message, t('room.msg.busyJoin', { n: Math.ceil(ms / 1000) }));
      return ms;
    }
    case 400:
      // The stored ticket is not one the gateway accepts (malformed, or from
      // another deployment): forget it and join afresh.
      if (sent) {
        store.ticket.clear(event);
        return 0;
      }
      fatal('error');
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
    room.ticket = null;
    ended('left');
    return null;
  }
  room.ticket = saved.ticket;
  const r = await api('GET', `/api/v1/events/${enc}/tickets/${encodeURIComponent(room.ticket)}`);
  switch (r.status) {
    case 200:
      setText(ui.message, '');
      if (r.data.status === 'admitted') {
        admitted(r.data);
        return null;
      }
      if (r.data.status === 'soldout') {
        ended('soldout');
        return null;
      }
      renderWaiting(r.data);
      return pollDelay(r.data.pollAfterMs);
    case 410:
      if (store.ticket.get(event)?.ticket === room.ticket) store.ticket.clear(event);
      ended(r.data.status === 'closed' ? 'closed' : 'expired');
      return null;
    case 400:
      if (store.ticket.get(event)?.ticket === room.ticket) store.ticket.clear(event);
      room.phase = 'join';
      return 0;
    case 404:
      fatal('unknown-event');
      return null;
    case 429: {
      const ms = retryAfterMs(r);
      setText(ui.message, t('room.msg.busy', { n: Math.ceil(ms / 1000) }));
      return ms;
    }
    default:
      throw new NetworkError(`HTTP ${r.status}`);
  }
}

async function loop(mine) {
  while (mine === room.run) {
    let delay;
    try {
      ui.message.dataset.kind = 'info';
      delay = room.phase === 'join' ? await join() : await poll();
      if (room.failures >= 2) live.say(t('room.live.back'));
      room.failures = 0;
    } catch (err) {
      // Any failure here is treated like a lost connection: the place in
      // line is safe on the server, so the page only needs to come back.
      room.failures += 1;
      delay = backoffMs(room.failures);
      ui.message.dataset.kind = 'net';
      setText(ui.message, t('room.msg.reconnecting', { n: Math.ceil(delay / 1000) }));
      if (room.failures === 2) live.say(t('room.live.lost'));
      if (!(err instanceof NetworkError)) ui.message.dataset.error = String(err && err.message);
    }
    if (delay == null || mine !== room.run) return;
    if (delay > 0) await waiter.sleep(delay);
  }
}

function start() {
  room.run += 1;
  room.phase = 'join';
  room.lastBucket = null;
  room.failures = 0;
  waiter.wake();
  loop(room.run);
}

async function leave() {
  room.run += 1; // stop the loop first, so no poll races the DELETE
  waiter.wake();
  const saved = store.ticket.get(event);
  const gone = (saved && saved.ticket) || room.ticket;
  store.ticket.clear(event);
  room.ticket = null;
  ui.shareLink.removeAttribute('href');
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
  setStatus('joining');
  setHint('none');
  setText(ui.message, '');
  start();
}

function wire() {
  // Leaving costs the place: ask once. Without JavaScript the same link
  // opens a page that asks.
  ui.leave.addEventListener('click', (e) => {
    e.preventDefault();
    if (typeof ui.leaveDialog.showModal !== 'function') {
      location.assign(ui.leave.href);
      return;
    }
    ui.leaveDialog.showModal();
    ui.leaveNo.focus();
  });
  ui.leaveNo.addEventListener('click', () => ui.leaveDialog.close());
  ui.leaveYes.addEventListener('click', () => {
    ui.leaveDialog.close();
    leave();
  });
  ui.rejoin.addEventListener('click', rejoin);
  ui.notify.addEventListener('click', async () => {
    try {
      await Notification.requestPermission();
    } catch {
      // refused or unsupported: nothing changes
    }
    show(ui.notify, Notification.permission === 'default');
    if (Notification.permission === 'granted') setText(ui.message, t('room.msg.notifyOn'));
  });
  ui.copyLink.addEventListener('click', async () => {
    try {
      await navigator.clipboard.writeText(ui.shareLink.href);
      setText(ui.message, t('room.share.copied'));
    } catch {
      setText(ui.message, t('room.share.copyFailed'));
    }
  });
  // Coming back to the tab, or back online: check now rather than at the end
  // of a long backoff.
  document.addEventListener('visibilitychange', () => {
    if (!document.hidden) waiter.wake();
  });
  window.addEventListener('online', () => waiter.wake());
  setInterval(renderUpdated, 1000);
}

async function main() {
  if (!event) {
    fatal('unknown-event');
    return;
  }
  const params = new URLSearchParams(location.search);
  if (ui.main.dataset.moved === 'true') {
    // A place carried here from another device by a move this site made:
    // the server set its ticket as the cookie; the ticket this browser kept
    // must not win over it. A link to ?moved=1 from elsewhere is not marked
    // so, and the fan's own ticket stays.
    store.ticket.clear(event);
  }
  if ([...params.keys()].length) history.replaceState(null, '', location.pathname);
  wire();
  if (ui.status.dataset.status === 'left') {
    // Left on the page without JavaScript: stay out until asked.
    ended('left');
    return;
  }
  if (ui.status.dataset.status === 'none') setStatus('joining');
  await loadInfo();
  if (!room.info && room.infoAt) {
    fatal('unknown-event');
    return;
  }
  if (room.info && room.info.state === 'closed' && !store.ticket.get(event)) {
    // Nothing to join; "Check again" still asks the gateway, which decides.
    ended('closed');
    return;
  }
  start();
}

main();
