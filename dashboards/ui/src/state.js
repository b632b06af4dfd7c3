/* dashboards/ui/src/state.js - what the views share while a page is on show: the runs list's
 * poll timer and event stream (closed when the page changes), the page on show ("run/ID" or
 * "trace/ID" and its waterfall, so that a span's link on its own page selects the span without
 * drawing the page again) and the router, set by app.js. */
export const ui = { poll: null, events: null, current: { key: null, wf: null }, route: null };
