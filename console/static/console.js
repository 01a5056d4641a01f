// pgq console: reads and acts only through pgq's HTTP API. The token
// (when pgq runs with --auth-token) is asked once and kept in this tab's
// sessionStorage. Values from the server are set as text, never as HTML.
"use strict";

const TOKEN_KEY = "pgq-token";
const REFRESH_MS = 5000;
const $ = (id) => document.getElementById(id);

class Unauthorized extends Error {}

async function api(method, path, body) {
  const headers = { Accept: "application/json" };
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) headers.Authorization = "Bearer " + token;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  if (res.status === 401) throw new Unauthorized("unauthorized");
  const doc = await res.json().catch(() => null);
  if (!res.ok) {
    const msg = doc && doc.error ? doc.error.code + ": " + doc.error.message : res.status + " " + res.statusText;
    throw new Error(method + " " + path + ": " + msg);
  }
  return doc;
}

// ---- formatting

function bytes(n) {
  if (n == null) return "–";
  const u = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return (i === 0 ? n : n.toFixed(1)) + " " + u[i];
}
const num = (n) => (n == null ? "–" : Number(n).toLocaleString("en-US"));
const secs = (s) => (s == null ? "–" : s < 120 ? s.toFixed(1) + " s" : s < 7200 ? (s / 60).toFixed(1) + " min" : (s / 3600).toFixed(1) + " h");

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    else if (k.startsWith("data-")) e.setAttribute(k, v);
    else e[k] = v;
  }
  for (const c of children) e.append(c == null ? "" : c);
  return e;
}

function setText(id, text, cls) {
  const e = $(id);
  e.textContent = text;
  if (cls !== undefined) e.className = cls;
}

// ---- charts: one polyline over the samples, red bands where ingest was disconnected

const SVG = "http://www.w3.org/2000/svg";

function chart(id, samples, value) {
  const svg = $(id);
  svg.replaceChildren();
  if (samples.length === 0) return;
  const t0 = Date.parse(samples[0].time), t1 = Date.parse(samples[samples.length - 1].time);
  const span = Math.max(t1 - t0, 1);
  const vals = samples.map(value);
  const max = Math.max(...vals, 1);
  const x = (s) => ((Date.parse(s.time) - t0) / span) * 300;
  const y = (v) => 78 - (v / max) * 74;
  samples.forEach((s, i) => {
    if (!s.connected && i + 1 < samples.length) {
      const r = document.createElementNS(SVG, "rect");
      r.setAttribute("class", "off");
      r.setAttribute("x", x(s));
      r.setAttribute("y", 0);
      r.setAttribute("width", Math.max(x(samples[i + 1]) - x(s), 1));
      r.setAttribute("height", 80);
      svg.append(r);
    }
  });
  const line = document.createElementNS(SVG, "polyline");
  line.setAttribute("points", samples.map((s, i) => x(s).toFixed(1) + "," + y(vals[i]).toFixed(1)).join(" "));
  svg.append(line);
  const title = document.createElementNS(SVG, "title");
  title.textContent = "max " + max.toLocaleString("en-US") + " over " + secs(span / 1000);
  svg.append(title);
}

function rates(samples) {
  return samples.map((s, i) => {
    if (i === 0) return 0;
    const p = samples[i - 1];
    const dt = (Date.parse(s.time) - Date.parse(p.time)) / 1000;
    const d = s.changes_written - p.changes_written;
    return dt > 0 && d > 0 ? d / dt : 0; // a restart resets the counter
  });
}

// ---- sections

function renderStatus(st) {
  const state = st.connected ? "streaming" : st.running ? "disconnected" : "stopped";
  setText("ingest-state", state, st.connected ? "ok" : "bad");
  setText("ingest-slot", st.slot + (st.slot_failover ? " (failover)" : "") + " · publication " + st.publication);
  setText("ingest-confirmed", st.confirmed_lsn);
  setText("ingest-walend", st.server_wal_end);
  setText("ingest-changes", num(st.changes_written));
  const jc = st.journal_corrupt;
  const corrupt = jc ? "journal corrupt at offset " + jc.offset + " (segment " + jc.segment + ", found by " + jc.found_by + "): " + jc.reason : "";
  setText("ingest-error", st.journal_error || corrupt || st.spill_error || st.last_error || "none", st.journal_error || corrupt || st.last_error ? "bad" : "");
  setText("journal-offsets", num(st.journal_first_offset) + " … " + num(st.journal_last_offset));
  const ix = st.index || {};
  setText("journal-index", ix.stale ? "stale (healing)" : "current", ix.stale ? "bad" : "");
}

