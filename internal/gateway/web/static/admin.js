// admin.js: the operators' page (GET /admin). The operator types the token
// in; it is kept in this tab's sessionStorage only and sent as a Bearer
// header to the operators' API (DESIGN.md "Operators' API"). Every 2 s the
// page reads the events' settings and figures, the chosen event's last 30
// minutes (drawn as SVG here, from the gateway's own samples) and the audit.
//
// Stable hooks for end-to-end tests:
//   #token, #signin (submit), #sign-out      the token
//   #console                                 shown once the token is taken
//   #events tbody tr[data-event="<id>"]      one event; td[data-k="<key>"] its figures
//                                            (state, mode, rate, cap, factor, waiting, active,
//                                            admitted, abandoned, available, held); .api = set through the API
//   #event, #pause, #resume, #close          the controls of the chosen event
//   #rate + #set-rate, #cap + #set-cap, #reset-rate, #reset-cap
//   #ticket + #revoke
//   #chart                                   the SVG; polyline.admitted-line, polyline.waiting-line
//   #audit li                                the audit, newest first
//   #show-previews, #previews                the previews of the chosen event (data-event once loaded);
//                                            iframe.preview[data-state][data-lang], data-status its answer
//   #message                                 the last answer (data-status="<HTTP status>")

import { $, h, s, setText, show } from './ui.js';

const KEY = 'wr_admin_token';
const EVERY_MS = 2000;
const W = 720;
const H = 240;
const PAD = { l: 48, r: 48, t: 12, b: 24 };

const form = $('signin');
const tokenInput = $('token');
const signOut = $('sign-out');
const signIn = $('sign-in');
const message = $('message');
const consoleEl = $('console');
const rows = $('events').querySelector('tbody');
const picker = $('event');
const chart = $('chart');
const audit = $('audit');
const previews = $('previews');
const showPreviews = $('show-previews');
let timer = 0;

function token() {
  return sessionStorage.getItem(KEY) || '';
}

async function call(method, path, body) {
  const init = { method, headers: { Authorization: `Bearer ${token()}` } };
  if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const r = await fetch(path, init);
  let data = null;
  try {
    data = await r.json();
  } catch {
    data = null;
  }
  if (r.status === 401) stop('token refused (401)');
  return { status: r.status, ok: r.ok, data };
}

function say(text, status) {
  setText(message, text);
  message.dataset.status = status ? String(status) : '';
}

function stop(why) {
  sessionStorage.removeItem(KEY);
  clearTimeout(timer);
  show(consoleEl, false);
  show(signOut, false);
  show(signIn, true);
  say(why, 401);
}

function cell(key, value, api) {
  const td = h('td', { dataset: { k: key } }, value == null ? '–' : String(value));
  if (api) td.classList.add('api');
  return td;
}

function renderEvents(events) {
  const chosen = picker.value;
  rows.replaceChildren(
    ...events.map((ev) =>
      h(
        'tr',
        { dataset: { event: ev.id } },
        h('th', { scope: 'row' }, ev.id),
        cell('state', ev.state),
        cell('mode', ev.mode, ev.sources.mode === 'api'),
        cell('rate', ev.admitPerSecond, ev.sources.admitPerSecond === 'api'),
        cell('cap', ev.maxActive, ev.sources.maxActive === 'api'),
        cell('factor', ev.adaptive ? `${Math.round(ev.adaptiveFactor * 100)}% of ${ev.configuredAdmitPerSecond}` : 'off'),
        cell('waiting', ev.waiting),
        cell('active', ev.active),
        cell('admitted', ev.admittedPerSecond),
        cell('abandoned', ev.abandoned),
        cell('available', ev.available),
        cell('held', ev.held),
      ),
    ),
  );
  const ids = events.map((ev) => ev.id);
  if ([...picker.options].map((o) => o.value).join() !== ids.join()) {
    picker.replaceChildren(...ids.map((id) => h('option', { value: id }, id)));
    if (ids.includes(chosen)) picker.value = chosen;
  }
}

function scale(max) {
  if (!(max > 0)) return 1;
  const p = 10 ** Math.floor(Math.log10(max));
  for (const m of [1, 2, 5, 10]) if (m * p >= max) return m * p;
  return 10 * p;
}

function renderChart(points) {
  const keep = chart.querySelector('title');
  chart.replaceChildren(keep);
  const x0 = PAD.l;
  const x1 = W - PAD.r;
  const y0 = H - PAD.b;
  const y1 = PAD.t;
  chart.append(
    s('line', { class: 'axis', x1: x0, y1: y0, x2: x1, y2: y0 }),
    s('line', { class: 'axis', x1: x0, y1: y1, x2: x0, y2: y0 }),
    s('line', { class: 'axis', x1: x1, y1: y1, x2: x1, y2: y0 }),
  );
  if (points.length < 2) return;
  const t0 = Date.parse(points[0].at);
  const span = Math.max(Date.parse(points[points.length - 1].at) - t0, 1);
  const rMax = scale(Math.max(...points.map((p) => p.admittedPerSecond)));
  const wMax = scale(Math.max(...points.map((p) => p.waiting)));
  const x = (p) => (x0 + ((Date.parse(p.at) - t0) / span) * (x1 - x0)).toFixed(1);
  const line = (cls, v, max) =>
    s('polyline', {
      class: cls,
      points: points.map((p) => `${x(p)},${(y0 - (v(p) / max) * (y0 - y1)).toFixed(1)}`).join(' '),
    });
  chart.append(
    line('admitted-line', (p) => p.admittedPerSecond, rMax),
    line('waiting-line', (p) => p.waiting, wMax),
    s('text', { x: 4, y: y1 + 10 }, String(rMax)),
    s('text', { x: x1 + 4, y: y1 + 10 }, String(wMax)),
    s('text', { x: x0, y: H - 6 }, span < 120000 ? `-${Math.round(span / 1000)} s` : `-${Math.round(span / 60000)} min`),
    s('text', { x: x1 - 24, y: H - 6 }, 'now'),
  );
  setText($('chart-scale'), `(left axis 0–${rMax}/s, right axis 0–${wMax} waiting)`);
}

