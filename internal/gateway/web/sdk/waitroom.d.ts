// waitroom.d.ts: the types of the room's SDK, /sdk/waitroom.js (docs/SDK.md):
// exactly what that module exports.

/** What the line does next, and in how many milliseconds. */
export interface Next {
  readonly action: 'join' | 'poll' | 'prove' | 'stop';
  readonly inMs: number;
}

/** A waiting place, as the room last told it. */
export interface Place {
  /** 1 for the next fan in. */
  readonly position: number;
  readonly ahead: number;
  /** The room's estimate; null while paused or before opening. */
  readonly etaSeconds: number | null;
  /** Places left to hold; null until the booking core told the line. */
  readonly available: number | null;
  /** The place this ticket had when it joined (a progress bar's zero). */
  readonly start: number;
}

/** The access pass of an admitted place. */
export interface Pass {
  /** The access JWT: Authorization: Bearer for the booking API. */
  readonly accessToken: string | null;
  /** RFC 3339: when the pass ends. */
  readonly expiresAt: string | null;
  /** The way back to the site behind the room that sent the fan, with its one-use token. */
  readonly returnUrl: string | null;
}

/** The event's facts: GET /api/v1/events/{event}. */
export interface EventInfo {
  readonly id: string;
  readonly name: string;
  readonly state: 'prequeue' | 'open' | 'paused' | 'passthrough' | 'closed' | 'soldout';
  readonly waiting?: number;
  readonly active?: number;
  readonly opensAt?: string | null;
  readonly available?: number;
  readonly held?: number;
  readonly [key: string]: unknown;
}

/** How a place ends. */
export type Ending = 'left' | 'expired' | 'closed' | 'soldout';

/** Where the fan stands (snapshot.status). */
export type Status =
  | 'idle' | 'joining' | 'checking' | 'not-open' | 'waiting' | 'next' | 'admitted' | 'away' | Ending
  | 'unknown-event' | 'no-worker' | 'error';

/** What made a snapshot (snapshot.change; docs/SDK.md says when each comes). */
export type Change =
  | 'joining' | 'rejoin' | 'info' | 'trying' | 'checking' | 'proved' | 'not-open' | 'waiting' | 'admitted' | 'away' | Ending
  | 'busy' | 'refused' | 'forget' | 'offline' | 'back' | 'no-worker' | 'error' | 'stopped';

/** The fan's state, frozen, as published with each change. */
export interface Snapshot {
  /** Numbered from 1, one more at each change. */
  readonly seq: number;
  /** What made this snapshot (null before the first). */
  readonly change: Change | null;
  readonly event: string | null;
  readonly status: Status;
  /** The event's facts (null before they came, or when there is no such event). */
  readonly info: EventInfo | null;
  readonly ticket: string | null;
  /** While waiting (status waiting or next). */
  readonly place: Place | null;
  /** Once admitted. */
  readonly pass: Pass | null;
  /** When the last place answer came (ms, the clock's). */
  readonly updatedAt: number;
  /** For not-open: when the room (or the fan's presale window) opens, RFC 3339. */
  readonly opensAt: string | null;
  /** With busy and refused: the room's error code (account_required, code_required, no_email, …). */
  readonly notice: string | null;
  /** The last failure that was not the network's (a bug to report). */
  readonly error: string | null;
  /** Requests in a row that got no usable answer. */
  readonly failures: number;
  /** 428 answers in a row. */
  readonly proofRounds: number;
  readonly next: Next | null;
}

/** The Web Storage methods the ticket is kept with. */
export interface TicketStorage {
  getItem(key: string): string | null;
  setItem(key: string, value: string): void;
  removeItem(key: string): void;
}

