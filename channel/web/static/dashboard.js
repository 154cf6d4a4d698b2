// The operator's dashboard: every conversation of every channel, every
// sandbox with its resource use and terminals (a live, read-only xterm.js
// view of tmux's pushed output), and the tail of the audit log.
"use strict";

const $ = (id) => document.getElementById(id);
const dash = { auditAfter: 0, term: null, termWS: null, termKey: null, termN: null };

function stateText(c) {
  if (c.state === "queued") return "queued " + c.pending;
  if (c.state === "running" && c.pending) return "running, " + c.pending + " queued";
  return c.state || "idle";
}

// sandboxState is a sandbox's state with what /status adds to it: out of
// memory, busy.
function sandboxState(s) {
  let t = s.state;
  if (s.state === "exited" && s.oom_killed) t += " (out of memory)";
  if (s.busy) t += ", busy";
  return t;
}

// usageText is what a conversation's model calls cost, all time.
function usageText(c) {
  if (!c.tokens) return "";
  const usd = c.cost_usd || 0;
  const k = c.tokens >= 10000 ? (c.tokens / 1000).toFixed(0) + "k" : String(c.tokens);
  return "$" + (usd > 0 && usd < 0.01 ? usd.toFixed(4) : usd.toFixed(2)) + " · " + k + " tok";
}

async function act(action, key, confirmText) {
  if (confirmText && !confirm(confirmText)) return;
  try {
    const r = await conch.api("POST", "/api/control", { action, key });
    conch.showError(key + ": " + r.message);
    refresh();
  } catch (e) { conch.showError(action + " " + key + ": " + e.message); }
}

function btn(text, onclick, cls) {
  return conch.el("button", { type: "button", class: "small " + (cls || ""), onclick }, text);
}

async function refresh() {
  let d;
  try { d = await conch.api("GET", "/api/dashboard"); } catch (e) { conch.showError(e.message); return; }
  const cb = $("convs").tBodies[0];
  cb.replaceChildren();
  for (const c of d.conversations) {
    cb.append(conch.el("tr", { "data-key": c.key },
      conch.el("td", { text: c.key, title: c.title || "" }),
      conch.el("td", { text: c.last_sender || "" }),
      conch.el("td", { class: "clip", text: (c.last_role ? c.last_role + ": " : "") + (c.last_message || (c.last_role === "assistant" ? "(working with tools)" : "")), title: c.last_at ? new Date(c.last_at).toLocaleString() : "" }),
      conch.el("td", { class: "state " + (c.state || "idle"), text: stateText(c) }),
      conch.el("td", { text: usageText(c), title: (c.tokens || 0) + " tokens" }),
      conch.el("td", { class: "clip err", text: c.last_error || "" }),
      conch.el("td", {},
        btn("stop", () => act("stop", c.key), c.state === "running" ? "" : "muted"),
        btn("reset", () => act("reset", c.key, "Reset " + c.key + "? Its history is forgotten and its computer removed."), "danger"))));
  }
  if (!d.conversations.length) cb.append(conch.el("tr", {}, conch.el("td", { colspan: "7", class: "muted", text: "no conversations yet" })));
  const sb = $("sandboxes").tBodies[0];
  sb.replaceChildren();
  for (const s of d.sandboxes) {
    const st = s.stats;
    const terms = conch.el("td", { class: "terms" });
    for (const n of s.terminals || []) {
      terms.append(btn(n === -1 ? "coder" : "tty " + n, () => openTerm(s.conversation, n), "term-btn"));
    }
    sb.append(conch.el("tr", {},
      conch.el("td", { text: s.name, title: s.id }),
      conch.el("td", { text: s.conversation + (s.pool ? " (pool)" : "") + (s.orphan ? " (orphan)" : "") }),
      conch.el("td", { text: s.engine }),
      conch.el("td", { class: "state " + s.state, text: sandboxState(s), title: "image " + (s.image_current ? "current" : "stale") + ", profile " + (s.profile_current ? "current" : "stale") }),
      // -1: the backend cannot tell (Kubernetes without a metrics API).
      conch.el("td", { text: st ? (st.cpu_percent < 0 ? "unknown" : st.cpu_percent.toFixed(1) + "%") : (s.stats_error ? "?" : "") }),
      conch.el("td", { text: st ? (st.memory_bytes < 0 ? "unknown" : conch.bytes(st.memory_bytes)) + (st.memory_limit ? " / " + conch.bytes(st.memory_limit) : "") : "" }),
      conch.el("td", { text: st ? String(st.pids) + (st.pids_limit ? " / " + st.pids_limit : "") : "", class: st && st.pids_limit && st.pids + 4 > st.pids_limit ? "err" : "" }),
      terms,
      conch.el("td", {}, s.conversation && !s.pool ? btn("remove", () => act("remove", s.conversation, "Remove the sandbox of " + s.conversation + " and its workspace?"), "danger") : "")));
  }
  if (!d.sandboxes.length) sb.append(conch.el("tr", {}, conch.el("td", { colspan: "9", class: "muted", text: "no sandboxes" })));
  const mb = $("mcp").tBodies[0];
  mb.replaceChildren();
  $("mcp-section").hidden = !(d.mcp && d.mcp.length);
  for (const m of d.mcp || []) {
    mb.append(conch.el("tr", {},
      conch.el("td", { text: m.name }),
      conch.el("td", { text: m.kind }),
      conch.el("td", { text: String(m.tools) }),
      conch.el("td", { text: String(m.ready) }),
      conch.el("td", { text: String(m.down), class: m.down ? "err" : "" }),
      conch.el("td", { text: String(m.restarts) }),
      conch.el("td", { class: "clip err", text: m.last_error || "" })));
  }
  if (d.errors && d.errors.length) conch.showError(d.errors.join("; "));
  $("updated").textContent = "updated " + new Date(d.at).toLocaleTimeString();
}

