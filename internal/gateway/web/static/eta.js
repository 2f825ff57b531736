// eta.js: the wait a fan is shown, from the ETAs the gateway answers.
//
// Each answer's etaSeconds is position / measured rate, and the measured
// rate wobbles: read raw, a fan whose place just fell from 201 to 200 could
// read "about 12 minutes" and then "about 16 minutes". The figure shown
// therefore follows the answers halfway each time, runs down with the clock
// in between, and never goes up while the line moves (the place fell since
// the last answer). When the line stalls it may go up: that is news.
//
// No DOM, no imports: it is tested on its own (eta_test.go).

export class EtaSmoother {
  constructor() {
    this.reset();
  }

  reset() {
    this.shown = null; // seconds, at time this.at
    this.at = 0;
    this.pos = null;
  }

  // update takes an answer's place and ETA (seconds; null = unknown, e.g.
  // paused) at time nowMs and returns the ETA to show, in seconds.
  update(pos, eta, nowMs) {
    if (eta == null || !Number.isFinite(eta) || !Number.isFinite(pos)) {
      this.reset();
      return null;
    }
    if (this.shown == null || pos > this.pos) {
      // First answer, or the place grew (the pre-queue's draw): start afresh.
      this.shown = eta;
      this.at = nowMs;
      this.pos = pos;
      return eta;
    }
    const elapsed = Math.max(0, (nowMs - this.at) / 1000);
    const projected = Math.max(0, this.shown - elapsed);
    let next = projected + 0.5 * (eta - projected);
    if (pos < this.pos && next > this.shown) next = this.shown;
    this.shown = Math.max(0, next);
    this.at = nowMs;
    this.pos = pos;
    return this.shown;
  }
}
