// admin.js: the operators' page (GET /admin). The operator types the token
// in; it is kept in this tab's sessionStorage only and sent as a Bearer
// header to the operators' API (DESIGN.md "Operators' API"). Every 2 s the
// page reads the events' settings and figures, the chosen event's last 30
// minutes (drawn as SVG here, from the gateway's own samples), the audit and
// the webhooks' delivery log. A named token may do less than the admin
// token: every answer of the API says its name, scopes and events
// (X-Waitroom-Token-* headers, a 403 too), and the page shows what they
// allow only (an element with data-scope="<scope>" is shown with it), and
// says what each scope it lacks withholds (data-lacks="<scope>", shown
// without it): an operator is not left wondering where the controls went.
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
//   #whoami                                  the token's name, scopes and events (data-name)
//   [data-lacks="<scope>"]                   shown when the token lacks the scope: what it withholds
//   #deliveries tbody tr[data-id]            the delivery log; td[data-k="<key>"] (at, type,
//                                            event, url, attempts, status, error)

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
const whoami = $('whoami');
const deliveries = $('deliveries').querySelector('tbody');
let timer = 0;
// grant is what the token may do, as the API's last answer said.
let grant = null;

// readGrant learns the token's powers from an answer's headers, and shows
// the parts of the page they allow.
function readGrant(r) {
  const name = r.headers.get('X-Waitroom-Token-Name');
  if (!name) return;
  const scopes = (r.headers.get('X-Waitroom-Token-Scopes') || '').split(' ').filter(Boolean);
  const events = r.headers.get('X-Waitroom-Token-Events') || '*';
  grant = { name, scopes, events: events === '*' ? null : events.split(' ') };
  whoami.dataset.name = name;
  setText(whoami, `token ${name} · ${scopes.join(' ')} · ${events === '*' ? 'every event' : `events ${grant.events.join(' ')}`}`);
  show(whoami, true);
  for (const el of consoleEl.querySelectorAll('[data-scope]')) show(el, scopes.includes(el.dataset.scope));
  for (const el of consoleEl.querySelectorAll('[data-lacks]')) show(el, !scopes.includes(el.dataset.lacks));
}

const may = (scope) => grant !== null && grant.scopes.includes(scope);

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
  readGrant(r);
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
  grant = null;
  show(whoami, false);
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
  renderPicker(events.map((ev) => ev.id), chosen);
}

function renderPicker(ids, chosen = picker.value) {
  if ([...picker.options].map((o) => o.value).join() !== ids.join()) {
    picker.replaceChildren(...ids.map((id) => h('option', { value: id }, id)));
    if (ids.includes(chosen)) picker.value = chosen;
  }
}

// pickerWithoutRead fills the picker for a token that may not read the
// events' figures: from the public list of events, those the token covers.
async function pickerWithoutRead() {
  const r = await fetch('/api/v1/events');
  if (!r.ok) return;
  const { events } = await r.json();
  renderPicker(events.map((ev) => ev.id).filter((id) => !grant.events || grant.events.includes(id)));
}

function renderDeliveries(list) {
  deliveries.replaceChildren(
    ...list.map((d) =>
      h(
        'tr',
        { dataset: { id: d.id } },
        cell('at', d.at),
        cell('type', d.type),
        cell('event', d.event),
        cell('url', d.url),
        cell('attempts', d.attempts),
        cell('status', d.status),
        cell('error', d.lastError || ''),
      ),
    ),
  );
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
    ...entries.map((e) => h('li', {}, `${e.at} ${e.event || '-'} [${e.source}] ${e.change}${e.by ? ` · ${e.by}` : ''}`)),
  );
}

async function refresh() {
  clearTimeout(timer);
  try {
    const evs = await call('GET', '/api/v1/admin/events');
    if (evs.status === 401) return;
    if (evs.ok) renderEvents(evs.data.events || []);
    else if (evs.status === 403 && grant) await pickerWithoutRead();
    else throw new Error(`HTTP ${evs.status}`);
    show(consoleEl, true);
    if (may('events:read') && picker.value) {
      const hist = await call('GET', `/api/v1/admin/events/${encodeURIComponent(picker.value)}/history`);
      if (hist.ok) renderChart(hist.data.points || []);
    }
    if (may('events:read')) {
      const log = await call('GET', '/api/v1/admin/audit?limit=50');
      if (log.ok) renderAudit(log.data.entries || []);
    }
    if (may('webhooks:read')) {
      const d = await call('GET', '/api/v1/admin/webhooks/deliveries?limit=50');
      if (d.ok) renderDeliveries(d.data.deliveries || []);
    }
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
