// herald's console: a hash-routed page over the admin HTTP API, in plain JavaScript.
//
// Rules this file keeps:
// - The admin key lives in this tab's sessionStorage and travels only as an Authorization
//   header: never in a URL, a cookie or localStorage.
// - Data is put on the page as text (textContent, text nodes, attributes set one by one), never
//   parsed as HTML: whatever an event holds shows as the characters it is.
// - Lists come a page at a time from the server; nothing loads everything.
// - Live parts follow GET /v1/stream, read with fetch (EventSource cannot send the header);
//   the overview reads its counts again every two seconds instead.
"use strict";

const KEY_SLOT = "herald.admin-key";
const THEME_SLOT = "herald.console-theme";
const PAGE = 50;
const TAIL_ROWS = 500;
// The most items a second the tail asks for: more than a person reads. When more happen, the
// hub sends the newest and says it left the rest out, and a busy hub costs a tab no more.
const TAIL_RATE = 100;
const CHART_SECONDS = 60;
const OVERVIEW_EVERY_MS = 2000;

// ---------------------------------------------------------------------------------------------
// The DOM, as text only

function h(tag, props, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(props || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on")) el.addEventListener(name.slice(2), value);
    else if (name === "class") el.className = value;
    else el.setAttribute(name, value === true ? "" : String(value));
  }
  append(el, children);
  return el;
}

/** Empties ``el`` and puts ``children`` in it (nothing for a null, text for a string). */
function fill(el, ...children) {
  el.replaceChildren();
  return append(el, children);
}

function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

/** A value from the data, isolated so that its direction (an RTL override, say) stays in it. */
function text(value) {
  return h("bdi", {}, value === null || value === undefined ? "" : String(value));
}

function link(route, label, props) {
  return h("a", { href: "#" + route, ...props }, label);
}

function agentLink(handle) {
  return link("/agents/" + encodeURIComponent(handle), text(handle));
}

function eventLink(id, label) {
  return link("/events/" + encodeURIComponent(id), label === undefined ? h("span", { class: "mono" }, text(id)) : label);
}

function when(iso) {
  if (!iso) return h("span", { class: "muted" }, "—");
  return h("time", { datetime: iso, title: iso }, ago(iso));
}

function ago(iso) {
  const seconds = Math.round((Date.now() - Date.parse(iso)) / 1000);
  const future = seconds < 0;
  let n = Math.abs(seconds);
  let unit = "s";
  if (n >= 86400 * 2) { n = Math.round(n / 86400); unit = " d"; }
  else if (n >= 3600 * 2) { n = Math.round(n / 3600); unit = " h"; }
  else if (n >= 120) { n = Math.round(n / 60); unit = " min"; }
  return future ? `in ${n}${unit}` : `${n}${unit} ago`;
}

const TONE = {
  pending: "info", sent: "warn", delivered: "ok", expired: "bad",
  scheduled: "info", cancelled: "warn",
  active: "ok", disabled: "bad", failing: "warn",
  leased: "info", failed: "bad", undeliverable: "bad",
  waiting: "warn", done: "ok", dead: "bad",
};

function badge(value, tone) {
  return h("span", { class: "badge " + (tone || TONE[value] || "info") }, text(value));
}

function yesNo(value) {
  return value ? badge("yes", "ok") : h("span", { class: "muted" }, "no");
}

function table(headers, rows, empty) {
  if (!rows.length) return h("p", { class: "empty" }, empty || "Nothing here.");
  const head = h("tr", {}, headers.map((name) => {
    const [label, cls] = Array.isArray(name) ? name : [name, undefined];
    return h("th", { scope: "col", class: cls }, label);
  }));
  return h("div", { class: "scroll" }, h("table", {}, h("thead", {}, head), h("tbody", {}, rows)));
}

function row(...cells) {
  return h("tr", {}, cells.map((cell) => (cell instanceof HTMLTableCellElement ? cell : h("td", {}, cell))));
}

function cell(props, ...children) {
  return h("td", props, ...children);
}

function section(title, ...children) {
  return h("section", { "aria-label": title }, h("h2", {}, title), ...children);
}

function notice() {
  return h("p", { class: "notice", role: "status", "aria-live": "polite" });
}

function say(el, message, tone) {
  el.className = "notice " + (tone || "");
  el.textContent = message;
}

function field(label, input, cls) {
  return h("label", { class: "field " + (cls || "") }, label, input);
}

// ---------------------------------------------------------------------------------------------
// The admin API

class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

function adminKey() {
  return sessionStorage.getItem(KEY_SLOT) || "";
}

/** A URL of the API, relative to the console's own (a proxy's path prefix is kept). */
function apiUrl(path, params) {
  const url = new URL("../" + path, location.href);
  for (const [name, value] of Object.entries(params || {})) {
    if (value !== undefined && value !== null && value !== "") url.searchParams.set(name, value);
  }
  url.hash = "";
  return url;
}

async function api(method, path, { params, body } = {}) {
  const headers = { Authorization: "Bearer " + adminKey(), Accept: "application/json" };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(apiUrl(path, params), {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    cache: "no-store",
    credentials: "omit",
  });
  const payload = response.status === 204 ? null : await response.json().catch(() => null);
  if (!response.ok) {
    const error = (payload && payload.error) || {};
    const failure = new ApiError(response.status, error.code, error.message || response.statusText);
    if (response.status === 401 || response.status === 403) refused(failure);
    throw failure;
  }
  return payload;
}

const get = (path, params) => api("GET", path, { params });
const post = (path, body) => api("POST", path, { body });

/** The key stopped working (rotated, or never the admin's): back to the sign-in. */
function refused(failure) {
  sessionStorage.removeItem(KEY_SLOT);
  signIn(failure.status === 403 ? "That key is not the admin key: " + failure.message : failure.message);
}

// ---------------------------------------------------------------------------------------------
// The admin stream: Server-Sent Events read with fetch and a small parser

/** Follows GET /v1/stream with ``filters`` ({agent, type}) until ``life`` ends, calling
 * ``onItem(kind, data)`` for each item and ``onState(state, detail)`` as it connects, drops and
 * reconnects (from the last id it saw, after the delay the server asked for). */
