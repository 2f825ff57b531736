// proof.js: pays a join's proof of work (DESIGN.md, "Proof of work at
// join"). When a sale asks for one, the gateway answers a join with 428
// proof_required and a challenge; the page finds a nonce such that
// SHA-256(challenge ":" nonce) begins with `bits` zero bits and joins again
// with X-Waitroom-Proof: <challenge>:<nonce>.
//
// The search runs in dedicated workers (proofworker.js, same origin, so the
// page's CSP allows it as it is), one per core up to MAX_WORKERS, each
// trying every k-th nonce, so the page stays responsive and a phone uses
// the cores it has. About 2^bits tries in all, whichever worker finds it.
//
// No DOM ids of its own.

const MAX_WORKERS = 4;

// canSolve is false when this browser cannot run workers (turned off, or
// too old): such a fan cannot join a sale that asks for a proof, and the
// page says so rather than spinning.
export function canSolve() {
  return typeof Worker === 'function';
}

// ProofError means the proof could not be worked out here.
export class ProofError extends Error {
  constructor(message) {
    super(message);
    this.name = 'ProofError';
  }
}

// solve resolves to {header, nonce, tries, ms}: header is the value of
// X-Waitroom-Proof. It rejects with ProofError when workers fail to start
// or report an error. workers overrides the number of workers (tests).
export function solve(challenge, bits, { workers } = {}) {
  if (!canSolve()) return Promise.reject(new ProofError('workers unavailable'));
  const cores = Number(navigator.hardwareConcurrency) || 2;
  const k = Math.max(1, Math.min(workers || cores, MAX_WORKERS));
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const pool = [];
    let done = false;
    let tries = 0;
    const finish = (fn, value) => {
      if (done) return;
      done = true;
      for (const w of pool) w.terminate();
      fn(value);
    };
    for (let i = 0; i < k; i++) {
      let w;
      try {
        w = new Worker('/static/proofworker.js');
      } catch (err) {
        finish(reject, new ProofError(err && err.message ? err.message : 'worker refused'));
        return;
      }
      pool.push(w);
      w.onmessage = (e) => {
        const d = e.data || {};
        if (typeof d.found === 'string') {
          // The others were about as far along: count their tries as well.
          tries = d.tries * k;
          finish(resolve, { header: `${challenge}:${d.found}`, nonce: d.found, tries, ms: performance.now() - started });
        } else {
          finish(reject, new ProofError(d.error || 'worker failed'));
        }
      };
      w.onerror = (e) => {
        if (e && typeof e.preventDefault === 'function') e.preventDefault();
        finish(reject, new ProofError((e && e.message) || 'worker failed'));
      };
      w.postMessage({ challenge, bits, start: i, step: k });
    }
  });
}
