// roomview.js: the waiting room's page (blocks-room.html) drawn from the
// line's snapshots (the SDK's Waitroom, /sdk/waitroom.js): the figures and
// words (the wait smoothed by eta.js), the live region, the notification at
// the fan's turn, the share link and its QR code, and the leave dialog. It
// fetches nothing and keeps no timers: room.js hands it every snapshot
// (render) and asks it each second to age the "updated" line (updated). The
// words are i18n.js's.
//
// Stable hooks for end-to-end tests:
//   #event-name     the event's name
//   #state          event state in words; data-state="prequeue|open|auto|paused|passthrough|closed|soldout"
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

import { $, setText, show, Announcer } from './ui.js';
import { t, count, etaWords, clock } from './i18n.js';
import { EtaSmoother } from './eta.js';

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

function seconds(ms) {
  return Math.ceil(ms / 1000);
}

// The notes a refused change's notice stands for (the room's error codes).
const NOTICES = {
  account_required: () => t('room.notice.account_required'),
  invalid_account: () => t('room.notice.invalid_account'),
  not_invited: () => t('room.notice.not_invited'),
  invitation_used: () => t('room.notice.invitation_used'),
  window_not_open: () => t('room.notice.window_not_open'),
  code_required: () => t('room.notice.code_required'),
  invalid_code: () => t('room.notice.invalid_code'),
  code_used: () => t('room.notice.code_used'),
};

