// writ dashboard live feed: polls api/feed every second for the outcomes
// committed after the last one shown and keeps the most recent 50, newest
// first. Read-only; every value is set as text, never as markup.
"use strict";

(() => {
  const keep = 50;
  let cursor = { index: 0, pos: 0 };
  let shown = []; // oldest first

  function cell(text, cls) {
    const td = document.createElement("td");
    td.textContent = text === undefined || text === null ? "" : String(text);
    if (cls) td.className = cls;
    return td;
  }

  function statusClass(s) {
    if (s === "apply" || s === "applied") return "ok";
    if (s === "duplicate" || s === "stale") return "";
    return "warn";
  }

  function render() {
    const tbody = document.getElementById("feed").tBodies[0];
    tbody.replaceChildren(...shown.slice().reverse().map((o) => {
      const tr = document.createElement("tr");
      tr.dataset.id = o.id;
      tr.append(cell(o.index, "num"), cell(o.type, "mono"), cell(o.key, "mono"), cell(o.id, "mono"),
        cell(o.reason ? o.status + ": " + o.reason : o.status, statusClass(o.status)));
      return tr;
    }));
    document.getElementById("feed-count").textContent = shown.length ? "(last " + shown.length + ")" : "(none yet)";
  }

  async function poll() {
    try {
      const r = await fetch("api/feed?after=" + cursor.index + "&pos=" + cursor.pos, { cache: "no-store" });
      if (!r.ok) throw new Error("HTTP " + r.status);
      const page = await r.json();
      const got = page.outcomes || [];
      if (page.reset) shown = got;
      else shown = shown.concat(got);
      if (shown.length > keep) shown = shown.slice(shown.length - keep);
      cursor = page.next || cursor;
      render();
    } catch (e) {
      document.getElementById("feed-count").textContent = "(not answering: " + e.message + ")";
    } finally {
      setTimeout(poll, 1000);
    }
  }

  poll();
})();
