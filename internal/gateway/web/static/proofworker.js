// proofworker.js: a dedicated worker that solves a join's proof of work
// (DESIGN.md, "Proof of work at join") for proof.js, off the page's thread.
//
// It looks for a nonce, decimal digits, such that SHA-256(challenge ":"
// nonce) begins with `bits` zero bits, trying start, start + step, … so that
// several workers can share one search. Message in: {challenge, bits, start,
// step}; messages out: {found: nonce, tries}, or {error} for a bad request.
//
// SHA-256 is written out here rather than taken from crypto.subtle.digest:
// that one is a promise per hash, and a search makes hundreds of thousands
// of them; a plain loop over the compression function is many times faster
// in every browser measured (docs/OPERATIONS.md, "Choosing the difficulty").
// The gateway's challenges are 63 characters, so challenge ":" is exactly
// one 64-byte block: it is compressed once, and each try costs a single
// compression of the block holding the nonce. Any other length works too,
// at one or two compressions a try.
// No DOM ids.
'use strict';

const K = new Int32Array([
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
  0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
  0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
  0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
  0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
  0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
  0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
  0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
]);
const IV = [0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19];
const MAX_DIGITS = 20; // what the gateway accepts

const W = new Int32Array(64);

// compress runs one SHA-256 compression of the 16 words in W[0..15] over
// state H (8 words) and writes the result to out (which may be H).
function compress(H, out) {
  for (let i = 16; i < 64; i++) {
    const x = W[i - 15];
    const y = W[i - 2];
    const s0 = ((x >>> 7) | (x << 25)) ^ ((x >>> 18) | (x << 14)) ^ (x >>> 3);
    const s1 = ((y >>> 17) | (y << 15)) ^ ((y >>> 19) | (y << 13)) ^ (y >>> 10);
    W[i] = (W[i - 16] + s0 + W[i - 7] + s1) | 0;
  }
  let a = H[0];
  let b = H[1];
  let c = H[2];
  let d = H[3];
  let e = H[4];
  let f = H[5];
  let g = H[6];
  let h = H[7];
  for (let i = 0; i < 64; i++) {
    const S1 = ((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7));
    const t1 = (h + S1 + ((e & f) ^ (~e & g)) + K[i] + W[i]) | 0;
    const S0 = ((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10));
    const t2 = (S0 + ((a & b) ^ (a & c) ^ (b & c))) | 0;
    h = g;
    g = f;
    f = e;
    e = (d + t1) | 0;
    d = c;
    c = b;
    b = a;
    a = (t1 + t2) | 0;
  }
  out[0] = (H[0] + a) | 0;
  out[1] = (H[1] + b) | 0;
  out[2] = (H[2] + c) | 0;
  out[3] = (H[3] + d) | 0;
  out[4] = (H[4] + e) | 0;
  out[5] = (H[5] + f) | 0;
  out[6] = (H[6] + g) | 0;
  out[7] = (H[7] + h) | 0;
}

// load puts the 64 bytes of buf at off into W[0..15], big-endian.
function load(buf, off) {
  for (let i = 0; i < 16; i++) {
    const j = off + 4 * i;
    W[i] = (buf[j] << 24) | (buf[j + 1] << 16) | (buf[j + 2] << 8) | buf[j + 3];
  }
}

// search returns {found, tries}: the first nonce start + k·step that solves
// the challenge, and how many it tried.
function search(challenge, bits, start, step) {
  const prefix = new TextEncoder().encode(`${challenge}:`);
  // The prefix's whole blocks, compressed once.
  const mid = Int32Array.from(IV);
  const whole = prefix.length - (prefix.length % 64);
  for (let off = 0; off < whole; off += 64) {
    load(prefix, off);
    compress(mid, mid);
  }
  const rest = prefix.length - whole;
  const tail = new Uint8Array(128);
  tail.set(prefix.subarray(whole));
  const out = new Int32Array(8);
  const state = new Int32Array(8);
  // The nonce as ASCII digits, counted up in place.
  const digits = Array.from(String(start), (ch) => ch.charCodeAt(0));
  const shift = 32 - bits; // bits is 1..28: the answer is in the first word
  let tries = 0;
  let blocks = 0;
  let from = 0; // the first digit that changed since the last try
  for (;;) {
    const n = digits.length;
    const end = rest + n;
    for (let i = from; i < n; i++) tail[rest + i] = digits[i];
    if (blocks === 0) {
      // A new length: padding and bit length move; every word is new.
      blocks = end + 9 <= 64 ? 1 : 2;
      const size = 64 * blocks;
      tail[end] = 0x80;
      tail.fill(0, end + 1, size - 4);
      const bitLen = (prefix.length + n) * 8; // < 2^32 for any message here
      tail[size - 4] = bitLen >>> 24;
      tail[size - 3] = (bitLen >>> 16) & 0xff;
      tail[size - 2] = (bitLen >>> 8) & 0xff;
      tail[size - 1] = bitLen & 0xff;
      from = 0;
      load(tail, 0);
    } else if (blocks === 1) {
      // compress leaves W[0..15] alone: reload only the words whose
      // digits changed (usually the last digit's alone).
      for (let w = (rest + from) >> 2; w <= (end - 1) >> 2; w++) {
        const j = 4 * w;
        W[w] = (tail[j] << 24) | (tail[j + 1] << 16) | (tail[j + 2] << 8) | tail[j + 3];
      }
    } else {
      load(tail, 0);
    }
    if (blocks === 1) {
      compress(mid, out);
    } else {
      compress(mid, state);
      load(tail, 64);
      compress(state, out);
    }
    tries += 1;
    if (out[0] >>> shift === 0) {
      return { found: String.fromCharCode(...digits), tries };
    }
    // digits += step
    let carry = step;
    let i = n - 1;
    for (; i >= 0 && carry > 0; i--) {
      const v = digits[i] - 48 + carry;
      digits[i] = 48 + (v % 10);
      carry = (v / 10) | 0;
    }
    from = i + 1;
    if (carry > 0) {
      digits.unshift(...Array.from(String(carry), (ch) => ch.charCodeAt(0)));
      if (digits.length > MAX_DIGITS) return { error: 'no nonce found' };
      blocks = 0;
    }
  }
}

onmessage = (e) => {
  const { challenge, bits, start = 0, step = 1 } = e.data || {};
  if (typeof challenge !== 'string' || !/^[A-Za-z0-9_-]{1,200}$/.test(challenge) ||
      !Number.isInteger(bits) || bits < 1 || bits > 28 ||
      !Number.isInteger(start) || start < 0 || !Number.isInteger(step) || step < 1 || step > 9) {
    postMessage({ error: 'bad request' });
    return;
  }
  postMessage(search(challenge, bits, start, step));
};