function renderHistory(h) {
  const s = h.samples || [];
  chart("chart-lag", s, (x) => x.slot_lag_bytes);
  chart("chart-journal", s, (x) => x.journal_bytes);
  const r = rates(s);
  const withRate = s.map((x, i) => Object.assign({}, x, { rate: r[i] }));
  chart("chart-rate", withRate, (x) => x.rate);
  const last = s[s.length - 1];
  setText("lag-now", last ? bytes(last.slot_lag_bytes) : "");
  setText("journal-now", last ? bytes(last.journal_bytes) : "");
  setText("rate-now", r.length ? r[r.length - 1].toFixed(1) : "");
  const ret = h.retention || {};
  const parts = [];
  if (ret.max_bytes) parts.push("max " + bytes(ret.max_bytes));
  if (ret.max_age && ret.max_age !== "0s") parts.push("max age " + ret.max_age);
  if (ret.min_age && ret.min_age !== "0s") parts.push("min age " + ret.min_age);
  setText("journal-retention", parts.length ? parts.join(", ") : "until every group committed (no cap)");
}

function actionButton(label, attrs, onClick, cls) {
  const b = el("button", Object.assign({ type: "button", class: cls || "" }, attrs), label);
  b.addEventListener("click", () => act(onClick));
  return b;
}

function renderGroups(groups) {
  const body = $("groups").tBodies[0];
  body.replaceChildren();
  $("groups-empty").hidden = groups.length > 0;
  for (const g of groups) {
    const sh = g.shared;
    const lag = g.lag || {};
    const holder = g.member ? g.member + (g.lease_expires ? " (until " + new Date(g.lease_expires).toLocaleTimeString() + ")" : "") : "–";
    const actions = el("td");
    if (sh && sh.parked > 0) {
      actions.append(
        actionButton("requeue all", { "data-action": "requeue-all", "data-group": g.name }, () => api("POST", gpath(g.name) + "/parked/requeue", { all: true })),
        " ",
        actionButton("drop all", { "data-action": "drop-all", "data-group": g.name }, () => confirmed("Drop every parked message of " + g.name + "?") && api("POST", gpath(g.name) + "/parked/drop", { all: true }), "danger"),
      );
    }
    body.append(el("tr", { "data-group": g.name },
      el("td", { class: "name" }, g.name),
      el("td", null, g.mode + (g.hold_slot ? " · holds slot" : "")),
      el("td", null, num(g.committed_offset)),
      el("td", { class: "lag-records" + (lag.out_of_range || g.stuck_at ? " bad" : ""), title: g.journal_error || "" }, num(lag.records) + (lag.out_of_range ? " (out of range)" : "") + (g.stuck_at ? " (stuck at corrupt offset " + g.stuck_at + ")" : "")),
      el("td", null, bytes(lag.bytes)),
      el("td", null, secs(lag.seconds)),
      el("td", null, holder),
      el("td", { class: "in-flight" }, sh ? num(sh.in_flight) : ""),
      el("td", null, sh ? num(sh.pending) : ""),
      el("td", { class: "parked" }, sh ? num(sh.parked) : ""),
      actions,
    ));
  }
}

const gpath = (name) => "/v1/groups/" + encodeURIComponent(name);

function confirmed(q) {
  return window.confirm(q);
}

function renderParked(rows) {
  const body = $("parked").tBodies[0];
  body.replaceChildren();
  $("parked-section").hidden = rows.length === 0;
  for (const [group, m] of rows) {
    const c = m.change || {};
    body.append(el("tr", null,
      el("td", null, group),
      el("td", null, num(m.offset)),
      el("td", null, c.schema ? c.schema + "." + c.table : "–"),
      el("td", null, c.op || "–"),
      el("td", null, num(m.delivery)),
      el("td", null, m.reason),
      el("td", null, new Date(m.parked).toLocaleTimeString()),
      el("td", null,
        actionButton("requeue", { "data-action": "requeue", "data-ack": m.ack_id }, () => api("POST", gpath(group) + "/parked/requeue", { ack_ids: [m.ack_id] })),
        " ",
        actionButton("drop", { "data-action": "drop", "data-ack": m.ack_id }, () => api("POST", gpath(group) + "/parked/drop", { ack_ids: [m.ack_id] }), "danger"),
      ),
    ));
  }
}

