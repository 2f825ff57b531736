// node.mjs: the room's SDK under Node against a running room
// (TestSDKUnderNode, which put waitroom.js, as the gateway serves it,
// beside this file). Fan A joins a paused sale, paying its proof of work in
// this thread; another client takes A's place over from its ticket; fan B
// steps away, fan D (no email) is refused and leaves; the room loses Redis
// and A keeps its place through the 503s, waiting what they say; the sale
// opens, A is admitted, its pass opens the booking API, and A leaves.
//
// It prints one JSON line per step ({"step": …}); the Go test acts on some
// (outage: it stops Redis; offline: starts it again; back: opens the sale)
// and the last is {"step":"done"}, or {"step":"fail","msg":…} with exit 1.
//
// Env: WAITROOM_URL (the gateway), WAITROOM_EVENT, WAITROOM_SHOWTIME,
// ACCOUNT_A and ACCOUNT_B (account tokens with an email claim).

import { Waitroom, request } from './waitroom.js';

const base = process.env.WAITROOM_URL;
const event = process.env.WAITROOM_EVENT;
const STEP_MS = 60000;

function say(step, more = {}) {
  console.log(JSON.stringify({ step, ...more }));
}

function fail(msg) {
  say('fail', { msg });
  process.exit(1);
}

function check(ok, msg) {
  if (!ok) fail(msg);
}

// recorder is a fetch that records every request and its answer (with the
// answer's body, read from a copy).
function recorder() {
  const log = [];
  const recorded = async (url, init) => {
    const entry = { at: performance.now(), method: init.method, path: new URL(url).pathname, headers: { ...init.headers } };
    log.push(entry);
    const res = await fetch(url, init);
    entry.answeredAt = performance.now();
    entry.status = res.status;
    entry.retryAfter = res.headers.get('Retry-After');
    try {
      entry.body = JSON.parse(await res.clone().text());
    } catch {
      entry.body = null;
    }
    return res;
  };
  return { log, fetch: recorded };
}

// follow builds a Waitroom of this room with a recorder, and keeps every
// change it publishes.
function follow(options = {}) {
  const rec = recorder();
  const room = new Waitroom({ event, baseUrl: base, fetch: rec.fetch, ...options });
  const changes = [];
  room.on('change', (s) => changes.push(s.change));
  return { room, log: rec.log, changes };
}

// until resolves with the next snapshot of change type, failing the test
// after STEP_MS.
function until(room, type, what) {
  return new Promise((resolve) => {
    const timer = setTimeout(() => fail(`${what}: no ${type} within ${STEP_MS} ms (status ${room.snapshot.status}, last change ${room.snapshot.change})`), STEP_MS);
    const off = room.on(type, (s) => {
      off();
      clearTimeout(timer);
      resolve(s);
    });
  });
}

const tickets = `/api/v1/events/${event}/tickets`;

// A joins: the sale asks a proof of work, paid here, and A waits (the sale
// is paused).
const a = follow({ account: process.env.ACCOUNT_A });
const aDone = a.room.join();
let s = await until(a.room, 'waiting', 'A joins');
const joins = a.log.filter((e) => e.method === 'POST' && e.path === tickets);
check(joins.length === 2 && joins[0].status === 428 && !joins[0].headers['X-Waitroom-Proof'], `A's first join: ${JSON.stringify(joins[0])}; want 428 without a proof`);
check(joins[1].status === 201 && joins[1].headers['X-Waitroom-Proof'] === `${joins[0].body.challenge}:${joins[1].headers['X-Waitroom-Proof'].split(':')[1]}`,
  `A's second join: ${joins[1].status} with proof ${joins[1].headers['X-Waitroom-Proof']}; want 201 with the 428's challenge`);
check(joins.every((e) => e.headers['X-Waitroom-Account'] === process.env.ACCOUNT_A), 'A joined without its account token');
check(typeof s.ticket === 'string' && s.ticket === a.room.ticket && s.place.position >= 1, `A's place: ${JSON.stringify(s)}`);
const ticket = a.room.ticket;
const position = s.place.position;
say('waiting', { ticket, position });

// Another client takes A's place over from its ticket: the same place,
// and no proof to pay for it.
const c = follow({ storage: null });
c.room.resume(ticket);
s = await until(c.room, 'waiting', 'the ticket resumed elsewhere');
check(c.room.ticket === ticket && s.place.position === position, `resumed: ticket ${c.room.ticket} at ${s.place.position}; want ${ticket} at ${position}`);
check(!c.changes.includes('checking'), `resuming paid a proof: ${c.changes}`);
const resumed = c.log.find((e) => e.method === 'POST');
check(resumed.headers['X-Waitroom-Ticket'] === ticket && resumed.status === 200, `the resume's join: ${JSON.stringify(resumed)}; want 200 with X-Waitroom-Ticket`);
c.room.stop();
check(c.room.snapshot.next.action === 'stop', 'stop() left the line following');
say('resumed');

