// seatmap.js: the seat map of the booking page: the SVG of reserved seats,
// the general-admission steppers, what the fan has chosen, and the keyboard.
//
// It does no network and knows no phase of the booking flow: book.js feeds
// it the seat map answers (apply), says whether the fan may choose and which
// seats are held for them (setMode), and hears back through onChange (the
// choice changed) and onNote (something to tell the fan).
//
// Seat states are told apart by colour AND shape, for colour-blind fans:
// available = white with a green outline, empty; mine = solid blue with a
// check mark; held by someone else = amber with diagonal hatching; sold =
// dark grey with a cross.
//
// Stable hooks for end-to-end tests:
//   #seatmap                  the <svg>; data-showtime="<id>"
//   [data-seat="F5"]          a seat (<g>): data-state="available|mine|held|sold",
//                             role=checkbox, aria-checked, aria-label "Row F, seat 5, available";
//                             click, or focus + Enter/Space, toggles it
//   [data-ga="FLOOR"]         a general-admission count <input type=number>
//   [data-ga-inc="FLOOR"], [data-ga-dec="FLOOR"]   its + and − buttons

import { h, s, show, setText } from './ui.js';
import { t, count, price } from './i18n.js';
import { MAX_PLACES, Prices, rowOrder, seatOrder, takenWords } from './places.js';

const CELL = 30;
const SEAT = 24;
const LABEL_W = 26;
const TOP = 54;

const MARKS = {
  available: '',
  mine: 'M6 12.5 L10.5 17 L18 7.5',
  held: 'M3 13 L13 3 M3 21 L21 3 M11 21 L21 11',
  sold: 'M7 7 L17 17 M17 7 L7 17',
};


function seatShape(view) {
  return [
    s('rect', { class: 'seat-base', x: 0, y: 0, width: SEAT, height: SEAT, rx: 6 }),
    s('path', { class: 'seat-mark', d: MARKS[view] || 'M0 0' }),
  ];
}

export class SeatMap {
  // el: {scroll, ga, scrollHint, legend}; onChange(): the choice changed;
  // onNote(text, kind): words for the fan.
  constructor(el, { onChange, onNote }) {
    this.el = el;
    this.onChange = onChange;
    this.onNote = onNote;
    this.showtimeId = null;
    this.title = '';
    this.seats = new Map(); // code → {code,row,number,status}
    this.rows = []; // [{row, seats:[codes in number order]}]
    this.mapKey = ''; // which layout the SVG was built for
    this.ga = []; // [{code,capacity,available}]
    this.gaKey = '';
    this.selected = new Set();
    this.gaCount = new Map();
    this.focusCode = null;
    this.choosing = false;
    this.heldSeats = []; // seats of the fan's hold on this showtime
    this.prices = new Prices();
  }

  // ---------- the choice ----------

  total() {
    let n = this.selected.size;
    for (const v of this.gaCount.values()) n += v;
    return n;
  }

  // choice is what a hold would ask for: sorted seats and GA counts.
  choice() {
    return {
      seats: [...this.selected].sort(seatOrder),
      ga: Object.fromEntries([...this.gaCount].filter(([, n]) => n > 0)),
    };
  }

  // clearChoice forgets the choice without drawing (the caller redraws).
  clearChoice() {
    this.selected.clear();
    this.gaCount.clear();
  }

  // clear forgets the choice and redraws.
  clear() {
    this.clearChoice();
    this.render();
    this.onChange();
  }

  // drop removes seats or a block someone else was faster for.
  drop({ seats = [], block = '' }) {
    for (const c of seats) this.selected.delete(c);
    if (block) this.gaCount.delete(block);
  }

  // switchTo starts afresh on another showtime.
  switchTo(showtimeId, title) {
    this.showtimeId = showtimeId;
    this.title = title || '';
    this.clearChoice();
    this.focusCode = null;
  }