function follow(life, filters, onItem, onState, from) {
  const stopper = new AbortController();
  life.onEnd(() => stopper.abort());
  const state = { lastId: from || null, retryMs: 2000 };
  (async () => {
    while (!stopper.signal.aborted) {
      try {
        const headers = { Authorization: "Bearer " + adminKey(), Accept: "text/event-stream" };
        if (state.lastId) headers["Last-Event-ID"] = state.lastId;
        const response = await fetch(apiUrl("v1/stream", filters), {
          headers, cache: "no-store", credentials: "omit", signal: stopper.signal,
        });
        if (!response.ok) {
          const payload = await response.json().catch(() => null);
          const error = (payload && payload.error) || {};
          const failure = new ApiError(response.status, error.code, error.message || response.statusText);
          if (response.status === 401 || response.status === 403) return refused(failure);
          if (response.status < 500) return onState && onState("refused", failure.message);
          throw failure;
        }
        onState && onState("live");
        await readEvents(response.body, (frame) => {
          if (frame.retry !== undefined) state.retryMs = frame.retry;
          if (frame.id !== undefined) state.lastId = frame.id;
          if (frame.data === undefined) return;
          let data;
          try { data = JSON.parse(frame.data); } catch { return; }
          onItem(frame.event || "message", data);
        });
      } catch (error) {
        if (stopper.signal.aborted) return;
      }
      onState && onState("reconnecting");
      await pause(state.retryMs, stopper.signal);
    }
  })();
  return state;
}

/** Reads an SSE body to its end, handing each complete frame to ``onFrame``. */
async function readEvents(body, onFrame) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  let frame = {};
  let data = [];
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    const lines = buffer.split(/\r\n|\r|\n/);
    buffer = lines.pop();  // an unfinished line waits for the rest
    for (const line of lines) {
      if (line === "") {
        if (data.length) frame.data = data.join("\n");
        if (Object.keys(frame).length) onFrame(frame);
        frame = {};
        data = [];
        continue;
      }
      if (line.startsWith(":")) continue;  // a comment: the keepalive
      const colon = line.indexOf(":");
      const name = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? "" : line.slice(colon + 1);
      if (value.startsWith(" ")) value = value.slice(1);
      if (name === "data") data.push(value);
      else if (name === "event") frame.event = value;
      else if (name === "id" && !value.includes("\0")) frame.id = value;
      else if (name === "retry" && /^\d+$/.test(value)) frame.retry = Number(value);
    }
  }
}

function pause(ms, signal) {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => { clearTimeout(timer); resolve(); }, { once: true });
  });
}

/** ``work`` run at most once per ``ms``, however often it is asked for, and never twice at once. */
function throttled(life, ms, work) {
  let timer = null;
  let running = false;
  let again = false;
  const run = async () => {
    timer = null;
    if (life.ended) return;
    if (running) { again = true; return; }
    running = true;
    try { await work(); } catch (error) { /* shown where the work shows its errors */ }
    running = false;
    if (again) { again = false; ask(); }
  };
  const ask = () => { if (timer === null && !life.ended) timer = setTimeout(run, ms); };
  life.onEnd(() => clearTimeout(timer));
  return ask;
}

function every(life, ms, work) {
  const timer = setInterval(() => { if (!life.ended) work(); }, ms);
  life.onEnd(() => clearInterval(timer));
}

function liveLabel() {
  const el = h("span", { class: "live", role: "status" }, "connecting");
  el.show = (state, detail) => {
    el.className = "live " + (state === "live" ? "on" : state === "paused" ? "" : "off");
    el.textContent = { live: "live", reconnecting: "reconnecting…", paused: "paused", refused: "not following: " + detail }[state] || state;
  };
  return el;
}

// ---------------------------------------------------------------------------------------------
// Pages and the router

class Life {
  constructor() { this.ended = false; this.ends = []; }
  onEnd(fn) { if (this.ended) fn(); else this.ends.push(fn); }
  end() { this.ended = true; for (const fn of this.ends.splice(0)) fn(); }
}

const ROUTES = [
  [/^\/$/, overviewPage],
  [/^\/agents$/, agentsPage],
  [/^\/agents\/([^/]+)$/, agentPage],
  [/^\/events$/, eventsPage],
  [/^\/events\/([^/]+)$/, eventPage],
  [/^\/endpoints$/, endpointsPage],
  [/^\/tail$/, tailPage],
  [/^\/loop-guards$/, loopGuardsPage],
];

let current = new Life();
const main = () => document.getElementById("main");

function route() {
  const hash = location.hash || "#/";
  if (!hash.startsWith("#/")) return;  // not a page of the console (an in-page jump)
  if (!adminKey()) return signIn();
  const [path, query] = hash.slice(1).split("?");
  const params = new URLSearchParams(query || "");
  current.end();
  current = new Life();
  for (const [pattern, page] of ROUTES) {
    const match = pattern.exec(path);
    if (!match) continue;
    const args = match.slice(1).map(decodeURIComponent);
    showChrome(path);
    const body = main();
    fill(body, h("p", { class: "muted" }, "Loading…"));
    page(current, body, params, ...args).catch((error) => failed(body, error));
    return;
  }
  showChrome(path);
  fill(main(), h("h1", {}, "No such page"), h("p", {}, link("/", "Go to the overview")));
}

function failed(body, error) {
  if (error instanceof ApiError && (error.status === 401 || error.status === 403)) return;
  fill(body,
    h("h1", {}, error instanceof ApiError && error.status === 404 ? "Not found" : "Something went wrong"),
    h("p", { role: "alert" }, text(error.message)),
    h("p", {}, link("/", "Go to the overview")),
  );
}

function showChrome(path) {
  document.getElementById("nav").hidden = false;
  document.getElementById("sign-out").hidden = false;
  for (const a of document.querySelectorAll("#nav a")) {
    const target = a.getAttribute("href").slice(1);
    const here = target === "/" ? path === "/" : path === target || path.startsWith(target + "/");
    if (here) a.setAttribute("aria-current", "page"); else a.removeAttribute("aria-current");
  }
}

function titled(name) {
  document.title = name + " · herald console";
  return h("h1", {}, name);
}

/** Replaces the query of the page's hash without a new page (nor a history entry). */
function setQuery(path, params) {
  const query = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) if (value) query.set(name, value);
  const hash = "#" + path + (query.toString() ? "?" + query : "");
  history.replaceState(null, "", hash);
}

// ---------------------------------------------------------------------------------------------
// Sign-in

