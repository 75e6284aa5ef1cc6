/* Engagement Data Service tracker: the hosted original's browser API (accoil.load, identify,
 * group, track, plus page and alias), sending to this service's /v1/batch. Plain JavaScript, no
 * dependencies, no build step. It keeps unsent calls in localStorage across reloads and offline
 * spells, retries with backoff and jitter (honouring Retry-After), flushes with sendBeacon when
 * the page is hidden or left, and gives each call a messageId so a retry is applied once. It
 * sends no property, URL or device data: only ids, event names, traits and times. */
(function (window) {
  "use strict";
  var VERSION = "__VERSION__";
  var STORE = "eds_tracker_queue";
  var USER = "eds_tracker_user";
  var ANONYMOUS = "eds_tracker_anonymous";
  var MAX_QUEUED = 1000;
  var BATCH = 100;
  var FLUSH_MS = 500;
  var config = null;
  var queue = [];
  var timer = null;
  var sending = false;
  var failures = 0;
  var pending = window.accoil && window.accoil._q ? window.accoil._q : [];
  // Where this script came from: the service to send to, unless load() is told another host.
  var script = window.document.currentScript;
  var scriptOrigin = script && script.src ? new URL(script.src).origin : window.location.origin;

  function now() { return new Date().toISOString(); }

  function uuid() {
    if (window.crypto && window.crypto.randomUUID) return window.crypto.randomUUID();
    return "xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx".replace(/[xy]/g, function (c) {
      var r = (Math.random() * 16) | 0;
      return (c === "x" ? r : (r & 3) | 8).toString(16);
    });
  }

  function read(key) {
    try { return window.localStorage.getItem(key); } catch (e) { return null; }
  }

  function write(key, value) {
    try { window.localStorage.setItem(key, value); } catch (e) { /* private mode, full */ }
  }

  function save() { write(STORE, JSON.stringify(queue)); }

  function restore() {
    try { queue = JSON.parse(read(STORE) || "[]"); } catch (e) { queue = []; }
    if (!Array.isArray(queue)) queue = [];
  }

  function anonymousId() {
    var id = read(ANONYMOUS);
    if (!id) { id = uuid(); write(ANONYMOUS, id); }
    return id;
  }

  function enqueue(message) {
    message.messageId = uuid();
    message.timestamp = now();
    if (!message.userId && message.type !== "group") message.anonymousId = anonymousId();
    queue.push(message);
    if (queue.length > MAX_QUEUED) queue.splice(0, queue.length - MAX_QUEUED);
    save();
    schedule(FLUSH_MS);
  }

  function schedule(delay) {
    if (timer || !config) return;
    timer = window.setTimeout(function () { timer = null; flush(); }, delay);
  }

  function body(messages) {
    return JSON.stringify({ batch: messages, sentAt: now(), writeKey: config.apiKey });
  }

  function sent(messages) {
    var ids = {};
    messages.forEach(function (m) { ids[m.messageId] = true; });
    queue = queue.filter(function (m) { return !ids[m.messageId]; });
    save();
  }

  function retry(seconds) {
    failures += 1;
    var backoff = Math.min(60000, 1000 * Math.pow(2, failures - 1));
    var delay = seconds ? seconds * 1000 : backoff / 2 + Math.random() * backoff / 2;
    schedule(delay);
  }

  function flush() {
    if (sending || !config || queue.length === 0) return;
    if (window.navigator.onLine === false) { retry(0); return; }
    var messages = queue.slice(0, BATCH);
    sending = true;
    // text/plain and the key in the body: a simple request, no preflight.
    window.fetch(config.host + "/v1/batch", {
      method: "POST",
      headers: { "Content-Type": "text/plain" },
      body: body(messages),
      keepalive: true,
      credentials: "omit"
    }).then(function (response) {
      sending = false;
      if (response.status === 429 || response.status >= 500) {
        retry(parseInt(response.headers.get("Retry-After"), 10) || 0);
        return;
      }
      sent(messages); // a 2xx, or a 4xx that sending again cannot fix
      failures = 0;
      if (queue.length) schedule(0);
    }, function () { sending = false; retry(0); });
  }

  function beacon() {
    if (!config || queue.length === 0 || !window.navigator.sendBeacon) return;
    var messages = queue.slice(0, BATCH);
    var blob = new Blob([body(messages)], { type: "text/plain" });
    // Once the browser has taken the beacon it delivers it; otherwise the calls stay queued.
    if (window.navigator.sendBeacon(config.host + "/v1/batch", blob)) sent(messages);
  }

  function traitsOf(traits) {
    return traits && typeof traits === "object" && !Array.isArray(traits) ? traits : undefined;
  }

  var accoil = {
    VERSION: VERSION,
    load: function (apiKey, options) {
      options = options || {};
      config = { apiKey: apiKey, host: (options.host || scriptOrigin).replace(/\/$/, "") };
      schedule(0);
    },
    identify: function (userId, traits) {
      userId = String(userId);
      write(USER, userId);
      enqueue({ type: "identify", userId: userId, traits: traitsOf(traits) });
    },
    group: function (groupId, traits) {
      enqueue({ type: "group", groupId: String(groupId), userId: read(USER) || undefined,
        traits: traitsOf(traits) });
    },
    track: function (event) {
      enqueue({ type: "track", event: String(event), userId: read(USER) || undefined });
    },
    page: function (name) {
      enqueue({ type: "page", name: name ? String(name) : undefined,
        userId: read(USER) || undefined });
    },
    alias: function (userId, previousId) {
      userId = String(userId);
      var previous = previousId ? String(previousId) : read(USER) || anonymousId();
      write(USER, userId);
      enqueue({ type: "alias", userId: userId, previousId: previous });
    },
    reset: function () {
      try { window.localStorage.removeItem(USER); window.localStorage.removeItem(ANONYMOUS); }
      catch (e) { /* nothing stored */ }
    },
    flush: flush
  };

  restore();
  window.addEventListener("pagehide", beacon);
  window.addEventListener("visibilitychange", function () {
    if (window.document.visibilityState === "hidden") beacon();
  });
  window.addEventListener("online", function () { failures = 0; schedule(0); });
  window.accoil = accoil;
  // Calls made before this script loaded (a snippet's stub queue: [["load", key], ...]).
  pending.forEach(function (call) { accoil[call[0]].apply(accoil, call.slice(1)); });
})(window);