  // setMode says whether the fan may choose now, and which seats of this
  // showtime are held for them; then redraws.
  setMode(choosing, heldSeats) {
    this.choosing = choosing;
    this.heldSeats = heldSeats || [];
    for (const el of this.el.ga.querySelectorAll('input, button')) el.disabled = !choosing;
    if (this.seats.size) this.renderSeats();
    this.renderGA();
  }

  render() {
    this.renderSeats();
    this.renderGA();
  }

  // ---------- seat map answers ----------

  // apply takes a GET /showtimes/{id}/seats answer.
  apply(d) {
    this.prices = new Prices(d);
    const seats = Array.isArray(d.seats) ? d.seats : [];
    this.seats = new Map(seats.map((x) => [x.code, x]));
    const byRow = new Map();
    for (const x of seats) {
      if (!byRow.has(x.row)) byRow.set(x.row, []);
      byRow.get(x.row).push(x);
    }
    this.rows = [...byRow.keys()].sort(rowOrder).map((row) => ({
      row,
      seats: byRow
        .get(row)
        .sort((a, b) => a.number - b.number)
        .map((x) => x.code),
    }));
    this.ga = Array.isArray(d.generalAdmission) ? d.generalAdmission : [];

    const mapKey = `${this.showtimeId}|${seats.map((x) => x.code).join(',')}|${this.ga.length > 0}`;
    if (mapKey !== this.mapKey) {
      this.mapKey = mapKey;
      this.buildMap();
    }
    const gaKey = `${this.showtimeId}|${this.ga.map((b) => b.code).join(',')}`;
    if (gaKey !== this.gaKey) {
      this.gaKey = gaKey;
      this.buildGA();
    }

    // What we chose may have gone to someone faster since: drop it and say so.
    if (this.choosing) {
      const taken = [...this.selected].filter((c) => !this.seats.has(c) || this.seats.get(c).status !== 'AVAILABLE');
      for (const c of taken) this.selected.delete(c);
      const notes = [];
      if (taken.length) notes.push(takenWords(taken));
      for (const b of this.ga) {
        const n = this.gaCount.get(b.code) || 0;
        if (n > b.available) {
          if (b.available > 0) this.gaCount.set(b.code, b.available);
          else this.gaCount.delete(b.code);
          notes.push(b.available > 0 ? t('map.onlyLeft', { n: b.available, code: b.code }) : t('map.soldOutNow', { code: b.code }));
        }
      }
      if (notes.length) this.onNote(notes.join(' '), 'error');
    }
    this.render();
    this.onChange();
  }

  // ---------- seats ----------

  seatView(code) {
    const seat = this.seats.get(code);
    if (this.heldSeats.includes(code)) return 'mine';
    if (this.choosing && this.selected.has(code)) return 'mine';
    if (!seat) return 'sold';
    if (seat.status === 'AVAILABLE') return 'available';
    if (seat.status === 'HELD') return 'held';
    return 'sold';
  }

  seatLabel(code, view) {
    const seat = this.seats.get(code);
    const state = view === 'mine' && !this.choosing ? 'heldForYou' : view;
    return t('map.seatLabel', { row: seat.row, number: seat.number, state: t(`map.seat.${state}`) });
  }