// B steps away: 202, and nothing more is asked. D has no account: refused,
// and its place is followed as before, until it leaves.
const b = follow({ account: process.env.ACCOUNT_B });
b.room.join();
await until(b.room, 'waiting', 'B joins');
check((await b.room.away()) === true, `B's away refused: ${b.room.snapshot.notice}`);
check(b.room.snapshot.status === 'away' && b.room.snapshot.next.action === 'stop', `B after away: ${JSON.stringify(b.room.snapshot)}`);
const awayCall = b.log.find((e) => e.path.endsWith('/away'));
check(awayCall.status === 202 && awayCall.headers['X-Waitroom-Account'] === process.env.ACCOUNT_B, `B's away: ${JSON.stringify(awayCall)}`);
const bRequests = b.log.length;
const d = follow();
d.room.join();
await until(d.room, 'waiting', 'D joins');
check((await d.room.away()) === false && d.room.snapshot.notice === 'no_email', `D's away: ${d.room.snapshot.change} ${d.room.snapshot.notice}; want refused no_email`);
await until(d.room, 'waiting', 'D followed after its refused away');
await d.room.leave();
check(d.room.snapshot.status === 'left' && d.log.at(-1).method === 'DELETE' && d.log.at(-1).status === 204, `D's leave: ${JSON.stringify(d.log.at(-1))}`);
say('away');

// Redis goes (the Go test stops it): A's polls are answered 503 with
// Retry-After, and A keeps its place.
say('outage');
s = await until(a.room, 'offline', 'A while Redis is away');
const refused = a.log.filter((e) => e.status === 503);
check(refused.length > 0 && refused.every((e) => e.retryAfter), `A's failures: ${JSON.stringify(a.log.slice(-3))}; want 503 with Retry-After`);
check(a.room.ticket === ticket, 'A forgot its ticket in the outage');
say('offline', { retryInMs: s.next.inMs });
s = await until(a.room, 'back', 'A once Redis is back');
check(a.room.ticket === ticket && (s.status === 'waiting' || s.status === 'next'), `A after the outage: ${JSON.stringify(s)}; want the same place`);
say('back');

// The sale opens (the Go test): A is admitted with its pass, which opens
// the booking API.
s = await aDone;
check(s.status === 'admitted' && s.change === 'admitted', `A's join ended ${s.status} (${s.change}); want admitted`);
const pass = a.room.pass;
check(pass && pass.accessToken.split('.').length === 3 && Date.parse(pass.expiresAt) > Date.now() && pass.returnUrl === null, `A's pass: ${JSON.stringify(pass)}`);
const claims = JSON.parse(Buffer.from(pass.accessToken.split('.')[1], 'base64url').toString());
check(claims.evt === event && claims.aud === 'booking', `the pass's claims: ${JSON.stringify(claims)}`);
const seats = await request('GET', `/api/v1/booking/showtimes/${process.env.WAITROOM_SHOWTIME}/seats`, { baseUrl: base, token: pass.accessToken });
check(seats.status === 200 && Array.isArray(seats.data.seats), `the seat map with the pass: ${seats.status}`);
say('admitted');

// Never sooner than told: each poll at least the pollAfterMs of the answer
// before it (500 ms at the least), each request after a 503 at least its
// Retry-After.
const polls = a.log.filter((e) => e.method !== 'GET' || e.path !== `/api/v1/events/${event}`);
for (let i = 1; i < polls.length; i++) {
  const prev = polls[i - 1];
  const gap = polls[i].at - prev.answeredAt;
  let told = 0;
  if (prev.status === 503) told = Number(prev.retryAfter) * 1000;
  else if (prev.body && prev.body.status === 'waiting') told = Math.max(prev.body.pollAfterMs, 500);
  check(gap >= told - 2, `request ${i} went ${gap.toFixed(0)} ms after the answer before it (${prev.status}); told ${told} ms`);
}

// A leaves: the place is given back (its ticket is then 410).
await a.room.leave();
const gone = await request('GET', `${tickets}/${encodeURIComponent(ticket)}`, { baseUrl: base });
check(a.room.snapshot.status === 'left' && gone.status === 410, `after leaving: ${a.room.snapshot.status}, the ticket ${gone.status}; want left, 410`);

// A's changes, in order: repeats of one change, and the event's facts (which
// come when they come), aside.
const seen = a.changes.filter((x) => x !== 'info').filter((x, i, all) => x !== all[i - 1]).join(' ');
check(/^joining trying checking proved waiting (offline trying )+waiting back (waiting )?admitted left$/.test(seen), `A's changes: ${seen}`);
check(b.log.length === bRequests, `B asked the room ${b.log.length - bRequests} more times after stepping away`);
say('done', { changes: seen });
