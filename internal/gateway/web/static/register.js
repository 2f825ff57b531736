// register.js: the presale's register page (GET /e/{event}/register), over
// the page the server rendered (which works by itself without JavaScript).
// It counts down to the fan's window and reloads the page when the window
// opens, so that the join button appears at that second.

import { t, etaWords } from './i18n.js';

const el = document.getElementById('register-countdown');
const at = el ? Date.parse(el.dataset.at || '') : NaN;

function tick() {
  const left = at - Date.now();
  if (left <= 0) {
    location.reload();
    return;
  }
  el.textContent = t('register.opensIn', { time: etaWords(Math.ceil(left / 1000)) });
  setTimeout(tick, Math.min(1000, left));
}

if (Number.isFinite(at)) tick();
