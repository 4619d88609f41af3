// writ dashboard conflicts panel: polls api/conflicts every two seconds
// for the open conflict cases and resolves one through
// api/conflicts/resolve (the node runs it as the ResolveConflict API call,
// with the token given here when the API needs one). Every value is set
// as text, never as markup.
"use strict";

(() => {
  const $ = (id) => document.getElementById(id);
  let shownSig = null; // the keys and revisions on the page
  let busy = false;

  function cell(text, cls) {
    const td = document.createElement("td");
    td.textContent = text === undefined || text === null ? "" : String(text);
    if (cls) td.className = cls;
    return td;
  }

  function headers() {
    const h = { "Content-Type": "application/json" };
    const tok = $("resolve-token").value.trim();
    if (tok) h["X-Writ-Token"] = tok;
    return h;
  }

  function say(text, ok) {
    $("conflicts-msg").textContent = text;
    $("conflicts-msg").className = "msg " + (ok ? "ok" : "bad");
  }

  async function resolve(key, input, button) {
    const reason = input.value.trim();
    if (!reason) { say("say why " + key + " is closed before resolving it", false); input.focus(); return; }
    button.disabled = true;
    busy = true;
    try {
      const r = await fetch("api/conflicts/resolve", {
        method: "POST", headers: headers(), cache: "no-store",
        body: JSON.stringify({ key, reason, by: $("resolve-by").value.trim() }),
      });
      const text = await r.text();
      if (!r.ok) { say("resolving " + key + ": " + text.trim(), false); button.disabled = false; return; }
      const res = JSON.parse(text);
      say(res.outcome + " " + key + " resolved at index " + res.index + (res.reason ? " (" + res.reason + ")" : ""), res.outcome === "COMMITTED");
      shownSig = null;
    } catch (e) {
      say("resolving " + key + ": " + e.message, false);
      button.disabled = false;
    } finally {
      busy = false;
      poll(false);
    }
  }

  function render(cases) {
    $("conflict-count").textContent = "(" + cases.length + ")";
    const sig = cases.map((c) => c.key + "@" + c.rev).join(" ");
    if (sig === shownSig) return; // keep what the operator is typing
    shownSig = sig;
    $("conflict-cases").tBodies[0].replaceChildren(...cases.map((c) => {
      const k = c.case || {};
      const tr = document.createElement("tr");
      tr.dataset.key = c.key;
      const act = cell(null, "resolve");
      const input = document.createElement("input");
      input.type = "text";
      input.size = 18;
      input.placeholder = "why it is closed";
      input.className = "reason";
      const button = document.createElement("button");
      button.type = "button";
      button.textContent = "Resolve";
      button.addEventListener("click", () => resolve(c.key, input, button));
      act.append(input, button);
      tr.append(cell(c.key, "mono"), cell(k.type, "mono"), cell(k.current), cell(k.incoming, "bad"), cell(k.entry_id, "mono"),
        cell((k.observations || []).length, "num"), cell(k.opened), cell(k.reason), act);
      return tr;
    }));
  }

  async function poll(again) {
    try {
      const r = await fetch("api/conflicts", { headers: headers(), cache: "no-store" });
      if (r.status === 401 || r.status === 403) {
        $("conflict-count").textContent = "(token needed)";
        if (!busy) say("the API needs a token with role read to list cases (operator to resolve them): enter it above", false);
      } else if (r.ok) {
        render((await r.json()).conflicts || []);
      }
    } catch (e) {
      $("conflict-count").textContent = "(not answering)";
    } finally {
      if (again) setTimeout(() => poll(true), 2000);
    }
  }

  if ($("conflicts-box")) poll(true);
})();