  buildMap() {
    const maxNum = Math.max(1, ...[...this.seats.values()].map((x) => x.number));
    const width = LABEL_W * 2 + maxNum * CELL;
    const height = TOP + this.rows.length * CELL + 6;
    const stage = this.ga.length ? 'stage' : 'screen';
    const stageWord = t(`map.${stage}`);
    const svg = s('svg', {
      id: 'seatmap',
      viewBox: `0 0 ${width} ${height}`,
      role: 'group',
      'aria-label': t(`map.label.${stage}`, { title: this.title, row: this.rows[0] ? this.rows[0].row : '' }),
      dataset: { showtime: String(this.showtimeId) },
    });
    // Keep seats at least ~24 CSS px on a phone (the map then scrolls
    // sideways) and stop small maps from blowing up on a desktop. CSSOM writes
    // are allowed under style-src 'self'; style attributes are not.
    svg.style.minWidth = `${Math.round((width * 24) / CELL)}px`;
    svg.style.maxWidth = `${Math.round(width * 1.35)}px`;

    const stageX = LABEL_W + maxNum * CELL * 0.15;
    const stageW = maxNum * CELL * 0.7;
    svg.append(
      s(
        'g',
        { class: 'stage', 'aria-hidden': 'true' },
        s('rect', { x: stageX, y: 4, width: stageW, height: 22, rx: 4 }),
        s('text', { x: stageX + stageW / 2, y: 19.5, 'text-anchor': 'middle' }, stageWord),
      ),
    );
    const nums = s('g', { class: 'col-labels', 'aria-hidden': 'true' });
    for (let n = 1; n <= maxNum; n += 1) {
      if (n === 1 || n % 5 === 0 || n === maxNum) {
        nums.append(s('text', { x: LABEL_W + (n - 1) * CELL + CELL / 2, y: TOP - 8, 'text-anchor': 'middle' }, String(n)));
      }
    }
    svg.append(nums);

    this.rows.forEach((r, i) => {
      const y = TOP + i * CELL;
      const g = s('g', { class: 'row', role: 'group', 'aria-label': t('map.row', { row: r.row }) });
      g.append(
        s('text', { class: 'row-label', x: LABEL_W / 2, y: y + CELL / 2 + 4.5, 'text-anchor': 'middle', 'aria-hidden': 'true' }, r.row),
        s('text', { class: 'row-label', x: width - LABEL_W / 2, y: y + CELL / 2 + 4.5, 'text-anchor': 'middle', 'aria-hidden': 'true' }, r.row),
      );
      for (const code of r.seats) {
        const seat = this.seats.get(code);
        const x = LABEL_W + (seat.number - 1) * CELL + (CELL - SEAT) / 2;
        const seatEl = s(
          'g',
          {
            class: 'seat',
            role: 'checkbox',
            tabindex: '-1',
            transform: `translate(${x} ${y + (CELL - SEAT) / 2})`,
            dataset: { seat: code },
          },
          s('rect', { class: 'seat-hit', x: -3, y: -3, width: SEAT + 6, height: SEAT + 6, rx: 8 }),
          ...seatShape('available'),
          s('rect', { class: 'seat-focus', x: -3, y: -3, width: SEAT + 6, height: SEAT + 6, rx: 8 }),
        );
        g.append(seatEl);
      }
      svg.append(g);
    });
    this.el.scroll.replaceChildren(svg);
    // On a narrow screen the map scrolls sideways: start at its left edge,
    // where the row letters are, and say that there is more to the right.
    this.el.scroll.scrollLeft = 0;
    this.fitHint();
  }

  // fitHint says "swipe sideways" only while the map is wider than its box.
  fitHint() {
    show(this.el.scrollHint, this.el.scroll.scrollWidth - this.el.scroll.clientWidth > 8);
  }

  renderSeats() {
    const svg = document.getElementById('seatmap');
    if (!svg) return;
    const readOnly = !this.choosing;
    let focusable = null;
    for (const el of svg.querySelectorAll('[data-seat]')) {
      const code = el.dataset.seat;
      const view = this.seatView(code);
      if (el.dataset.state !== view) {
        el.dataset.state = view;
        el.querySelector('.seat-mark').setAttribute('d', MARKS[view] || 'M0 0');
      }
      const label = this.seatLabel(code, view);
      if (el.getAttribute('aria-label') !== label) el.setAttribute('aria-label', label);
      el.setAttribute('aria-checked', view === 'mine' ? 'true' : 'false');
      const disabled = readOnly || view === 'held' || view === 'sold';
      el.setAttribute('aria-disabled', disabled ? 'true' : 'false');
      if (code === this.focusCode) focusable = el;
    }
    // Roving tabindex: one Tab stop for the whole map, arrows inside it.
    if (!focusable) {
      focusable =
        svg.querySelector('[data-seat][data-state="mine"]') ||
        svg.querySelector('[data-seat][data-state="available"]') ||
        svg.querySelector('[data-seat]');
      if (focusable) this.focusCode = focusable.dataset.seat;
    }
    for (const el of svg.querySelectorAll('[data-seat][tabindex="0"]')) if (el !== focusable) el.setAttribute('tabindex', '-1');
    if (focusable) focusable.setAttribute('tabindex', '0');
  }