function signIn(message) {
  current.end();
  current = new Life();
  document.getElementById("nav").hidden = true;
  document.getElementById("sign-out").hidden = true;
  document.title = "Sign in · herald console";
  // No name on the input and no action on the form: even a submit before this script ran
  // (which the page's policy blocks anyway) would carry no key anywhere.
  const input = h("input", { id: "admin-key", type: "password", autocomplete: "off", spellcheck: "false", required: true });
  const status = h("p", { class: "notice bad", role: "alert" }, message || "");
  const button = h("button", { type: "submit", class: "primary" }, "Sign in");
  const form = h("form", { class: "panel signin", onsubmit: async (e) => {
    e.preventDefault();
    const key = input.value.trim();
    if (!key) return;
    button.disabled = true;
    say(status, "Checking the key…", "");
    try {
      const response = await fetch(apiUrl("v1/stats"), {
        headers: { Authorization: "Bearer " + key }, cache: "no-store", credentials: "omit",
      });
      if (!response.ok) {
        const payload = await response.json().catch(() => null);
        const why = (payload && payload.error && payload.error.message) || response.statusText;
        say(status, response.status === 403 ? "That key is not the admin key: " + why : why, "bad");
        return;
      }
      sessionStorage.setItem(KEY_SLOT, key);
      input.value = "";
      route();
      main().focus();
    } catch (error) {
      say(status, "herald could not be reached: " + error.message, "bad");
    } finally {
      button.disabled = false;
    }
  } },
    h("h1", {}, "Sign in"),
    h("p", { class: "muted" }, "The console uses herald's admin API with the admin key. The key stays in this tab until you sign out or close it."),
    field("Admin key", input),
    h("div", { class: "row", style: null }, button),
    status,
  );
  fill(main(), form);
  input.focus();
}

function signOut() {
  sessionStorage.removeItem(KEY_SLOT);
  history.replaceState(null, "", "#/");
  signIn("Signed out.");
}

// ---------------------------------------------------------------------------------------------
// Overview

async function overviewPage(life, body) {
  const live = liveLabel();
  const cards = h("div", { class: "cards" });
  const chart = rateChart(life);
  const clients = h("div");
  const transports = h("div");
  const top = h("div");
  const failing = h("div");
  const attempts = h("div");
  fill(body,
    h("div", { class: "head" }, titled("Overview"), live),
    cards,
    section("Publishes and deliveries per second", chart.el),
    h("div", { class: "grid" },
      section("Live sessions by client and era", clients),
      section("Failing endpoints", failing),
      section("Most pending", top),
      section("Live sessions by transport and era", transports),
      section("Attempts by way and outcome", attempts),
    ),
  );

  const load = async () => {
    const [stats, failingPage, trips] = await Promise.all([
      get("v1/stats"),
      get("v1/endpoints", { failing: "true", limit: 10 }),
      get("v1/loop-guards", { limit: 1 }),
    ]);
    const events = stats.events;
    const handed = stats.attempts_recorded.filter((a) => HANDED.has(a.outcome)).reduce((n, a) => n + a.count, 0);
    chart.sample(stats.published, handed);
    const sessions = stats.sessions.reduce((n, s) => n + s.count, 0);
    const failingCount = failingPage.endpoints.length + (failingPage.next ? "+" : "");
    const oldest = stats.oldest_pending;
    fill(cards,
      card("pending", "Pending", events.pending + events.sent, `${events.pending} waiting, ${events.sent} sent and not acknowledged`),
      card("oldest", "Oldest pending", oldest ? ago(oldest.created_at).replace(" ago", "") : "—",
        oldest ? [eventLink(oldest.id, "event"), " for ", agentLink(oldest.handle)] : "nothing waits"),
      card("sessions", "Live sessions", sessions, clientsLine(stats.clients)),
      card("failing", "Failing endpoints", failingCount, link("/endpoints?failing=true", "see them")),
      card("delivered", "Delivered", events.delivered, "kept 7 days"),
      card("expired", "Expired", events.expired, "their time to live ran out"),
      card("dead", "Dead", events.dead, link("/events?status=dead", "handed out too often, never acknowledged")),
      card("loop-guards", "Loop guard trips", trips.last_day, link("/loop-guards", "messages refused in the last 24 h")),
    );
    fill(clients, table(["Client", "Era", ["Sessions", "num"]],
      stats.clients.map((c) => row(c.client === null ? h("span", { class: "muted" }, "unnamed") : text(c.client), text(c.era), cell({ class: "num" }, c.count))),
      "No live sessions."));
    fill(transports, table(["Transport", "Era", ["Sessions", "num"]],
      stats.sessions.map((s) => row(text(s.transport), text(s.era), cell({ class: "num" }, s.count))),
      "No live sessions."));
    fill(top, table(["Agent", ["Pending", "num"]],
      stats.top_pending.map((a) => row(agentLink(a.handle), cell({ class: "num" }, a.pending))),
      "No agent has pending events."));
    fill(failing,
      table(["Agent", "Kind", "State", "Last error"],
        failingPage.endpoints.map((e) => row(agentLink(e.agent_handle), text(e.kind), endpointState(e), cell({ class: "wrap" }, text(e.last_error || e.disabled_reason || "")))),
        "Every endpoint is well."),
      failingPage.next ? h("p", {}, link("/endpoints?failing=true", "All failing endpoints")) : null,
    );
    fill(attempts, table(["Way", "Outcome", ["Attempts", "num"]],
      stats.attempts_recorded.map((a) => row(text(a.mechanism), badge(a.outcome), cell({ class: "num" }, a.count))),
      "No attempts yet."));
  };
  await load();
  live.show("live");
  // Read again every OVERVIEW_EVERY_MS, rather than followed item by item: an open overview
  // costs the hub one read of its counts at a time, however busy it is.
  const reload = throttled(life, OVERVIEW_EVERY_MS, async () => {
    try {
      await load();
      live.show("live");
    } catch (error) {
      live.show("reconnecting");
    }
  });
  every(life, OVERVIEW_EVERY_MS, reload);
}

function clientsLine(clients) {
  const byName = new Map();
  for (const c of clients) byName.set(c.client || "unnamed", (byName.get(c.client || "unnamed") || 0) + c.count);
  const names = [...byName].sort((a, b) => b[1] - a[1]).map(([name, n]) => `${n} ${name}`);
  return names.length ? names.slice(0, 3).join(", ") + (names.length > 3 ? ", …" : "") : "none connected";
}