export class RoomView {
  // event: the event id (null when the path names none).
  constructor(event) {
    this.event = event;
    this.enc = event ? encodeURIComponent(event) : '';
    this.ui = {
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
      toBooking: $('to-booking'),
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
    this.live = new Announcer($('live'));
    // The wait shown follows the room's estimates smoothly (eta.js).
    this.smoother = new EtaSmoother();
  }

  // page is what the server rendered for the line to start from.
  page() {
    const { main, status } = this.ui;
    return {
      status: status.dataset.status,
      from: Number(main.dataset.from),
      moved: main.dataset.moved === 'true',
      // The way back to the site behind the room that sent the fan here
      // (checked by the server), for the join to carry.
      returnTo: main.dataset.return || null,
    };
  }

  // wire hands the fan's asks to the line: leave() (a promise) and rejoin().
  wire({ leave, rejoin }) {
    const { ui } = this;
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
    ui.leaveYes.addEventListener('click', async () => {
      ui.leaveDialog.close();
      ui.shareLink.removeAttribute('href');
      await leave();
      ui.rejoin.focus();
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
  }

  // render draws snapshot s of the line, prev the one before it.
  render(s, prev) {
    const { ui, live } = this;
    // The message's kind: net while the last request got no answer, info
    // from the next one on.
    const kind = { trying: 'info', offline: 'net' }[s.change];
    if (kind && ui.message.dataset.kind !== kind) ui.message.dataset.kind = kind;
    switch (s.change) {
      case 'joining':
        // A place the server drew already is resumed without a word.
        if (ui.status.dataset.status === 'none') this.setStatus('joining');
        break;
      case 'rejoin':
        show(ui.rejoin, false);
        this.setStatus('joining');
        this.setHint('none');
        setText(ui.message, '');
        break;
      case 'info':
        this.renderState(s.info);
        break;
      case 'checking':
        this.setStatus('checking');
        setText(ui.message, t('room.msg.checking'));
        if (s.proofRounds === 1) live.say(t('room.live.checking'));
        break;
      case 'not-open': {
        const at = clock(s.opensAt);
        this.setStatus('not-open', at ? t('room.status.not-open', { at }) : t('room.status.not-open-soon'));
        setText(ui.message, t('room.msg.notOpen'));
        break;
      }
      case 'busy':
        setText(ui.message, t(s.next.action === 'join' ? 'room.msg.busyJoin' : 'room.msg.busy', { n: seconds(s.next.inMs) }));
        break;
      case 'refused':
        if (NOTICES[s.notice]) setText(ui.message, NOTICES[s.notice]());
        break;
      case 'waiting':
        setText(ui.message, '');
        this.renderWaiting(s, prev);
        break;
      case 'admitted':
        setText(ui.message, '');
        this.admitted(s);
        break;
      case 'left':
      case 'expired':
      case 'closed':
      case 'soldout':
        this.ended(s);
        break;
      case 'error':
        this.fatal(s.status);
        break;
      case 'no-worker':
        this.noWorker();
        break;
      case 'offline':
        setText(ui.message, t('room.msg.reconnecting', { n: seconds(s.next.inMs) }));
        if (s.failures === 2) live.say(t('room.live.lost'));
        if (s.error !== prev.error) ui.message.dataset.error = s.error;
        break;
      case 'back':
        if (prev.failures >= 2) live.say(t('room.live.back'));
        break;
      default:
        // trying, proved, forget, away, stopped: nothing new to show
        break;
    }
  }

  // updated ages the "updated" line of snapshot s.
  updated(s) {
    const { ui } = this;
    if (!s.updatedAt || ui.waiting.hidden) return;
    const secs = Math.floor((Date.now() - s.updatedAt) / 1000);
    setText(ui.updated, secs < 3 ? t('room.updated.now') : t('room.updated.ago', { n: secs }));
  }

  setStatus(kind, words) {
    this.ui.status.dataset.status = kind;
    setText(this.ui.status, words ?? t(`room.status.${kind}`));
  }

  setHint(kind) {
    setText(this.ui.hint, t(`room.hint.${kind}`));
  }

  // inLine shows what belongs to a fan with a place: the figures, the way to
  // another device, the leave button, the offer to notify.
  inLine(yes) {
    const { ui } = this;
    show(ui.waiting, yes);
    show(ui.share, yes && Boolean(ui.shareLink.getAttribute('href')));
    show(ui.leaveLine, yes);
    ui.leave.removeAttribute('aria-disabled');
    show(ui.notify, yes && 'Notification' in window && Notification.permission === 'default');
  }

  renderState(info) {
    const { ui, live } = this;
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
      else if ((st === 'open' || st === 'auto') && (before === 'paused' || before === 'prequeue')) live.say(t('room.live.moving'));
    }
  }

  renderShare(ticket, start) {
    const { ui } = this;
    if (!ticket) return;
    const link = `${location.origin}/e/${this.enc}?t=${encodeURIComponent(ticket)}&from=${start}`;
    if (ui.shareLink.getAttribute('href') !== link) {
      ui.shareLink.href = link;
      setText(ui.shareLink, link);
      // The QR code is drawn by the gateway from the ticket cookie the join
      // just set; the query only makes a new place a new image.
      ui.shareQR.src = `/e/${this.enc}/qr.svg?from=${start}&v=${encodeURIComponent(ticket.slice(-8))}`;
      show(ui.shareQR, true);
    }
    show(ui.copyLink, Boolean(navigator.clipboard));
  }

  renderWaiting(s, prev) {
    const { ui, live } = this;
    const { position: pos, ahead, etaSeconds, available, start } = s.place;
    const eta = this.smoother.update(pos, etaSeconds, s.updatedAt);
    const frac = start > 1 ? (start - pos) / (start - 1) : 1;
    const pct = Math.round(Math.min(Math.max(frac, 0), 1) * 100);
    ui.progress.value = Math.round(Math.min(Math.max(frac, 0), 1) * 1000);
    ui.progress.setAttribute('aria-valuetext', t('room.progressValue', { pct }));
    setText(ui.progressFrom, t('room.progressFrom', { n: start, pct }));

    setText(ui.position, count(pos));
    setText(ui.ahead, count(ahead));
    const words = etaWords(eta);
    if (words) setText(ui.eta, words);
    else if (s.info && s.info.state === 'paused') setText(ui.eta, t('room.eta.paused'));
    else setText(ui.eta, t('room.eta.unknown'));

    if (available != null) {
      setText(ui.left, available > 0 ? t('room.left', { n: count(available) }) : t('room.leftNone'));
      show(ui.left, true);
    }
    this.setStatus(s.status);
    this.setHint('waiting');
    this.renderShare(s.ticket, start);
    this.inLine(true);
    show(ui.turn, false);
    show(ui.rejoin, false);
    this.updated(s);

    // The first answer of a join says where the fan stands; after that only
    // a better bucket is news.
    const b = bucketOf(pos);
    if (!prev.place) {
      live.say(words ? t('room.live.joinedEta', { n: pos, eta: words }) : t('room.live.joined', { n: pos }));
    } else if (b < bucketOf(prev.place.position)) {
      const w = bucketWords(b);
      if (w) live.say(w);
    }
  }

  notifyTurn(name) {
    if (!('Notification' in window) || Notification.permission !== 'granted') return;
    try {
      new Notification(t('room.notification.title'), { body: t('room.notification.body', { event: name }), tag: `waitroom-${this.event}` });
    } catch {
      // Some phones only notify from a service worker: the title still says it.
    }
  }

  admitted(s) {
    const { ui, live } = this;
    const name = (s.info && s.info.name) || ui.name.textContent;
    this.smoother.reset();
    this.setStatus('admitted');
    this.inLine(false);
    show(ui.turn, true);
    if (s.pass.returnUrl) ui.toBooking.href = s.pass.returnUrl;
    this.setHint('admitted');
    setText(ui.message, '');
    document.title = t('room.turnTitle', { event: name });
    live.say(t('room.live.admitted'));
    this.notifyTurn(name);
  }

  ended(s) {
    const { ui, live } = this;
    this.smoother.reset();
    this.inLine(false);
    show(ui.turn, false);
    show(ui.rejoin, true);
    setText(ui.message, '');
    this.setHint('ended');
    switch (s.status) {
      case 'left':
        this.setStatus('left');
        this.setHint('left');
        ui.rejoin.textContent = t('room.rejoin');
        live.say(t('room.live.left'));
        break;
      case 'expired':
        this.setStatus('expired');
        setText(ui.message, t('room.msg.expired'));
        ui.rejoin.textContent = t('room.rejoin');
        live.say(t('room.live.expired'));
        break;
      case 'closed':
        this.setStatus('closed');
        ui.rejoin.textContent = t('room.checkAgain');
        live.say(t('room.live.closed'));
        this.renderState(s.info);
        break;
      case 'soldout':
        // Nothing left to wait for: say so plainly, and stop (no polling, no
        // offer to join again).
        this.setStatus('soldout');
        this.setHint('soldout');
        setText(ui.message, t('room.msg.soldout'));
        show(ui.rejoin, false);
        live.say(t('room.live.soldout'));
        this.renderState(s.info);
        break;
      default:
        break;
    }
  }

  fatal(kind) {
    this.inLine(false);
    show(this.ui.rejoin, false);
    const words = t(`room.status.${kind}`);
    this.setStatus(kind, words);
    this.live.say(words);
  }

  // noWorker: this browser cannot pay the sale's proof of work.
  noWorker() {
    const { ui } = this;
    this.inLine(false);
    show(ui.rejoin, false);
    this.setStatus('no-worker');
    setText(ui.message, t('room.msg.noWorker'));
    setText(ui.hint, ''); // "join to get your place" would promise what cannot be
    this.live.say(t('room.status.no-worker'));
  }
}