async function refreshAudit() {
  let recs;
  try { recs = await conch.api("GET", "/api/audit?after=" + dash.auditAfter); } catch (e) { return; }
  const tb = $("audit").tBodies[0];
  for (const r of recs) {
    dash.auditAfter = Math.max(dash.auditAfter, r.id);
    tb.prepend(conch.el("tr", {},
      conch.el("td", { text: new Date(r.At).toLocaleString() }),
      conch.el("td", { text: r.Kind }),
      conch.el("td", { text: r.conversation || "" }),
      conch.el("td", { class: "clip mono", text: JSON.stringify(r.Detail) })));
  }
  while (tb.rows.length > 200) tb.deleteRow(tb.rows.length - 1);
}

function closeTerm() {
  if (dash.termWS) { dash.termWS.onclose = null; dash.termWS.close(); dash.termWS = null; }
  if (dash.term) { dash.term.dispose(); dash.term = null; }
  dash.termKey = null;
  $("term-section").hidden = true;
}

function openTerm(key, n) {
  closeTerm();
  dash.termKey = key; dash.termN = n;
  $("term-section").hidden = false;
  $("term-title").textContent = key + " · " + (n === -1 ? "coding agent" : "tty " + n);
  const term = new Terminal({ disableStdin: true, convertEol: false, cursorBlink: false, fontSize: 13, scrollback: 5000, cols: 160, rows: 48 });
  dash.term = term;
  term.open($("term"));
  const ws = conch.ws("/api/terminal?key=" + encodeURIComponent(key) + "&tty=" + n);
  ws.binaryType = "arraybuffer";
  dash.termWS = ws;
  $("term-state").textContent = "connecting";
  ws.onopen = () => { $("term-state").textContent = "live"; };
  ws.onmessage = (m) => {
    if (typeof m.data === "string") {
      const f = JSON.parse(m.data);
      if (f.type === "size") term.resize(f.cols, f.rows);
      return;
    }
    term.write(new Uint8Array(m.data));
  };
  ws.onclose = (e) => {
    if (dash.termWS !== ws) return;
    dash.termWS = null;
    $("term-state").textContent = "ended: " + (e.reason || ("code " + e.code));
    if (e.code !== 1000 && dash.termKey === key) {
      setTimeout(() => { if (dash.termKey === key && dash.termN === n && !dash.termWS) openTerm(key, n); }, 2000);
    }
  };
}

// showMetrics shows /metrics as text (a bare tab cannot open it: it needs
// the session's token besides the cookie).
async function showMetrics() {
  try {
    $("metrics").textContent = await conch.text("/metrics");
    $("metrics-section").hidden = false;
  } catch (e) { conch.showError("metrics: " + e.message); }
}

function main() {
  $("term-close").addEventListener("click", closeTerm);
  $("metrics-open").addEventListener("click", showMetrics);
  $("metrics-close").addEventListener("click", () => { $("metrics-section").hidden = true; });
  refresh();
  refreshAudit();
  setInterval(refresh, 3000);
  setInterval(refreshAudit, 5000);
}

conch.start(main);