  focusSeat(code) {
    const el = this.el.scroll.querySelector(`[data-seat="${CSS.escape(code)}"]`);
    if (!el) return;
    this.focusCode = code;
    this.renderSeats();
    el.focus();
  }

  neighbour(code, key) {
    const seat = this.seats.get(code);
    if (!seat) return null;
    const ri = this.rows.findIndex((r) => r.row === seat.row);
    const row = this.rows[ri];
    const i = row.seats.indexOf(code);
    switch (key) {
      case 'ArrowLeft':
        return row.seats[i - 1] || null;
      case 'ArrowRight':
        return row.seats[i + 1] || null;
      case 'Home':
        return row.seats[0];
      case 'End':
        return row.seats[row.seats.length - 1];
      case 'ArrowUp':
      case 'ArrowDown': {
        const other = this.rows[ri + (key === 'ArrowUp' ? -1 : 1)];
        if (!other) return null;
        let best = null;
        let bestD = Infinity;
        for (const c of other.seats) {
          const d = Math.abs(this.seats.get(c).number - seat.number);
          if (d < bestD) {
            best = c;
            bestD = d;
          }
        }
        return best;
      }
      default:
        return null;
    }
  }

  toggle(code) {
    const seat = this.seats.get(code);
    if (!seat) return;
    this.focusCode = code;
    if (!this.choosing) {
      this.onNote(t('map.releaseFirst'));
      return;
    }
    const view = this.seatView(code);
    if (view === 'mine') {
      this.selected.delete(code);
    } else if (view === 'available') {
      if (this.total() >= MAX_PLACES) {
        this.onNote(t('map.max', { n: MAX_PLACES }), 'error');
        return;
      }
      this.selected.add(code);
    } else {
      this.onNote(t(view === 'held' ? 'map.seatHeld' : 'map.seatSold', { seat: code }));
      return;
    }
    this.render();
    this.onChange();
  }

  // ---------- general admission ----------

  buildGA() {
    this.el.ga.replaceChildren(
      h('h3', {}, t('map.ga.title')),
      ...this.ga.map((b) => {
        const labelId = `ga-label-${b.code}`;
        return h(
          'div',
          { class: 'ga-block', dataset: { gaBlock: b.code } },
          h(
            'div',
            { class: 'ga-info' },
            h('span', { class: 'ga-name', id: labelId }, b.code),
            h('span', { class: 'ga-price' }, t('map.ga.each', { price: price(b.priceCents, this.prices.currency) })),
            h('span', { class: 'ga-avail' }),
          ),
          h(
            'div',
            { class: 'stepper' },
            h('button', { type: 'button', class: 'secondary step', 'aria-label': t('map.ga.fewer', { code: b.code }), dataset: { gaDec: b.code } }, '−'),
            h('input', {
              type: 'number',
              inputmode: 'numeric',
              min: 0,
              value: 0,
              'aria-labelledby': labelId,
              dataset: { ga: b.code },
            }),
            h('button', { type: 'button', class: 'secondary step', 'aria-label': t('map.ga.more', { code: b.code }), dataset: { gaInc: b.code } }, '+'),
          ),
        );
      }),
    );
  }

