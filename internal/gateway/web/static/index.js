// index.js: the list of events on sale (GET /), refreshed every 15 s.
//
// Stable hooks for end-to-end tests:
//   #events                       the list; aria-busy="true" until the first load
//   [data-event="<id>"]           one event's item
//   [data-event="<id>"] .state    its state in words, data-state="prequeue|open|paused|passthrough|closed"
//   [data-event="<id>"] .waiting  how many are waiting
//   [data-event="<id>"] a.join    the link to /e/<id> (absent when closed)
//   #message                      load errors ("Can't reach…, retrying")

import { api, backoffMs, NetworkError } from './api.js';
import { $, h, setText, count, clock, STATE_WORDS } from './ui.js';

const REFRESH_MS = 15000;
const list = $('events');
const message = $('message');
let failures = 0;

function linkWords(state) {
  switch (state) {
    case 'prequeue':
      return 'Get in line early';
    case 'passthrough':
      return 'Book now';
    default:
      return 'Join the line';
  }
}

function detail(ev) {
  switch (ev.state) {
    case 'prequeue': {
      const at = clock(ev.opensAt);
      return at ? `The order will be drawn at ${at}.` : 'The order will be drawn when the sale opens.';
    }
    case 'paused':
      return 'The line is paused for a moment; you can still join.';
    case 'closed':
      return 'This sale has ended.';
    default:
      return null;
  }
}

function item(ev) {
  const state = STATE_WORDS[ev.state] || ev.state || 'Unknown';
  const waiting = Number.isFinite(ev.waiting) ? ev.waiting : null;
  return h(
    'li',
    { class: 'card event', dataset: { event: ev.id } },
    h('h2', { class: 'event-name' }, ev.name || ev.id),
    h(
      'p',
      { class: 'event-facts' },
      h('span', { class: 'state badge', dataset: { state: ev.state || '' } }, state),
      waiting == null
        ? null
        : h('span', { class: 'waiting' }, waiting === 1 ? '1 person waiting' : `${count(waiting)} people waiting`),
    ),
    detail(ev) ? h('p', { class: 'muted' }, detail(ev)) : null,
    ev.state === 'closed'
      ? null
      : h('a', { class: 'button join', href: `/e/${encodeURIComponent(ev.id)}` }, linkWords(ev.state)),
  );
}

async function load() {
  let delay = REFRESH_MS;
  try {
    const r = await api('GET', '/api/v1/events');
    if (r.status === 429) throw new NetworkError('rate limited');
    if (!r.ok) throw new NetworkError(`HTTP ${r.status}`);
    const events = Array.isArray(r.data.events) ? r.data.events : [];
    const focused = document.activeElement && document.activeElement.closest('[data-event]');
    const focusedId = focused ? focused.dataset.event : null;
    list.replaceChildren(
      ...(events.length ? events.map(item) : [h('li', { class: 'muted' }, 'Nothing is on sale right now.')]),
    );
    // Keep keyboard focus where it was across a refresh.
    if (focusedId) {
      const again = list.querySelector(`[data-event="${CSS.escape(focusedId)}"] a.join`);
      if (again) again.focus();
    }
    list.setAttribute('aria-busy', 'false');
    setText(message, '');
    failures = 0;
  } catch {
    failures += 1;
    delay = Math.max(backoffMs(failures), 2000);
    setText(message, `Can't reach the ticket service, retrying in ${Math.ceil(delay / 1000)} s…`);
  }
  setTimeout(load, delay);
}

load();
