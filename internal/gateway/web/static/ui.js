// ui.js: small DOM and wording helpers shared by the pages. Everything that
// puts server text on the page goes through textContent (never innerHTML), so
// an event name can never become markup.
//
// No DOM ids of its own.

// $ returns the element with this id; a missing one is a bug in the page.
export function $(id) {
  const el = document.getElementById(id);
  if (!el) throw new Error(`missing #${id}`);
  return el;
}

// h builds an element: h('a', {href: '/x', class: 'y', dataset: {k: 'v'}}, 'text', child).
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  setAttrs(el, attrs);
  for (const c of children) {
    if (c == null || c === false) continue;
    el.append(c instanceof Node ? c : String(c));
  }
  return el;
}

export const SVG_NS = 'http://www.w3.org/2000/svg';

// s builds an SVG element the same way.
export function s(tag, attrs = {}, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  setAttrs(el, attrs);
  for (const c of children) {
    if (c == null || c === false) continue;
    el.append(c instanceof Node ? c : String(c));
  }
  return el;
}

function setAttrs(el, attrs) {
  for (const [k, v] of Object.entries(attrs)) {
    if (v == null || v === false) continue;
    if (k === 'dataset') Object.assign(el.dataset, v);
    else if (k === 'text') el.textContent = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
}

// setText changes an element's text only when it differs, so that live
// regions are not re-announced and layout is not redone for nothing.
export function setText(el, text) {
  const t = text == null ? '' : String(text);
  if (el.textContent !== t) el.textContent = t;
}

// show toggles the hidden attribute.
export function show(el, visible) {
  el.hidden = !visible;
}

// Announcer speaks through one polite live region. Saying the same words twice
// in a row would be dropped by screen readers, so it clears first.
export class Announcer {
  constructor(el) {
    this.el = el;
    this.last = '';
  }

  say(text) {
    if (!text || text === this.last) return;
    this.last = text;
    this.el.textContent = '';
    // A new text node in a later task is what screen readers reliably pick up.
    setTimeout(() => {
      this.el.textContent = text;
    }, 50);
  }
}

// count formats a whole number for people: 12,345.
export function count(n) {
  return Number.isFinite(n) ? Math.round(n).toLocaleString() : '–';
}

// etaWords turns seconds into the words a fan reads: "less than a minute",
// "about 4 minutes", "about 1 hour 15 minutes". null stays null (unknown).
export function etaWords(seconds) {
  if (seconds == null || !Number.isFinite(seconds)) return null;
  if (seconds < 60) return 'less than a minute';
  const min = Math.round(seconds / 60);
  if (min <= 1) return 'about a minute';
  if (min < 60) return `about ${min} minutes`;
  // Past an hour, quarter hours: more precision would be a false promise.
  const quarters = Math.round(seconds / 900) * 15;
  const hrs = Math.floor(quarters / 60);
  const rest = quarters % 60;
  if (hrs >= 24) return 'more than a day';
  const hw = hrs === 1 ? '1 hour' : `${hrs} hours`;
  return rest ? `about ${hw} ${rest} minutes` : `about ${hw}`;
}

// clock formats an ISO time in the fan's local time: "10:00" today,
// "Tue 1 Dec, 10:00" another day. null for a missing or bad time.
export function clock(iso) {
  if (!iso) return null;
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return null;
  const now = new Date();
  const sameDay = d.toDateString() === now.toDateString();
  const time = d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
  if (sameDay) return time;
  const day = d.toLocaleDateString([], { weekday: 'short', day: 'numeric', month: 'short' });
  return `${day}, ${time}`;
}

// mmss formats a duration as 9:05 (or 1:02:03 past an hour).
export function mmss(ms) {
  const t = Math.max(0, Math.ceil(ms / 1000));
  const hh = Math.floor(t / 3600);
  const m = Math.floor((t % 3600) / 60);
  const sec = String(t % 60).padStart(2, '0');
  return hh ? `${hh}:${String(m).padStart(2, '0')}:${sec}` : `${m}:${sec}`;
}

// listWords joins names for a sentence: "F5", "F5 and F6", "F5, F6 and F7".
export function listWords(items) {
  if (items.length <= 1) return items.join('');
  return `${items.slice(0, -1).join(', ')} and ${items[items.length - 1]}`;
}

// STATE_WORDS is how each event state reads on the pages.
export const STATE_WORDS = {
  prequeue: 'Opens soon',
  open: 'On sale',
  paused: 'Paused',
  passthrough: 'On sale, no wait',
  closed: 'Closed',
};
