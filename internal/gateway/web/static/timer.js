// timer.js: a dedicated worker that only keeps time for api.js's Waiter.
// Browsers throttle the timers of hidden tabs hard (Chrome: once a minute
// after five minutes hidden), which would make a fan waiting in a background
// tab stop polling and be dropped as abandoned. Worker timers are not
// throttled that way. Message in: {id, ms}; message out: id, after ms.
// No DOM ids.
'use strict';
onmessage = (e) => {
  const { id, ms } = e.data || {};
  if (typeof id !== 'number' || typeof ms !== 'number') return;
  setTimeout(() => postMessage(id), Math.max(0, ms));
};
