// index.js: the list of events on sale (GET /). The server renders the list
// (it works without JavaScript); this keeps each event's state and line
// length current, every 15 s, and reloads the page when events were added
// or removed.
//
// Stable hooks for end-to-end tests:
//   #events                       the list; aria-busy="true" while it reloads
//   [data-event="<id>"]           one event's item
//   [data-event="<id>"] .state    its state in words, data-state="prequeue|open|auto|paused|passthrough|closed"
//   [data-event="<id>"] .waiting  how many are waiting
//   [data-event="<id>"] a.join    the link to /e/<id> (hidden when closed)
//   #message                      load errors ("Can't reach…, retrying")

import { api, backoffMs, NetworkError } from './api.js';
import { $, setText, show } from './ui.js';
import { t, clock } from './i18n.js';

const REFRESH_MS = 15000;
const list = $('events');
const message = $('message');
let failures = 0;

function detail(ev) {
  switch (ev.state) {
    case 'prequeue': {
      const at = clock(ev.opensAt);
      return at ? t('index.detail.prequeue', { at }) : t('index.detail.prequeueSoon');
    }
    case 'paused':
    case 'closed':
    case 'passthrough':
    case 'soldout':
      return t(`index.detail.${ev.state}`);
    default:
      return '';
  }
}

function update(item, ev) {
  const state = item.querySelector('.state');
  state.dataset.state = ev.state || '';
  setText(state, t(`state.${ev.state}`));
  if (Number.isFinite(ev.waiting)) setText(item.querySelector('.waiting'), t('index.waiting', { n: ev.waiting }));
  const d = item.querySelector('.detail');
  const words = detail(ev);
  setText(d, words);
  show(d, Boolean(words));
  const link = item.querySelector('a.join');
  show(link, ev.state !== 'closed' && ev.state !== 'soldout');
  setText(link, t(`index.join.${ev.state}`));
}

async function load() {
  let delay = REFRESH_MS;
  try {
    const r = await api('GET', '/api/v1/events');
    if (r.status === 429) throw new NetworkError('rate limited');
    if (!r.ok) throw new NetworkError(`HTTP ${r.status}`);
    const events = Array.isArray(r.data.events) ? r.data.events : [];
    const shown = [...list.querySelectorAll('[data-event]')].map((el) => el.dataset.event);
    if (shown.join(',') !== events.map((ev) => ev.id).join(',')) {
      // Events came or went (a config reload): the server draws them afresh.
      list.setAttribute('aria-busy', 'true');
      location.reload();
      return;
    }
    for (const ev of events) update(list.querySelector(`[data-event="${CSS.escape(ev.id)}"]`), ev);
    setText(message, '');
    failures = 0;
  } catch {
    failures += 1;
    delay = Math.max(backoffMs(failures), 2000);
    setText(message, t('index.retrying', { n: Math.ceil(delay / 1000) }));
  }
  setTimeout(load, delay);
}

setTimeout(load, REFRESH_MS);
