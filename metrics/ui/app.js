// writ dashboard: polls api/status every second and renders it. Read-only;
// every value is set as text, never as markup.
"use strict";

const $ = (id) => document.getElementById(id);
let prev = null;

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}

function row(cells) {
  const tr = document.createElement("tr");
  for (const c of cells) tr.appendChild(c);
  return tr;
}

function fill(tbody, rows) {
  tbody.replaceChildren(...rows);
}

function healthClass(h) {
  if (h === "ok") return "ok";
  if (!h || h === "unreachable") return "bad";
  return "warn";
}

function rate(name, cur, old, dt) {
  if (!old || dt <= 0) return 0;
  const d = (cur[name] || 0) - (old[name] || 0);
  return d > 0 ? d / dt : 0;
}

// catchUpCell shows a member's catch-up: a bar with the share of the gap
// closed, the applied index against the leader's commit and the ETA.
function catchUpCell(m) {
  const td = el("td", null, "catchup");
  const c = m.catch_up;
  if (!m.reachable || !c) { td.textContent = "–"; return td; }
  if (!c.active) { td.textContent = "caught up"; td.className += " ok"; return td; }
  const bar = el("span", null, "progress");
  const fillEl = el("span");
  fillEl.style.width = Math.min(100, c.percent).toFixed(1) + "%";
  bar.appendChild(fillEl);
  td.appendChild(bar);
  const eta = c.eta_ms > 0 ? ", ETA " + Math.ceil(c.eta_ms / 1000) + "s" : "";
  td.appendChild(el("span", " " + c.percent.toFixed(0) + "% · " + c.applied + " of " + c.target + eta));
  td.className += " warn";
  return td;
}

function render(s) {
  $("node").textContent = s.node || "?";
  $("version").textContent = s.version || "?";
  $("fingerprint").textContent = (s.fingerprint || "").slice(0, 16);
  $("leader").textContent = s.leader || "none";
  $("leader").className = "value " + (s.leader ? "" : "bad");
  $("term").textContent = s.term;
  const self = (s.members || []).find((m) => m.id === s.node);
  $("commit").textContent = self ? self.commit : "–";
  $("health").textContent = s.health || "?";
  $("health").className = "value " + healthClass(s.health);
  $("outbox").textContent = s.outbox_depth;
  $("conflicts").textContent = s.open_conflicts;
  $("conflicts").className = "value " + (s.open_conflicts > 0 ? "bad" : "");

  const reasons = s.health_reasons || [];
  $("reasons-box").classList.toggle("hidden", reasons.length === 0);
  fill($("reasons"), reasons.map((r) => el("li", r)));

  const members = s.members || [];
  const answering = members.filter((m) => m.reachable).length;
  $("member-count").textContent = answering === members.length
    ? "(" + members.length + ")" : "(" + answering + " of " + members.length + " answering)";
  fill($("members").tBodies[0], members.map((m) => {
    const role = el("td");
    role.appendChild(el("span", m.leader ? "leader" : (m.role || "not admitted"),
      "badge " + (m.leader ? "leader" : (m.role === "learner" || !m.role ? "learner" : "voter"))));
    const health = m.reachable ? m.health : "unreachable";
    const tr = row([
      el("td", m.id, "mono"), role, el("td", m.gossip, m.gossip === "alive" ? "ok" : "bad"),
      el("td", m.reachable ? m.term : "–"), el("td", m.reachable ? m.commit : "–", "num"),
      el("td", m.reachable ? m.applied : "–", "num"), el("td", m.reachable ? m.lag : "–", "num " + (m.lag > 100 ? "warn" : "")),
      el("td", m.match || "–", "num"), catchUpCell(m),
      el("td", m.reachable ? (m.ready ? "ready" : "not ready: " + (m.not_ready || "?")) : (m.error || "no answer"), m.ready ? "ok" : "bad"),
      el("td", health, healthClass(health)), el("td", m.reachable ? m.outbox_depth : "–", "num"),
      el("td", m.reachable ? m.open_conflicts : "–", "num"), el("td", m.api_addr, "mono"),
    ]);
    tr.dataset.node = m.id;
    if (!m.reachable || m.gossip !== "alive") tr.className = "down";
    return tr;
  }));
  const refused = s.refused || [];
  $("refused-box").classList.toggle("hidden", refused.length === 0);
  fill($("refused"), refused.map((r) => el("li", r.id + ": " + r.reason)));

  const t = Date.parse(s.time) / 1000;
  const dt = prev ? t - prev.t : 0;
  const outcomes = s.outcomes || {};
  const order = ["COMMITTED", "RECEIVED", "REJECTED", "UNAVAILABLE", "UNCERTAIN", "duplicate", "stale", "quarantined"];
  const names = order.filter((k) => k in outcomes).concat(Object.keys(outcomes).filter((k) => !order.includes(k)).sort());
  const rates = names.map((k) => [k, rate(k, outcomes, prev && prev.outcomes, dt)]);
  const max = Math.max(1, ...rates.map((r) => r[1]));
  fill($("outcomes").tBodies[0], rates.map(([k, r]) => {
    const bar = el("td", null, "bar");
    const span = el("span");
    span.style.width = (100 * r / max).toFixed(1) + "%";
    if (r > 0) bar.appendChild(span);
    const tr = row([el("td", k), el("td", r.toFixed(1), "num"), bar, el("td", outcomes[k], "num")]);
    if (!outcomes[k]) tr.className = "zero";
    return tr;
  }));
  const types = s.committed_by_type || {};
  fill($("types").tBodies[0], Object.keys(types).sort().map((k) => {
    const tr = row([el("td", k, "mono"), el("td", rate(k, types, prev && prev.types, dt).toFixed(1), "num"), el("td", types[k], "num")]);
    if (!types[k]) tr.className = "zero";
    return tr;
  }));
  fill($("plugins").tBodies[0], (s.plugins || []).map((p) =>
    row([el("td", p.name), el("td", p.state, p.healthy ? "ok" : "bad"), el("td", p.restarts, "num")])));

  prev = { t, outcomes, types };
  $("updated").textContent = "updated " + new Date().toLocaleTimeString();
  $("updated").className = "live";
}

async function poll() {
  try {
    const r = await fetch("api/status", { cache: "no-store" });
    if (!r.ok) throw new Error("HTTP " + r.status);
    render(await r.json());
  } catch (e) {
    $("updated").textContent = "not answering: " + e.message;
    $("updated").className = "stale";
  } finally {
    setTimeout(poll, 1000);
  }
}

poll();
