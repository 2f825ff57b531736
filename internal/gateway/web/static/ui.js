// ui.js: small DOM helpers shared by the pages. Everything that puts server
// text on the page goes through textContent (never innerHTML), so an event
// name can never become markup. Words, numbers, prices and dates are
// i18n.js's.
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

// mmss formats a duration as 9:05 (or 1:02:03 past an hour).
export function mmss(ms) {
  const t = Math.max(0, Math.ceil(ms / 1000));
  const hh = Math.floor(t / 3600);
  const m = Math.floor((t % 3600) / 60);
  const sec = String(t % 60).padStart(2, '0');
  return hh ? `${hh}:${String(m).padStart(2, '0')}:${sec}` : `${m}:${sec}`;
}