function renderAudit(entries) {
  audit.replaceChildren(
    ...entries.map((e) => h('li', {}, `${e.at} ${e.event || '-'} [${e.source}] ${e.change}`)),
  );
}

async function refresh() {
  clearTimeout(timer);
  try {
    const evs = await call('GET', '/api/v1/admin/events');
    if (evs.status === 401) return;
    if (!evs.ok) throw new Error(`HTTP ${evs.status}`);
    renderEvents(evs.data.events || []);
    show(consoleEl, true);
    if (picker.value) {
      const hist = await call('GET', `/api/v1/admin/events/${encodeURIComponent(picker.value)}/history`);
      if (hist.ok) renderChart(hist.data.points || []);
    }
    const log = await call('GET', '/api/v1/admin/audit?limit=50');
    if (log.ok) renderAudit(log.data.entries || []);
  } catch (err) {
    say(`unreachable: ${err.message}`, 0);
  }
  timer = setTimeout(refresh, EVERY_MS);
}

// loadPreviews puts the chosen event's preview of each state and language
// (GET …/preview, HTML) into its frame. The frames are sandboxed without
// scripts (allow-same-origin only lets them load the gateway's style
// sheet): a preview is a picture of the page, nothing in it runs.
async function loadPreviews() {
  const ev = picker.value;
  if (!ev) return;
  show(previews, true);
  showPreviews.textContent = 'Reload previews';
  delete previews.dataset.event;
  // A presale's states are the events with a presale only.
  const presale = previews.dataset.presaleEvents.split(' ').includes(ev);
  for (const sec of previews.querySelectorAll('section[data-presale]')) show(sec, presale);
  const frames = [...previews.querySelectorAll('section:not([hidden]) iframe.preview')];
  const langs = Object.fromEntries(frames.map((f) => [f.dataset.lang, f.title.split(' · ').pop()]));
  const answers = await Promise.all(
    frames.map(async (f) => {
      const { state, lang } = f.dataset;
      f.title = `${ev}: ${state} · ${langs[lang]}`;
      try {
        const r = await fetch(`${eventPath()}/preview?state=${encodeURIComponent(state)}&lang=${encodeURIComponent(lang)}`, {
          headers: { Authorization: `Bearer ${token()}` },
        });
        f.dataset.status = String(r.status);
        f.srcdoc = r.ok ? await r.text() : '<!doctype html><html lang="en"><title>no preview</title></html>';
        return r.status;
      } catch {
        f.dataset.status = '0';
        return 0;
      }
    }),
  );
  const bad = answers.filter((code) => code !== 200);
  if (bad.length > 0) say(`previews of ${ev}: ${bad.length} failed (HTTP ${bad[0]})`, bad[0]);
  if (bad.includes(401)) stop('token refused (401)');
  previews.dataset.event = ev;
}

async function act(method, path, body) {
  const r = await call(method, path, body);
  if (r.status === 401) return;
  const detail = r.data && r.data.message ? `: ${r.data.message}` : '';
  say(`${method} ${path} → ${r.status}${detail}`, r.status);
  refresh();
}

const eventPath = () => `/api/v1/admin/events/${encodeURIComponent(picker.value)}`;
const patch = (body) => act('PATCH', eventPath(), body);

$('pause').addEventListener('click', () => patch({ mode: 'paused' }));
$('resume').addEventListener('click', () => patch({ mode: 'queue' }));
$('close').addEventListener('click', () => {
  if (window.confirm(`close ${picker.value}?`)) patch({ mode: 'closed' });
});
$('set-rate').addEventListener('click', () => patch({ admitPerSecond: Number($('rate').value) }));
$('reset-rate').addEventListener('click', () => patch({ admitPerSecond: null }));
$('set-cap').addEventListener('click', () => patch({ maxActive: Number($('cap').value) }));
$('reset-cap').addEventListener('click', () => patch({ maxActive: null }));
$('revoke').addEventListener('click', () => {
  const id = $('ticket').value.trim();
  if (id) act('DELETE', `${eventPath()}/tickets/${encodeURIComponent(id)}`);
});
picker.addEventListener('change', () => {
  refresh();
  if (!previews.hidden) loadPreviews();
});
showPreviews.addEventListener('click', loadPreviews);

form.addEventListener('submit', (e) => {
  e.preventDefault();
  sessionStorage.setItem(KEY, tokenInput.value);
  tokenInput.value = '';
  show(signOut, true);
  show(signIn, false);
  say('', 0);
  refresh();
});
signOut.addEventListener('click', () => stop('signed out'));

if (token()) {
  show(signOut, true);
  show(signIn, false);
  refresh();
}