  gaRoom(code) {
    const b = this.ga.find((x) => x.code === code);
    const mine = this.gaCount.get(code) || 0;
    const left = MAX_PLACES - (this.total() - mine);
    return Math.max(0, Math.min(b ? b.available : 0, left));
  }

  renderGA() {
    show(this.el.ga, this.ga.length > 0);
    const choosing = this.choosing;
    for (const b of this.ga) {
      const block = this.el.ga.querySelector(`[data-ga-block="${CSS.escape(b.code)}"]`);
      if (!block) continue;
      const soldOut = b.available <= 0;
      block.dataset.soldOut = soldOut ? 'true' : 'false';
      setText(
        block.querySelector('.ga-avail'),
        soldOut ? t('map.ga.soldOut') : t('map.ga.left', { n: b.available, capacity: count(b.capacity) }),
      );
      const input = block.querySelector('[data-ga]');
      const n = this.gaCount.get(b.code) || 0;
      const max = this.gaRoom(b.code);
      input.max = String(max);
      if (document.activeElement !== input || !choosing) input.value = String(n);
      input.disabled = !choosing || (soldOut && n === 0);
      block.querySelector('[data-ga-dec]').disabled = !choosing || n <= 0;
      block.querySelector('[data-ga-inc]').disabled = !choosing || n >= max;
    }
  }

  setGA(code, n) {
    const max = this.gaRoom(code);
    const want = Number.isFinite(n) ? Math.floor(n) : 0;
    const v = Math.max(0, Math.min(want, max));
    if (want > max) {
      const b = this.ga.find((x) => x.code === code);
      if (b && b.available < want) this.onNote(t('map.onlyLeft', { n: b.available, code }));
      else this.onNote(t('map.max', { n: MAX_PLACES }), 'error');
    }
    if (v) this.gaCount.set(code, v);
    else this.gaCount.delete(code);
    this.renderGA();
    this.onChange();
  }

  // ---------- legend and input ----------

  legend() {
    const items = ['available', 'mine', 'held', 'sold'].map((view) => [view, t(`map.legend.${view}`)]);
    this.el.legend.replaceChildren(
      ...items.map(([view, words]) =>
        h(
          'li',
          {},
          s(
            'svg',
            { viewBox: '-2 -2 28 28', width: 22, height: 22, 'aria-hidden': 'true', focusable: 'false' },
            s('g', { class: 'seat', dataset: { state: view } }, ...seatShape(view)),
          ),
          words,
        ),
      ),
    );
  }

  // wire listens to the pointer and the keyboard on the map and the steppers.
  wire() {
    window.addEventListener('resize', () => this.fitHint());
    this.el.scroll.addEventListener('click', (e) => {
      const el = e.target.closest('[data-seat]');
      if (!el) return;
      this.toggle(el.dataset.seat);
      el.focus();
    });
    this.el.scroll.addEventListener('keydown', (e) => {
      const el = e.target.closest('[data-seat]');
      if (!el) return;
      if (e.key === 'Enter' || e.key === ' ') {
        e.preventDefault();
        this.toggle(el.dataset.seat);
        return;
      }
      const next = this.neighbour(el.dataset.seat, e.key);
      if (next) {
        e.preventDefault();
        this.focusSeat(next);
      }
    });
    this.el.ga.addEventListener('click', (e) => {
      const inc = e.target.closest('[data-ga-inc]');
      const dec = e.target.closest('[data-ga-dec]');
      if (inc) this.setGA(inc.dataset.gaInc, (this.gaCount.get(inc.dataset.gaInc) || 0) + 1);
      if (dec) this.setGA(dec.dataset.gaDec, (this.gaCount.get(dec.dataset.gaDec) || 0) - 1);
    });
    this.el.ga.addEventListener('change', (e) => {
      const input = e.target.closest('[data-ga]');
      if (input) this.setGA(input.dataset.ga, Number(input.value));
    });
  }
}