export interface WaitroomOptions {
  /** The event's id. */
  event: string | null;
  /** The room's origin (scheme, host and port); '' (the default) is this page's. Needed outside a browser page. */
  baseUrl?: string;
  /** The origin site's account token (X-Waitroom-Account at join and away), or a function that returns it. */
  account?: string | null | (() => string | null | undefined);
  /** An access code (X-Waitroom-Code), or a function that returns it. */
  code?: string | null | (() => string | null | undefined);
  /** The way back to a site the event guards, carried by the join. */
  returnTo?: string | null;
  /** Where the ticket is kept: localStorage in a browser by default, memory elsewhere; null: this object's memory. */
  storage?: TicketStorage | null;
  /** The fetch to send requests with (default: the global one). */
  fetch?: typeof fetch;
  /** Pays a proof of work: resolves to the nonce. null: nothing here can (status no-worker). Default: Web Workers, or this thread where there is no page. */
  solve?: ((challenge: string, bits: number) => Promise<string>) | null;
  /** What the line sleeps on between requests (default: a Waiter). */
  waiter?: { sleep(ms: number): Promise<void>; wake(): void };
  /** The clock, in ms (default Date.now). */
  now?: () => number;
}

/** One fan's place in the line of one event. */
export class Waitroom {
  constructor(options: WaitroomOptions);
  /** The state as last published. */
  readonly snapshot: Snapshot;
  /** The place's ticket: the one kept, or the last one answered. */
  readonly ticket: string | null;
  /** The pass, once admitted. */
  readonly pass: Pass | null;
  /** Calls fn on every change of that type ('change': all of them); returns the way to stop. */
  on(type: Change | 'change', fn: (snapshot: Snapshot, previous: Snapshot) => void): () => void;
  /** Takes a place (or resumes the one kept) and follows it; resolves once there is nothing more to follow. */
  join(options?: { start?: number }): Promise<Snapshot>;
  /** Takes over a place from its ticket and follows it, as join does. */
  resume(ticket: string, options?: { start?: number }): Promise<Snapshot>;
  /** Forgets the old place and asks for a new one. */
  rejoin(): Promise<Snapshot>;
  /** Gives the place back. */
  leave(): Promise<void>;
  /** Steps away: true once the room keeps the place without polls; false when it refused (a refused change says why). */
  away(): Promise<boolean>;
  /** Follows the place no more, and keeps it. */
  stop(): void;
  /** Drops the ticket kept here without giving the place back. */
  forget(): void;
  /** Cuts the wait before the next request short. */
  wake(): void;
}

/** A proof of work paid. */
export interface Proof {
  readonly nonce: string;
  /** The value of X-Waitroom-Proof. */
  readonly header: string;
  readonly tries: number;
  readonly ms: number;
}

/** Pays a 428's challenge; workers: how many Web Workers (0: this thread, in slices). */
export function solveProof(challenge: string, bits: number, options?: { workers?: number }): Promise<Proof>;

/** An answer of the room. */
export interface Answer {
  readonly status: number;
  readonly ok: boolean;
  /** The JSON body, or {} when there is none or it is not JSON. */
  readonly data: any;
  readonly headers: Headers;
}

/** A request that got no answer (or 5xx); retryInMs: the room's Retry-After, or 0. */
export class NetworkError extends Error {
  constructor(message: string, retryInMs?: number);
  readonly retryInMs: number;
}

/** One request to the room; never throws for an HTTP status, throws NetworkError when there was no answer. */
export function request(
  method: string,
  path: string,
  options?: {
    body?: unknown;
    headers?: Record<string, string>;
    /** Sent as Authorization: Bearer. */
    token?: string | null;
    baseUrl?: string;
    fetch?: typeof fetch;
  },
): Promise<Answer>;

/** The wait a 429 or 503 asks for (Retry-After), 1 s to 5 min, plus up to 20% jitter. */
export function retryAfterMs(answer: { headers?: Headers } | null | undefined, fallbackMs?: number): number;

/** The wait before retry n (1, 2, …) after no answer: 1 s doubling to 30 s, jittered. */
export function backoffMs(n: number): number;

/** Sleeps that a hidden browser tab does not stretch, and that wake() cuts short. */
export class Waiter {
  constructor();
  sleep(ms: number): Promise<void>;
  wake(): void;
}