function renderBackfills(list) {
  const body = $("backfills").tBodies[0];
  body.replaceChildren();
  $("backfills-empty").hidden = list.length > 0;
  for (const b of list) {
    const pct = b.rows_estimate > 0 ? Math.min(100, (100 * b.rows) / b.rows_estimate) : b.state === "done" ? 100 : 0;
    const bar = el("span", { class: "bar" }, el("span"));
    bar.firstChild.style.width = pct.toFixed(0) + "%";
    const actions = el("td");
    const rate = el("td");
    if (b.state === "running") {
      const input = el("input", { class: "rate", type: "number", min: "0", step: "any", value: String(b.max_rate || 0), title: "rows per second; 0: no cap" });
      input.setAttribute("data-backfill", b.id);
      rate.append(input);
      actions.append(
        actionButton("throttle", { "data-action": "throttle", "data-backfill": b.id }, () => api("PATCH", "/v1/backfills/" + encodeURIComponent(b.id), { max_rate: Number(input.value) || 0 })),
        " ",
        actionButton("cancel", { "data-action": "cancel", "data-backfill": b.id }, () => confirmed("Cancel backfill " + b.id + "?") && api("DELETE", "/v1/backfills/" + encodeURIComponent(b.id)), "danger"),
      );
    } else {
      rate.append(b.max_rate ? num(b.max_rate) + "/s" : "none");
    }
    body.append(el("tr", { "data-backfill": b.id },
      el("td", null, b.id),
      el("td", { class: b.state === "failed" ? "bad" : "" }, b.state + (b.error ? ": " + b.error : "")),
      el("td", null, b.table + " (" + (b.table_index + 1) + "/" + b.tables.length + ")"),
      el("td", null, bar, num(b.rows) + " / ~" + num(b.rows_estimate)),
      el("td", null, b.rate ? b.rate.toFixed(0) + " rows/s" : "–"),
      el("td", null, b.eta_seconds == null ? "–" : secs(b.eta_seconds)),
      rate,
      actions,
    ));
  }
}

// ---- refresh loop

let timer = null;

async function refresh() {
  clearTimeout(timer);
  try {
    const [st, hist, groups] = await Promise.all([
      api("GET", "/v1/status"),
      api("GET", "/v1/status/history"),
      api("GET", "/v1/groups"),
    ]);
    const backfills = await api("GET", "/v1/backfills").catch(() => null);
    const parked = [];
    for (const g of groups.groups) {
      if (g.shared && g.shared.parked > 0) {
        const p = await api("GET", gpath(g.name) + "/parked");
        for (const m of p.parked) parked.push([g.name, m]);
      }
    }
    $("token-form").hidden = true;
    $("main").hidden = false;
    renderStatus(st);
    renderHistory(hist);
    renderGroups(groups.groups);
    renderParked(parked);
    $("backfills-section").hidden = backfills === null;
    if (backfills) renderBackfills(backfills);
    setText("updated", "updated " + new Date().toLocaleTimeString());
    showError("");
    document.body.setAttribute("data-loaded", "true");
  } catch (e) {
    if (e instanceof Unauthorized) {
      askToken();
      return; // refresh again once a token is given
    }
    showError(e.message);
  }
  timer = setTimeout(refresh, REFRESH_MS);
}

async function act(fn) {
  try {
    const r = await fn();
    if (r === false) return; // not confirmed
    await refresh();
  } catch (e) {
    if (e instanceof Unauthorized) askToken();
    else showError(e.message);
  }
}

function showError(msg) {
  $("error").textContent = msg;
  $("error").hidden = msg === "";
}

function askToken() {
  sessionStorage.removeItem(TOKEN_KEY);
  $("main").hidden = true;
  $("token-form").hidden = false;
  $("token").focus();
}

$("token-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  sessionStorage.setItem(TOKEN_KEY, $("token").value);
  $("token").value = "";
  refresh();
});

refresh();