function card(id, label, value, sub) {
  return h("div", { class: "card", id: "card-" + id },
    h("div", { class: "label" }, label),
    h("div", { class: "value" }, String(value)),
    h("div", { class: "sub" }, sub));
}

const HANDED = new Set(["sent", "delivered", "leased"]);

/** Publishes and deliveries per second over the last minute, from the counts read each time the
 * overview is: events published (``published``) and attempts that handed an event over (sent,
 * delivered or leased), each reading's difference from the last over the seconds between. */
function rateChart(life) {
  const publishes = new Array(CHART_SECONDS).fill(0);
  const deliveries = new Array(CHART_SECONDS).fill(0);
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("viewBox", `0 0 ${CHART_SECONDS * 10} 100`);
  svg.setAttribute("preserveAspectRatio", "none");
  svg.setAttribute("role", "img");
  const axis = document.createElementNS(ns, "line");
  for (const [name, value] of [["x1", 0], ["x2", CHART_SECONDS * 10], ["y1", 99], ["y2", 99], ["class", "axis"]]) axis.setAttribute(name, value);
  const lineA = document.createElementNS(ns, "polyline");
  const lineB = document.createElementNS(ns, "polyline");
  lineA.setAttribute("class", "a");
  lineB.setAttribute("class", "b");
  lineA.setAttribute("vector-effect", "non-scaling-stroke");
  lineB.setAttribute("vector-effect", "non-scaling-stroke");
  svg.append(axis, lineA, lineB);
  const nowA = h("span", {}, "0");
  const nowB = h("span", {}, "0");
  const peak = h("span", { class: "muted" }, "");
  const legend = h("div", { class: "legend" },
    h("span", {}, h("span", { class: "swatch sa" }), "publishes/s ", h("strong", { id: "publish-rate" }, nowA)),
    h("span", {}, h("span", { class: "swatch sb" }), "deliveries/s ", h("strong", { id: "delivery-rate" }, nowB)),
    peak);
  const draw = () => {
    const highest = Math.max(...publishes, ...deliveries);
    const top = Math.max(1, highest);
    const points = (values) => values.map((v, i) => `${i * 10 + 5},${(98 - (v / top) * 94).toFixed(1)}`).join(" ");
    lineA.setAttribute("points", points(publishes));
    lineB.setAttribute("points", points(deliveries));
    nowA.textContent = String(publishes[CHART_SECONDS - 1]);
    nowB.textContent = String(deliveries[CHART_SECONDS - 1]);
    peak.textContent = `peak ${highest}/s in the last minute`;
    svg.setAttribute("aria-label", `Now: ${nowA.textContent} publishes a second, ${nowB.textContent} deliveries a second; peak ${highest} per second`);
  };
  draw();
  let last = null;
  return {
    el: h("div", { class: "chart" }, svg, legend),
    sample(published, delivered) {
      const at = performance.now();
      if (last !== null) {
        const seconds = Math.max((at - last.at) / 1000, 0.001);
        const rate = (now, before) => Math.max(0, Math.round((now - before) / seconds));
        const [p, d] = [rate(published, last.published), rate(delivered, last.delivered)];
        for (let n = Math.min(Math.max(Math.round(seconds), 1), CHART_SECONDS); n > 0; n--) {
          publishes.shift(); publishes.push(p);
          deliveries.shift(); deliveries.push(d);
        }
        draw();
      }
      last = { at, published, delivered };
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Agents

async function agentsPage(life, body, params) {
  const search = h("input", { id: "agent-search", type: "search", value: params.get("search") || "", autocomplete: "off", spellcheck: "false" });
  const list = h("div");
  const again = () => show().catch((error) => failed(body, error));
  const pager = new Pager(again);
  fill(body,
    titled("Agents"),
    h("div", { class: "panel" },
      h("form", { class: "row", role: "search", onsubmit: (e) => { e.preventDefault(); pager.reset(); again(); } },
        field("Find by handle", search, "grow"),
        h("button", { type: "submit" }, "Search")),
    ),
    h("section", { "aria-label": "Agents" }, list, pager.el),
  );
  let typing = null;
  search.addEventListener("input", () => {
    clearTimeout(typing);
    typing = setTimeout(() => { pager.reset(); again(); }, 250);
  });
  life.onEnd(() => clearTimeout(typing));

  let shown = 0;
  async function show() {
    const asked = ++shown;
    const value = search.value.trim().toLowerCase();  // handles are lower case
    setQuery("/agents", { search: value });
    let page;
    try {
      page = await get("v1/agents", { search: value, cursor: pager.cursor, limit: PAGE });
    } catch (error) {
      if (!(error instanceof ApiError && error.status === 422)) throw error;
      if (asked === shown) fill(list, h("p", { class: "notice bad", role: "status" }, text(error.message)));
      pager.update(null);
      return;
    }
    if (asked !== shown || life.ended) return;  // a later search answered first
    fill(list, table(
      ["Handle", ["Pending", "num"], ["Live sessions", "num"], "Last activity"],
      page.agents.map((a) => row(agentLink(a.handle), cell({ class: "num" }, a.pending), cell({ class: "num" }, a.live_sessions), when(a.last_activity_at))),
      value ? "No agent's handle contains that." : "No agents yet: herald agent add HANDLE makes one.",
    ));
    pager.update(page.next);
  }
  await show();
}

/** Forward and back through pages by their cursors (the server hands out ``next`` only). */
class Pager {
  constructor(onMove) {
    this.cursors = [null];
    this.onMove = onMove;
    this.back = h("button", { type: "button", onclick: () => { this.cursors.pop(); this.onMove(); } }, "← Previous");
    this.forward = h("button", { type: "button", onclick: () => { this.cursors.push(this.nextCursor); this.onMove(); } }, "Next →");
    this.where = h("span", { class: "muted" });
    this.el = h("div", { class: "pager" }, this.back, this.forward, this.where);
  }
  get cursor() { return this.cursors[this.cursors.length - 1]; }
  reset() { this.cursors = [null]; }
  update(next) {
    this.nextCursor = next;
    this.back.disabled = this.cursors.length < 2;
    this.forward.disabled = !next;
    this.where.textContent = `page ${this.cursors.length}`;
  }
}

async function agentPage(life, body, params, name) {
  const summary = h("div");
  const sessions = h("div");
  const endpoints = h("div");
  const pending = h("div");
  const recent = h("div");
  const live = liveLabel();
  const agent = await get("v1/agents/" + encodeURIComponent(name));
  fill(body,
    h("div", { class: "head" }, titled(agent.handle), live),
    summary,
    section("Live sessions", sessions),
    section("Endpoints", endpoints),
    section("Open events", pending, h("p", { class: "muted" }, "Pending, or sent and not yet acknowledged; the newest 20.")),
    section("Recent events", recent, h("p", {}, link("/events?agent=" + encodeURIComponent(agent.handle), "All of its events"))),
    section("Send a test event", sendForm(agent.handle)),
  );

  const loadSummary = async () => {
    const a = await get("v1/agents/" + encodeURIComponent(agent.id));
    fill(summary, h("section", { "aria-label": "Agent" }, h("dl", { class: "facts" },
      fact("Id", h("span", { class: "mono" }, text(a.id))),
      fact("Open events", String(a.pending)),
      fact("Live sessions", String(a.live_sessions)),
      fact("Last activity", when(a.last_activity_at)),
      fact("Created", when(a.created_at)),
      fact("Delivery overrides", a.delivery && Object.keys(a.delivery).length ? h("code", {}, text(JSON.stringify(a.delivery))) : h("span", { class: "muted" }, "none")),
      fact("Preferences", a.preferences && Object.keys(a.preferences).length ? h("code", {}, text(JSON.stringify(a.preferences))) : h("span", { class: "muted" }, "none")),
      fact("Loop guard", a.loop_guard ? `${a.loop_guard.exchanges} exchanges with one agent in ${a.loop_guard.window_s} s, ${a.loop_guard.per_minute} messages a minute` : "—"),
    )));
  };
  const loadSessions = async () => {
    const answer = await get(`v1/agents/${encodeURIComponent(agent.id)}/sessions`);
    fill(sessions, table(
      ["Client", "Transport", "Era", "Channel", "Elicitation", "Stream", "Log", "Push", "Connected", "Seen"],
      answer.sessions.map((s) => {
        const caps = s.capabilities || {};
        const elicit = caps.elicitation || {};
        const forms = [elicit.form && "form", elicit.url && "url"].filter(Boolean).join(", ");
        return row(
          [text(s.client.name || "unnamed"), " ", h("span", { class: "muted" }, text(s.client.version || ""))],
          text(s.transport), text(s.era), yesNo(caps.channel), forms ? text(forms) : yesNo(false),
          yesNo(caps.stream), yesNo(caps.log), yesNo(s.can_push), when(s.connected_at), when(s.seen_at));
      }),
      "No live session: what is published waits for a drain, or goes to its endpoints.",
    ));
  };
  const loadEndpoints = async () => {
    const answer = await get(`v1/agents/${encodeURIComponent(agent.id)}/endpoints`);
    fill(endpoints, endpointTable(answer.endpoints, false, loadEndpoints));
  };
  const loadEvents = async () => {
    // Open is pending, or sent and not yet acknowledged: two pages, newest first together.
    const [waiting, sent, latest] = await Promise.all([
      get("v1/events", { agent: agent.id, status: "pending", limit: 20 }),
      get("v1/events", { agent: agent.id, status: "sent", limit: 20 }),
      get("v1/events", { agent: agent.id, limit: 20 }),
    ]);
    const open = [...waiting.events, ...sent.events]
      .sort((a, b) => (a.created_at === b.created_at ? b.seq - a.seq : a.created_at < b.created_at ? 1 : -1))
      .slice(0, 20);
    // A page narrowed by status looks at a bounded number of events: one that found none may
    // still have a next, and then the agent's open events are older than what it looked at.
    const further = waiting.next || sent.next;
    fill(pending, eventTable(open, false, further
      ? "None open among its newest events; older ones may be: see Events, status pending or sent."
      : "Nothing open: every event was delivered or expired."));
    fill(recent, eventTable(latest.events, false, "No events yet."));
  };
  const loadAll = () => Promise.all([loadSummary(), loadSessions(), loadEndpoints(), loadEvents()]);
  await loadAll();
  const reload = throttled(life, 1000, () => Promise.all([loadSummary(), loadEndpoints(), loadEvents()]));
  every(life, 10000, () => loadSessions().catch(() => {}));
  follow(life, { agent: agent.id }, reload, live.show);
}

function fact(label, value) {
  return [h("dt", {}, label), h("dd", {}, value)];
}

function eventTable(events, withAgent, empty) {
  return table(
    ["Event", withAgent ? "Agent" : null, ["Seq", "num"], "Type", "Text", "Status", "Created"].filter(Boolean),
    events.map((e) => row(...[
      eventLink(e.id),
      // A page of events names each agent by id: a link to it, not one more read per row.
      withAgent ? link("/agents/" + encodeURIComponent(e.agent), h("span", { class: "mono" }, text(e.agent))) : null,
      cell({ class: "num" }, e.seq),
      text(e.type),
      cell({ class: "wrap" }, text(preview(e.text))),
      badge(e.status),
      when(e.created_at),
    ].filter((c) => c !== null))),
    empty,
  );
}

/** JSON as text, its invisible format characters (direction overrides, zero-width joiners)
 * written as escapes: in data, an operator sees them rather than their effect. */
function json(value, indent = 2) {
  return JSON.stringify(value, null, indent).replace(/\p{Cf}/gu, (c) => "\\u" + c.codePointAt(0).toString(16).padStart(4, "0"));
}

function preview(value) {
  const flat = String(value || "").replace(/\s+/g, " ");
  return flat.length > 120 ? flat.slice(0, 119) + "…" : flat;
}

const PRIORITIES = ["low", "normal", "high", "urgent"];

function sendForm(handle) {
  const to = h("input", { id: "send-to", value: handle || "", autocomplete: "off", spellcheck: "false", title: "a handle, or several separated by commas: one event for each" });
  const topic = h("input", { id: "send-topic", value: "", autocomplete: "off", spellcheck: "false", title: "instead of To: one event for each agent subscribed to this topic" });
  const type = h("input", { id: "send-type", value: "console.test", required: true, autocomplete: "off", spellcheck: "false" });
  const message = h("input", { id: "send-text", value: "A test event from the console", required: true, autocomplete: "off" });
  const priority = h("select", { id: "send-priority", title: "low: never pushed, only drained; urgent: passes quiet hours" },
    PRIORITIES.map((p) => h("option", { value: p, selected: p === "normal" }, p)));
  const status = notice();
  const button = h("button", { type: "submit", class: "primary" }, "Send");
  return h("form", { class: "send", "aria-label": "Send a test event", onsubmit: async (e) => {
    e.preventDefault();
    button.disabled = true;
    try {
      // "a, b, c" is a list: herald stores the event once for each agent, or for none.
      const handles = to.value.split(",").map((one) => one.trim());
      const addressed = handles.length > 1 ? handles : handles[0];
      const named = topic.value.trim();
      const body = { type: type.value.trim(), text: message.value };
      if (priority.value !== "normal") body.priority = priority.value;
      // A topic and handles together is herald's to refuse, in its words.
      if (named) body.topic = named;
      if (!named || addressed) body.to = addressed;
      const sent = await post("v1/events", body);
      if (sent.topic !== undefined) {
        const links = sent.events.flatMap((each, index) => [index ? ", " : "", eventLink(each.id)]);
        fill(status, sent.reached ? `Sent to ${sent.reached} subscribers of ${sent.topic}: ` : sent.note, ...links);
      } else if (sent.events) {
        const links = sent.events.flatMap((each, index) => [index ? ", " : "", eventLink(each.id), each.duplicate ? " (a duplicate)" : ""]);
        fill(status, `Sent ${sent.events.length} events: `, ...links);
      } else {
        fill(status, "Sent ", eventLink(sent.id), sent.duplicate ? " (a duplicate)" : "");
      }
      status.className = "notice ok";
    } catch (error) {
      say(status, error.message, "bad");
    } finally {
      button.disabled = false;
    }
  } },
    h("div", { class: "row" },
      handle ? null : field("To (handle)", to),
      handle ? null : field("Topic", topic),
      field("Type", type),
      field("Text", message, "grow"),
      field("Priority", priority),
      button),
    status,
  );
}

// ---------------------------------------------------------------------------------------------
// Events

const STATUSES = ["", "pending", "sent", "delivered", "expired", "dead", "scheduled", "cancelled"];

async function eventsPage(life, body, params) {
  const agent = h("input", { id: "events-agent", value: params.get("agent") || "", autocomplete: "off", spellcheck: "false" });
  const status = h("select", { id: "events-status" }, STATUSES.map((s) => h("option", { value: s, selected: params.get("status") === s }, s || "any")));
  const type = h("input", { id: "events-type", value: params.get("type") || "", autocomplete: "off", spellcheck: "false", placeholder: "build.* or exact" });
  const topic = h("input", { id: "events-topic", value: params.get("topic") || "", autocomplete: "off", spellcheck: "false", placeholder: "repo/* or exact" });
  const list = h("div");
  const problem = notice();
  const again = () => show().catch((error) => failed(body, error));
  const pager = new Pager(again);
  fill(body,
    titled("Events"),
    h("div", { class: "panel" },
      h("form", { class: "row", role: "search", onsubmit: (e) => { e.preventDefault(); pager.reset(); again(); } },
        field("Agent (handle or id)", agent), field("Status", status), field("Type", type), field("Topic", topic),
        h("button", { type: "submit" }, "Filter")),
      problem),
    h("section", { "aria-label": "Events" }, list, pager.el),
  );
  async function show() {
    const filters = { agent: agent.value.trim(), status: status.value, type: type.value.trim(), topic: topic.value.trim() };
    setQuery("/events", filters);
    try {
      const page = await get("v1/events", { ...filters, cursor: pager.cursor, limit: PAGE });
      say(problem, "");
      fill(list, eventTable(page.events, true,
        page.next ? "None match among the events this page looked at: go on with the next page." : "No events match."));
      pager.update(page.next);
    } catch (error) {
      if (error instanceof ApiError && error.status === 422) say(problem, error.message, "bad");
      else throw error;
    }
  }
  await show();
}

async function eventPage(life, body, params, id) {
  const live = liveLabel();
  const facts = h("section", { "aria-label": "Event" });
  const content = h("div");
  const timeline = h("div", { id: "attempts" });
  const deliveries = h("div");
  const replies = h("div");
  const status = notice();
  const redeliver = h("button", { type: "button", id: "redeliver", onclick: async () => {
    redeliver.disabled = true;
    try {
      const event = await post(`v1/events/${encodeURIComponent(id)}/redeliver`);
      say(status, `Offered again: the event is ${event.status}.`, "ok");
      await load();
    } catch (error) {
      say(status, error.message, "bad");
    } finally {
      redeliver.disabled = false;
    }
  } }, "Redeliver");
  // A scheduled event is cancelled; a pending one nothing handed out yet is recalled.
  const cancel = h("button", { type: "button", id: "cancel", onclick: async () => {
    cancel.disabled = true;
    try {
      const event = await api("DELETE", `v1/events/${encodeURIComponent(id)}`);
      say(status, `Cancelled: the event is ${event.status}.`, "ok");
      await load();
    } catch (error) {
      say(status, error.message, "bad");
    } finally {
      cancel.disabled = false;
    }
  } }, "Cancel");
  let event = await get("v1/events/" + encodeURIComponent(id));
fill(body,
    h("div", { class: "head" }, titled("Event"), live),
    h("div", { class: "grid" }, facts, section("Text and data", content)),
    section("Attempts", timeline, h("div", { class: "row" }, redeliver, cancel), status),
    section("Webhook and OpenClaw deliveries", deliveries),
    section("Replies", replies),
  );

  function show() {
    const e = event;
    fill(facts, h("dl", { class: "facts" },
      fact("Id", h("span", { class: "mono" }, text(e.id))),
      fact("Status", h("span", { id: "event-status" }, badge(e.status))),
      fact("Agent", h("span", { id: "event-agent" }, h("span", { class: "mono" }, text(e.agent)))),
      fact("Seq", String(e.seq)),
      fact("Type", text(e.type)),
      e.topic ? fact("Topic", h("span", { id: "event-topic", class: "mono" }, text(e.topic))) : null,
      fact("Created", when(e.created_at)),
      e.deliver_at ? fact("Due", h("span", { id: "event-due" }, when(e.deliver_at))) : null,
      fact("Expires", when(e.expires_at)),
      e.from ? fact("From", text(e.from)) : null,
      e.reply_to ? fact("Reply to", eventLink(e.reply_to)) : null,
      e.dedupe_key ? fact("Dedupe key", text(e.dedupe_key)) : null,
    ));
    fill(content,
      h("h3", {}, "Text"),
      h("pre", { id: "event-text", dir: "auto" }, text(e.text)),
      e.data !== null ? [h("h3", {}, "Data"), h("pre", { id: "event-data" }, json(e.data))] : null,
      e.reply ? [h("h3", {}, "Reply form"), h("pre", {}, json(e.reply))] : null,
    );
    // The next retry belongs to an endpoint's delivery: shown on that endpoint's latest attempt.
    const waiting = new Map(e.deliveries.filter((d) => d.next_attempt_at).map((d) => [d.endpoint, d.next_attempt_at]));
    const latest = new Map();
    e.attempts.forEach((a, i) => latest.set(a.session, i));
    fill(timeline, table(
      ["When", "Way", "Session or endpoint", "Outcome", "Error", "Next retry"],
      e.attempts.map((a, i) => row(
        when(a.at), text(a.mechanism),
        h("span", { class: "mono" }, text(a.session || "")),
        badge(a.outcome),
        cell({ class: "wrap" }, text(a.error || "")),
        latest.get(a.session) === i && waiting.has(a.session) ? when(waiting.get(a.session)) : "",
      )),
      "No attempt yet: nothing has tried to deliver it.",
    ));
    fill(deliveries, table(
      ["Endpoint", "State", ["Tries", "num"], "Next attempt", "Last error"],
      e.deliveries.map((d) => row(h("span", { class: "mono" }, text(d.endpoint)), badge(d.state), cell({ class: "num" }, d.tries), when(d.next_attempt_at), cell({ class: "wrap" }, text(d.last_error || "")))),
      "None: the agent has no endpoint, or its session holds the event back.",
    ));
    fill(replies, table(
      ["When", "Text", "Data", "Routed as"],
      e.replies.map((r) => row(when(r.created_at), cell({ class: "wrap" }, text(r.text)), r.data === null ? "" : h("code", {}, json(r.data, 0)), r.routed_event_id ? eventLink(r.routed_event_id) : "")),
      "No replies.",
    ));
  }
  async function load() {
    event = await get("v1/events/" + encodeURIComponent(id));
    show();
  }
  show();
  // The handle of the agent: one more read, for a link that names it.
  get("v1/agents/" + encodeURIComponent(event.agent)).then((a) => {
    const shown = document.getElementById("event-agent");
    if (shown) fill(shown, agentLink(a.handle));
    event.handle = a.handle;
  }, () => {});
  const reload = throttled(life, 250, async () => {
    await load();
    const shown = document.getElementById("event-agent");
    if (event.handle && shown) fill(shown, agentLink(event.handle));
  });
  follow(life, { agent: event.agent }, (kind, item) => {
    if (item.event && item.event.id === id) reload();
  }, live.show);
}

// ---------------------------------------------------------------------------------------------
// Endpoints

async function endpointsPage(life, body, params) {
  const failing = h("input", { id: "failing-only", type: "checkbox", checked: params.get("failing") === "true" });
  const list = h("div");
  const live = liveLabel();
  const again = () => show().catch((error) => failed(body, error));
  const pager = new Pager(again);
  failing.addEventListener("change", () => { pager.reset(); again(); });
  fill(body,
    h("div", { class: "head" }, titled("Endpoints"), live),
    h("div", { class: "panel" }, h("label", { class: "check" }, failing, "Only the disabled or failing")),
    h("section", { "aria-label": "Endpoints" }, list, pager.el),
  );
  async function show() {
    setQuery("/endpoints", { failing: failing.checked ? "true" : "" });
    const page = await get("v1/endpoints", { failing: failing.checked ? "true" : "", cursor: pager.cursor, limit: PAGE });
    fill(list, endpointTable(page.endpoints, true, show));
    pager.update(page.next);
  }
  await show();
  const reload = throttled(life, 1000, show);
  follow(life, {}, (kind) => { if (kind === "endpoint") reload(); }, live.show);
}

function endpointState(e) {
  if (e.state === "disabled") return badge("disabled");
  if (e.failing_since) return badge("failing");
  return badge(e.state);
}

function endpointTable(endpoints, withAgent, reload) {
  return table(
    [withAgent ? "Agent" : null, "Kind", "URL", "State", "Last error", "Failing since", "Last attempt", "Next attempt", ""].filter((x) => x !== null),
    endpoints.map((e) => {
      const status = h("span", { class: "notice", role: "status" });
      const enable = e.state === "disabled" ? h("button", { type: "button", "aria-label": `Enable the ${e.kind} endpoint of ${e.agent_handle || "this agent"}`, onclick: async () => {
        enable.disabled = true;
        try {
          await post(`v1/endpoints/${encodeURIComponent(e.id)}/enable`);
          await reload();
        } catch (error) {
          status.textContent = error.message;
          enable.disabled = false;
        }
      } }, "Enable") : null;
      const cells = [
        withAgent ? agentLink(e.agent_handle) : null,
        text(e.kind + (e.mode ? ` (${e.mode})` : "")),
        cell({ class: "wrap mono" }, text(e.url)),
        endpointState(e),
        cell({ class: "wrap" }, text(e.disabled_reason || e.last_error || "")),
        when(e.failing_since),
        when(e.last_attempt_at),
        when(e.next_attempt_at),
        h("td", {}, enable, status),
      ].filter((c) => c !== null);
      return h("tr", { "data-endpoint": e.id }, cells.map((c) => (c instanceof HTMLTableCellElement ? c : h("td", {}, c))));
    }),
    withAgent ? "No endpoints." : "No webhook or OpenClaw endpoint.",
  );
}

// ---------------------------------------------------------------------------------------------
// Loop guard trips

async function loopGuardsPage(life, body) {
  const list = h("div");
  const live = liveLabel();
  fill(body,
    h("div", { class: "head" }, titled("Loop guard trips"), live),
    h("p", { class: "muted" }, "Messages between agents that a loop guard refused: nothing of them was stored, and the sender was told when it may go on. An agent's limits are on its page; herald agent set-loop-guard raises them."),
    h("section", { "aria-label": "Loop guard trips" }, list),
  );
  const load = async () => {
    const answer = await get("v1/loop-guards", { limit: 100 });
    fill(list,
      h("p", { id: "trips-last-day" }, `${answer.last_day} in the last 24 hours; the newest ${answer.trips.length} kept:`),
      table(["When", "Sender", "To", "Limit", "Thread"],
        answer.trips.map((t) => row(when(t.at), agentLink(t.agent.handle), agentLink(t.to), text(`${t.limit}: ${t.maximum}`), h("span", { class: "mono" }, text(t.thread)))),
        "No loop guard has tripped."));
  };
  await load();
  live.show("live");
  const reload = throttled(life, OVERVIEW_EVERY_MS, async () => {
    try {
      await load();
      live.show("live");
    } catch (error) {
      live.show("reconnecting");
    }
  });
  every(life, OVERVIEW_EVERY_MS, reload);
}

// ---------------------------------------------------------------------------------------------
// Live tail

async function tailPage(life, body, params) {
  const agent = h("input", { id: "tail-agent", value: params.get("agent") || "", autocomplete: "off", spellcheck: "false" });
  const type = h("input", { id: "tail-type", value: params.get("type") || "", autocomplete: "off", spellcheck: "false", placeholder: "build.* or exact" });
  const live = liveLabel();
  const rows = h("tbody", { id: "tail-rows" });
  const empty = h("p", { class: "empty" }, "Waiting for what happens next…");
  const pauseButton = h("button", { type: "button", id: "tail-pause", "aria-pressed": "false" }, "Pause");
  let following = null;
  let cursor = null;
  let paused = false;

  const start = (from) => {
    if (following) following.end();
    following = new Life();
    life.onEnd(() => following.end());
    const filters = { agent: agent.value.trim(), type: type.value.trim(), max_rate: TAIL_RATE };
    const state = follow(following, filters, (kind, item) => {
      cursor = state.lastId;
      add(kind, item);
    }, live.show, from);
  };
  const add = (kind, item) => {
    empty.hidden = true;
    rows.prepend(tailRow(kind, item));
    while (rows.childElementCount > TAIL_ROWS) rows.lastElementChild.remove();
  };
  pauseButton.addEventListener("click", () => {
    paused = !paused;
    pauseButton.setAttribute("aria-pressed", String(paused));
    pauseButton.textContent = paused ? "Resume" : "Pause";
    // Paused, the stream is closed and costs herald nothing; resumed, it goes on from the last
    // item seen: what happened meanwhile, or its newest after a row saying the rest was left out.
    if (paused) { following.end(); live.show("paused"); } else start(cursor);
  });

  fill(body,
    h("div", { class: "head" }, titled("Live tail"), live),
    h("div", { class: "panel" },
      h("form", { class: "row", role: "search", onsubmit: (e) => {
        e.preventDefault();
        setQuery("/tail", { agent: agent.value.trim(), type: type.value.trim() });
        fill(rows);
        empty.hidden = false;
        cursor = null;
        if (!paused) start(null);
      } },
        field("Agent (handle or id)", agent), field("Type", type),
        h("button", { type: "submit" }, "Filter"),
        pauseButton,
        h("button", { type: "button", onclick: () => { fill(rows); empty.hidden = false; } }, "Clear")),
    ),
    section("Send a test event", sendForm(null)),
    h("section", { "aria-label": "Stream" },
      h("div", { class: "scroll" }, h("table", {},
        h("thead", {}, h("tr", {}, ["When", "What", "Agent", "Event", "Type", "Detail"].map((name) => h("th", { scope: "col" }, name)))),
        rows)),
      empty),
  );
  start(null);
}

function tailRow(kind, item) {
  const event = item.event || {};
  const detail = [];
  if (kind === "attempt") {
    detail.push(text(item.way), " ", badge(item.outcome));
    if (item.session) detail.push(" session ", h("span", { class: "mono" }, text(item.session)));
    if (item.endpoint) detail.push(" endpoint ", h("span", { class: "mono" }, text(item.endpoint)));
    if (item.error) detail.push(" ", h("span", { class: "muted" }, text(item.error)));
    if (item.next_attempt_at) detail.push(" next try ", when(item.next_attempt_at));
  } else if (kind === "acked") {
    if (item.by) detail.push("by ", h("span", { class: "mono" }, text(item.by)));
  } else if (kind === "endpoint") {
    const endpoint = item.endpoint || {};
    detail.push(text(endpoint.kind), " ", badge(item.state, { created: "info", deleted: "bad", failing: "warn", recovered: "ok", disabled: "bad", enabled: "ok" }[item.state]));
    if (item.reason) detail.push(" ", h("span", { class: "muted" }, text(item.reason)));
  } else if (kind === "loop_guard") {
    detail.push("refused a message to ", agentLink(item.to), ` (${item.limit}: ${item.maximum}) thread `, h("span", { class: "mono" }, text(item.thread)));
  } else if (kind === "gap") {
    detail.push(text(item.message || "Some items are older than herald keeps: the tail goes on after them."));
  } else if (kind === "skipped") {
    detail.push(text(`More happened than the tail shows (${TAIL_RATE} items a second at most): some items were left out here; Events lists every event.`));
  }
  const agent = item.agent || {};
  return h("tr", { "data-kind": kind },
    h("td", {}, item.at ? when(item.at) : ""),
    h("td", {}, badge(kind, { published: "info", attempt: "warn", acked: "ok", expired: "bad", endpoint: "info", loop_guard: "bad", gap: "bad", skipped: "warn" }[kind])),
    h("td", {}, agent.handle ? agentLink(agent.handle) : ""),
    h("td", {}, event.id ? eventLink(event.id) : ""),
    h("td", {}, text(event.type || "")),
    h("td", { class: "wrap" }, detail),
  );
}

// ---------------------------------------------------------------------------------------------
// The frame: theme, sign-out, skip link

const THEMES = ["auto", "light", "dark"];

function applyTheme(theme) {
  if (theme === "auto") delete document.documentElement.dataset.theme;
  else document.documentElement.dataset.theme = theme;
  document.getElementById("theme").textContent = "Theme: " + theme;
}

function start() {
  let theme = localStorage.getItem(THEME_SLOT) || "auto";
  applyTheme(theme);
  document.getElementById("theme").addEventListener("click", () => {
    theme = THEMES[(THEMES.indexOf(theme) + 1) % THEMES.length];
    localStorage.setItem(THEME_SLOT, theme);
    applyTheme(theme);
  });
  document.getElementById("sign-out").addEventListener("click", signOut);
  document.getElementById("skip").addEventListener("click", () => main().focus());
  window.addEventListener("hashchange", () => { route(); main().focus(); });
  route();
}

start();
