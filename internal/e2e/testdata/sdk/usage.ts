// usage.ts: a program that uses the whole of the SDK's API, compiled
// against waitroom.d.ts by TestSDKTypes (never run): the types say what the
// module does, and a change to either that the other does not follow fails.

import { Waitroom, solveProof, request, NetworkError, retryAfterMs, backoffMs, Waiter } from './waitroom.js';
import type { Snapshot, Change, Status, Pass, Place, Next, EventInfo, TicketStorage, WaitroomOptions, Proof, Answer } from './waitroom.js';

const kept = new Map<string, string>();
const storage: TicketStorage = {
  getItem: (k) => kept.get(k) ?? null,
  setItem: (k, v) => void kept.set(k, v),
  removeItem: (k) => void kept.delete(k),
};
const options: WaitroomOptions = {
  event: 'premiere',
  baseUrl: '',
  account: () => 'token',
  code: 'CODE',
  returnTo: null,
  storage,
  fetch,
  solve: async (challenge: string, bits: number) => (await solveProof(challenge, bits, { workers: 0 })).nonce,
  waiter: new Waiter(),
  now: Date.now,
};
const room = new Waitroom(options);
const off: () => void = room.on('waiting', (s: Snapshot, prev: Snapshot) => {
  const place: Place | null = s.place;
  const status: Status = s.status;
  const change: Change | null = s.change;
  const next: Next | null = s.next;
  const info: EventInfo | null = s.info;
  console.log(place?.position, place?.ahead, place?.etaSeconds, place?.available, place?.start, status, change, next?.action, next?.inMs, info?.state, prev.seq);
});
off();
room.on('change', (s) => console.log(s.seq, s.event, s.ticket, s.updatedAt, s.opensAt, s.notice, s.error, s.failures, s.proofRounds));

async function main(): Promise<void> {
  const last: Snapshot = await room.join({ start: 3 });
  const pass: Pass | null = room.pass ?? last.pass;
  if (pass?.accessToken) {
    const seats: Answer = await request('GET', '/api/v1/booking/showtimes/42/seats', { token: pass.accessToken, headers: {}, body: undefined, baseUrl: '' });
    console.log(seats.status, seats.ok, seats.data, seats.headers.get('Date'), pass.expiresAt, pass.returnUrl);
    if (seats.status === 429) console.log(retryAfterMs(seats, 1000), backoffMs(2));
  }
  const ticket: string | null = room.ticket;
  if (ticket) await room.resume(ticket, { start: 1 });
  const away: boolean = await room.away();
  room.stop();
  room.wake();
  room.forget();
  await room.rejoin();
  await room.leave();
  const proof: Proof = await solveProof('challenge', 8);
  console.log(away, proof.nonce, proof.header, proof.tries, proof.ms, room.snapshot.status);
  const waiter = new Waiter();
  await waiter.sleep(10);
  waiter.wake();
  try {
    await request('GET', '/api/v1/events');
  } catch (err) {
    if (err instanceof NetworkError) console.log(err.retryInMs, err.message);
  }
}
main();
