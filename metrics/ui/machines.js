// writ dashboard: the schema's classification table and its machines as
// state diagrams (SVG drawn here; nothing loaded from elsewhere). Fetched
// once: the schema of a running node does not change.
"use strict";

const SVGNS = "http://www.w3.org/2000/svg";
const RX = 56, RY = 18, COL = 200, ROW = 64, PAD = 28;

function svg(tag, attrs, text) {
  const e = document.createElementNS(SVGNS, tag);
  for (const k in attrs) e.setAttribute(k, attrs[k]);
  if (text !== undefined) e.textContent = text;
  return e;
}

// layers places states by distance from the initial states (breadth first).
function layers(m) {
  const layer = {};
  let frontier = (m.initial || []).slice();
  frontier.forEach((s) => { layer[s] = 0; });
  const next = {};
  for (const t of m.transitions || []) (next[t.from] = next[t.from] || []).push(t.to);
  for (let d = 1; frontier.length; d++) {
    const nf = [];
    for (const s of frontier) for (const to of next[s] || []) if (!(to in layer)) { layer[to] = d; nf.push(to); }
    frontier = nf;
  }
  let max = Math.max(0, ...Object.values(layer));
  for (const s of m.states) if (!(s in layer)) layer[s] = ++max;
  return layer;
}

function ellipseCut(dx, dy) {
  const len = Math.hypot(dx, dy) || 1;
  const ux = dx / len, uy = dy / len;
  return 1 / Math.sqrt((ux / RX) ** 2 + (uy / RY) ** 2);
}

function drawMachine(m, idx) {
  const layer = layers(m);
  const rows = {};
  const pos = {};
  for (const s of m.states) {
    const l = layer[s];
    rows[l] = (rows[l] || 0) + 1;
    pos[s] = { x: PAD + 40 + RX + l * COL, y: PAD + 40 + (rows[l] - 1) * ROW };
  }
  const width = Math.max(...Object.values(pos).map((p) => p.x)) + RX + PAD;
  const height = Math.max(...Object.values(pos).map((p) => p.y)) + RY + PAD;
  const root = svg("svg", { width, height, viewBox: `0 0 ${width} ${height}`, class: "machine", "data-machine": m.name });
  const defs = svg("defs", {});
  const marker = svg("marker", { id: "arrow" + idx, viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" });
  marker.appendChild(svg("path", { d: "M 0 0 L 10 5 L 0 10 z", class: "arrowhead" }));
  defs.appendChild(marker);
  root.appendChild(defs);

  const edges = svg("g", {});
  const edge = (p0, p1, by, bend) => {
    const dx = p1.x - p0.x, dy = p1.y - p0.y;
    const len = Math.hypot(dx, dy) || 1;
    const nx = -dy / len, ny = dx / len;
    const cx = (p0.x + p1.x) / 2 + nx * bend, cy = (p0.y + p1.y) / 2 + ny * bend;
    const r0 = p0.start ? 4 : ellipseCut(cx - p0.x, cy - p0.y), r1 = ellipseCut(p1.x - cx, p1.y - cy);
    const l0 = Math.hypot(cx - p0.x, cy - p0.y) || 1, l1 = Math.hypot(p1.x - cx, p1.y - cy) || 1;
    const sx = p0.x + (cx - p0.x) / l0 * r0, sy = p0.y + (cy - p0.y) / l0 * r0;
    const ex = p1.x - (p1.x - cx) / l1 * (r1 + 1), ey = p1.y - (p1.y - cy) / l1 * (r1 + 1);
    const path = svg("path", { d: `M ${sx} ${sy} Q ${cx} ${cy} ${ex} ${ey}`, class: "edge", "marker-end": `url(#arrow${idx})` });
    path.appendChild(svg("title", {}, by && by.length ? by.join(", ") : "implied by the handler"));
    edges.appendChild(path);
  };
  for (const s of m.initial || []) {
    const p = pos[s];
    const start = { x: p.x - RX - 36, y: p.y, start: true };
    root.appendChild(svg("circle", { cx: start.x, cy: start.y, r: 4, class: "start" }));
    edge(start, p, (m.creators || {})[s], 0);
  }
  for (const t of m.transitions || []) {
    const p0 = pos[t.from], p1 = pos[t.to];
    const skip = Math.abs(layer[t.to] - layer[t.from]);
    const sameRow = Math.abs(p0.y - p1.y) < 1;
    edge(p0, p1, t.by, 14 + (sameRow && skip > 1 ? 26 * skip : 0));
  }
  root.appendChild(edges);
  const terminal = new Set(m.terminal || []);
  for (const s of m.states) {
    const p = pos[s];
    const g = svg("g", { class: "state" + (terminal.has(s) ? " terminal" : ""), "data-state": s });
    g.appendChild(svg("ellipse", { cx: p.x, cy: p.y, rx: RX, ry: RY }));
    if (terminal.has(s)) g.appendChild(svg("ellipse", { cx: p.x, cy: p.y, rx: RX - 4, ry: RY - 4 }));
    g.appendChild(svg("text", { x: p.x, y: p.y + 4, "text-anchor": "middle" }, s));
    root.appendChild(g);
  }
  return root;
}

// transitionTable lists each transition with the entry types that drive it.
function transitionTable(m) {
  const table = document.createElement("table");
  table.className = "transitions";
  const head = document.createElement("tr");
  for (const h of ["from", "to", "driven by"]) head.appendChild(Object.assign(document.createElement("th"), { textContent: h }));
  table.createTHead().appendChild(head);
  const body = table.createTBody();
  const add = (from, to, by) => {
    const tr = body.insertRow();
    tr.insertCell().textContent = from;
    tr.insertCell().textContent = to;
    const td = tr.insertCell();
    td.textContent = by && by.length ? by.join(", ") : "handler";
    td.className = by && by.length ? "mono" : "muted";
  };
  for (const s of m.initial || []) add("(new)", s, (m.creators || {})[s]);
  for (const t of m.transitions || []) add(t.from, t.to, t.by);
  return table;
}

async function loadSchema() {
  let s;
  try {
    const r = await fetch("api/schema", { cache: "no-store" });
    if (!r.ok) throw new Error("HTTP " + r.status);
    s = await r.json();
  } catch (e) {
    document.getElementById("schema-fp").textContent = "not available: " + e.message;
    return;
  }
  document.getElementById("schema-fp").textContent = s.fingerprint || "";
  const box = document.getElementById("machines");
  box.replaceChildren();
  (s.machines || []).forEach((m, i) => {
    const fig = document.createElement("figure");
    const cap = document.createElement("figcaption");
    cap.textContent = "machine " + m.name + " (key " + m.key + ")";
    fig.appendChild(cap);
    const body = document.createElement("div");
    body.className = "machine-body";
    body.appendChild(drawMachine(m, i));
    body.appendChild(transitionTable(m));
    fig.appendChild(body);
    box.appendChild(fig);
  });
  const rows = (s.types || []).map((t) => {
    const tr = document.createElement("tr");
    for (const [v, cls] of [[t.number, "num"], [t.name, "mono"], [t.class, "class-" + t.class], [t.machine || "–", ""], [t.keys || "–", "mono"]]) {
      const td = document.createElement("td");
      td.textContent = String(v);
      if (cls) td.className = cls;
      tr.appendChild(td);
    }
    return tr;
  });
  document.querySelector("#classes tbody").replaceChildren(...rows);
}

loadSchema();
