// i18n.js: the pages' words, numbers, prices and dates in the fan's language.
//
// The language is the page's <html lang> (the server chose it: the wr_lang
// cookie, else Accept-Language); the words come from the same catalog the
// server renders with, /static/i18n/<lang>.json, with a site's own words
// over it (<meta name="waitroom-messages">), so no word lives in code.
// Dates and times are written in the event's time zone: the offset of the
// ISO time the server sent ("2026-12-01T19:00:00+09:00"), never the
// device's. Prices are in the currency's minor unit (cents, or whole yen and
// won), as the API gives them.
//
// No DOM ids.

export const LANG = document.documentElement.lang || 'en';

async function loadCatalog(lang) {
  try {
    const r = await fetch(`/static/i18n/${encodeURIComponent(lang)}.json`, { credentials: 'same-origin' });
    if (r.ok) return await r.json();
  } catch {
    // Offline on first load: keys stay visible rather than nothing at all.
  }
  return {};
}

const catalog = await loadCatalog(LANG);
// A site's own words (its messages.<lang>.yaml, DESIGN.md "The site's own
// look") come with the page, in its head: laid over the catalog as the
// server laid them, so that what the script writes speaks as the page did.
const own = document.querySelector('meta[name="waitroom-messages"]');
if (own) {
  try {
    Object.assign(catalog, JSON.parse(own.content));
  } catch {
    // A page we did not render: the built-in words stay.
  }
}
const plurals = new Intl.PluralRules(LANG);
const numbers = new Intl.NumberFormat(LANG, { maximumFractionDigits: 0 });

// count writes a whole number for people: 12,345.
export function count(n) {
  return Number.isFinite(n) ? numbers.format(Math.round(n)) : '–';
}

// t returns the words of key with {name} placeholders filled from vars;
// whole numbers are written with count(). A key with ".one"/".other"
// variants is chosen by the plural of vars.n. A missing key shows as ⟦key⟧.
export function t(key, vars = {}) {
  let msg;
  if (Number.isFinite(vars.n)) {
    msg = catalog[`${key}.${plurals.select(vars.n)}`] ?? catalog[`${key}.other`];
  }
  msg = msg ?? catalog[key];
  if (msg == null) return `⟦${key}⟧`;
  return msg.replace(/\{(\w+)\}/g, (m, name) => {
    const v = vars[name];
    if (v == null) return m;
    return typeof v === 'number' && Number.isInteger(v) ? count(v) : String(v);
  });
}

const fractions = new Map();

// minorDigits is how many digits the currency's minor unit has: 2 for USD,
// 0 for JPY and KRW.
function minorDigits(currency) {
  if (!fractions.has(currency)) {
    let d = 2;
    try {
      d = new Intl.NumberFormat('en', { style: 'currency', currency }).resolvedOptions().maximumFractionDigits;
    } catch {
      // an unknown code: treat as cents
    }
    fractions.set(currency, d);
  }
  return fractions.get(currency);
}

// price writes an amount given in the currency's minor unit: $15.00, ￥1,500.
export function price(cents, currency) {
  if (!Number.isFinite(cents) || !currency) return '';
  const d = minorDigits(currency);
  try {
    return new Intl.NumberFormat(LANG, { style: 'currency', currency }).format(cents / 10 ** d);
  } catch {
    return `${currency} ${(cents / 10 ** d).toFixed(d)}`;
  }
}

const WHEN = {
  weekday: 'short',
  year: 'numeric',
  month: 'short',
  day: 'numeric',
  hour: '2-digit',
  minute: '2-digit',
  hourCycle: 'h23',
};

// zoneOf reads the offset an ISO time was written with: "+09:00", or "UTC"
// for Z.
function zoneOf(iso) {
  const m = /([+-]\d\d):?(\d\d)$/.exec(iso);
  if (m) return `${m[1]}:${m[2]}`;
  return 'UTC';
}

let offsetZones = null; // does this browser's Intl take "+09:00" as a timeZone?

function format(d, zone, options) {
  if (offsetZones !== false) {
    try {
      const s = new Intl.DateTimeFormat(LANG, { ...options, timeZone: zone }).format(d);
      offsetZones = true;
      return s;
    } catch {
      offsetZones = false;
    }
  }
  // Older Intl: move the instant by the offset and write it as UTC, which is
  // the same wall-clock time.
  const m = /^([+-])(\d\d):(\d\d)$/.exec(zone);
  const shift = m ? (m[1] === '-' ? -1 : 1) * (Number(m[2]) * 60 + Number(m[3])) * 60000 : 0;
  return new Intl.DateTimeFormat(LANG, { ...options, timeZone: 'UTC' }).format(new Date(d.getTime() + shift));
}

// when writes an ISO time as a date and time in the event's time zone:
// "Tue, Dec 1, 2026, 19:00"; null for a missing or bad time.
export function when(iso) {
  if (!iso) return null;
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return null;
  return format(d, zoneOf(String(iso)), WHEN);
}

// clock writes an ISO time as a time of day in the event's time zone, with
// the date when it is not today there: "10:00", or when() in full.
export function clock(iso) {
  if (!iso) return null;
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return null;
  const zone = zoneOf(String(iso));
  const day = { year: 'numeric', month: 'numeric', day: 'numeric' };
  if (format(d, zone, day) !== format(new Date(), zone, day)) return when(iso);
  return format(d, zone, { hour: '2-digit', minute: '2-digit', hourCycle: 'h23' });
}

// etaWords turns seconds into the words a fan reads: "less than a minute",
// "about 4 minutes", "about 1 hour 15 minutes". null stays null (unknown).
export function etaWords(seconds) {
  if (seconds == null || !Number.isFinite(seconds)) return null;
  if (seconds < 60) return t('eta.underMinute');
  const min = Math.round(seconds / 60);
  if (min < 60) return t('eta.minutes', { n: min });
  // Past an hour, quarter hours: more precision would be a false promise.
  const quarters = Math.round(seconds / 900) * 15;
  const h = Math.floor(quarters / 60);
  const m = quarters % 60;
  if (h >= 24) return t('eta.overDay');
  return m ? t('eta.hoursMinutes', { h, m }) : t('eta.hours', { n: h });
}

// list joins names for a sentence: "F5", "F5 and F6", "F5, F6 and F7" (or
// the language's own way).
export function list(items) {
  try {
    return new Intl.ListFormat(LANG, { style: 'long', type: 'conjunction' }).format(items);
  } catch {
    return items.join(', ');
  }
}
