// The web chat: a list of conversations and one conversation's event stream.
//
// The page renders only from events. Each carries its conversation's seq; the
// socket is opened with after=<last seq seen>, so a dropped connection
// resumes with nothing lost and nothing twice. Messages being sent wait in an
// outbox (kept in localStorage) until the server acknowledges them; a resend
// uses the same id, which the server stores once.
"use strict";

const state = {
  convs: [],
  current: null,
  ws: null,
  lastSeq: 0,
  retry: 0,
  turns: {}, // turn id -> {box, stream, tools}
  queued: null,
  files: [], // files to send with the next message: {name, type, data (base64)}
  sentFiles: {}, // message id -> its files, for a resend (kept in memory, not localStorage)
  recorder: null,
};

const $ = (id) => document.getElementById(id);

function outboxKey(id) { return "conch.outbox." + id; }
function outbox(id) {
  try { return JSON.parse(localStorage.getItem(outboxKey(id)) || "[]"); } catch (e) { return []; }
}
function setOutbox(id, list) {
  if (list.length) localStorage.setItem(outboxKey(id), JSON.stringify(list));
  else localStorage.removeItem(outboxKey(id));
}

// tooLong says why text cannot be sent ("" when it can): the server refuses
// a message over its limit, and closes the socket on a frame far over it, so
// such a message would never leave the outbox and would block every later one.
function tooLong(text) {
  const max = (conch.session && conch.session.max_message_bytes) || 65536;
  const n = new TextEncoder().encode(text).length;
  if (n <= max) return "";
  return "This message is too long (" + n + " bytes; the limit is " + max + "). Nothing was sent: shorten it, or put the text in a file.";
}

// dropFromOutbox removes a message from the outbox and the page.
function dropFromOutbox(convID, id) {
  setOutbox(convID, outbox(convID).filter((m) => m.id !== id));
  removePending(id);
}

// purgeOutbox drops the messages that can never be sent (left by an older
// page, or a limit that changed), saying so.
function purgeOutbox(convID) {
  for (const m of outbox(convID)) {
    const why = tooLong(m.text);
    if (why) {
      dropFromOutbox(convID, m.id);
      conch.showError("A message waiting to be sent was dropped. " + why);
    }
  }
}

async function loadConvs() {
  state.convs = await conch.api("GET", "/api/conversations");
  renderConvs();
}

function renderConvs() {
  const ul = $("convs");
  ul.replaceChildren();
  for (const c of state.convs) {
    const li = conch.el("li", { class: c.id === state.current ? "active" : "", "data-id": c.id, onclick: () => openConv(c.id) },
      conch.el("div", { class: "title", text: c.title }),
      conch.el("div", { class: "small muted", text: (c.state && c.state !== "idle" ? c.state + " · " : "") + (c.last_message || "") }));
    ul.append(li);
  }
}

async function newConv() {
  const c = await conch.api("POST", "/api/conversations", {});
  await loadConvs();
  openConv(c.id);
}

function openConv(id) {
  if (state.ws) { state.ws.onclose = null; state.ws.close(); state.ws = null; }
  state.current = id;
  state.lastSeq = 0;
  state.turns = {};
  state.queued = null;
  history.replaceState(null, "", "/#" + id);
  $("messages").replaceChildren();
  $("status").textContent = "";
  const c = state.convs.find((x) => x.id === id);
  $("conv-title").textContent = c ? c.title : id;
  renderConvs();
  purgeOutbox(id);
  for (const m of outbox(id)) addPending(m);
  connect();
  $("input").focus();
}

function connect() {
  const id = state.current;
  // batch=1: events that wait together come in one "events" frame.
  const ws = conch.ws("/api/chat?c=" + encodeURIComponent(id) + "&after=" + state.lastSeq + "&batch=1");
  state.ws = ws;
  setConn("connecting");
  ws.onopen = () => {
    state.retry = 0;
    setConn("connected");
    purgeOutbox(id);
    for (const m of outbox(id)) ws.send(JSON.stringify(sendFrame(m)));
  };
  ws.onmessage = (msg) => {
    let f;
    try { f = JSON.parse(msg.data); } catch (e) { return; }
    onFrame(f);
  };
  ws.onclose = (e) => {
    if (state.ws !== ws) return;
    state.ws = null;
    setConn("disconnected");
    if (e.code === 1008) { conch.showLogin(); return; }
    if (e.code === 1009) {
      // A frame over the server's read limit: the largest waiting message
      // (the only one that can be that big). Sent again it would close
      // every connection, so it is dropped.
      const big = outbox(id).reduce((a, m) => (!a || m.text.length > a.text.length ? m : a), null);
      if (big) dropFromOutbox(id, big.id);
      conch.showError("A message was too long for the connection and was dropped; nothing of it was sent. Shorten it, or put the text in a file. (" + (e.reason || e.code) + ")");
    } else if (e.code === 1007 || e.code === 1003) conch.showError("The server closed the connection: " + (e.reason || e.code));
    const delay = Math.min(15000, 500 * Math.pow(2, state.retry++));
    setTimeout(() => { if (state.current === id && !state.ws) connect(); }, delay);
  };
}

function setConn(s) {
  const e = $("conn");
  e.className = "conn " + s;
  e.textContent = s === "connected" ? "●" : "○";
  e.title = s;
}

function onFrame(f) {
  switch (f.type) {
    case "event": {
      // Streamed text and tool output are live only: they carry the seq of
      // the last kept event and do not move the resume point.
      const live = f.event.type === "text_delta" || f.event.type === "tool_progress";
      if (!live) {
        if (f.event.seq <= state.lastSeq) return;
        state.lastSeq = f.event.seq;
      }
      renderEvent(f.event, f.html);
    }
      break;
    case "events":
      for (const g of f.frames || []) onFrame(g);
      break;
    case "history":
      $("messages").replaceChildren();
      state.turns = {};
      for (const m of f.messages) {
        const b = addMessage(m.role, m.text, m.html);
        if (m.role === "assistant" && m.attachments) showFiles(b, m.attachments);
      }
      state.lastSeq = f.seq;
      purgeOutbox(state.current);
      for (const m of outbox(state.current)) addPending(m);
      break;
    case "ack":
      delete state.sentFiles[f.id];
      setOutbox(state.current, outbox(state.current).filter((m) => m.id !== f.id));
      removePending(f.id);
      break;
    case "error":
      if (f.id) {
        delete state.sentFiles[f.id];
        setOutbox(state.current, outbox(state.current).filter((m) => m.id !== f.id));
        removePending(f.id);
      }
      conch.showError(f.error);
      break;
  }
}

function scrollDown() {
  const m = $("messages");
  m.scrollTop = m.scrollHeight;
}

function addMessage(role, text, html) {
  const b = conch.el("div", { class: "msg " + role });
  if (role === "assistant" && html) conch.html(b, html); else b.textContent = text;
  $("messages").append(b);
  scrollDown();
  return b;
}

// showFiles shows the files sent with an answer: pictures inline, others as
// downloads. They are fetched with the request token (the route is behind
// the login like every API) and shown from blobs.
const inlineTypes = ["image/png", "image/jpeg", "image/gif", "image/webp"];
function showFiles(box, files) {
  const conv = state.current;
  for (const f of files) {
    if (!f.Ref) continue;
    const url = "/api/files/" + encodeURIComponent(conv) + "/" + f.Ref.split("/").map(encodeURIComponent).join("/") +
      "?name=" + encodeURIComponent(f.Name || "file");
    const fig = conch.el("figure", { class: "file", "data-ref": f.Ref });
    box.append(fig);
    fetch(url, { headers: { "X-Conch-Token": conch.token() }, credentials: "same-origin" }).then(async (r) => {
      if (!r.ok) throw new Error("HTTP " + r.status);
      const blob = URL.createObjectURL(await r.blob());
      if (inlineTypes.includes(f.MediaType)) {
        fig.append(conch.el("img", { src: blob, alt: f.Name || "picture" }));
      }
      fig.append(conch.el("figcaption", {}, conch.el("a", { href: blob, download: f.Name || "file", text: f.Name || "file" })));
      scrollDown();
    }).catch((e) => fig.append(conch.el("figcaption", { class: "muted", text: (f.Name || "file") + " could not be loaded (" + e.message + ")" })));
  }
}

function addPending(m) {
  const b = conch.el("div", { class: "msg user pending", "data-pending": m.id, text: m.text });
  $("messages").append(b);
  scrollDown();
}

function removePending(id) {
  const e = document.querySelector('[data-pending="' + CSS.escape(id) + '"]');
  if (e) e.remove();
}

// turnBox is the progress block of a turn: streamed text, tool calls.
function turnBox(turn) {
  let t = state.turns[turn];
  if (!t) {
    const box = conch.el("div", { class: "turn" });
    t = { box, stream: null, tools: {}, progress: null, deltas: [] };
    state.turns[turn] = t;
    $("messages").append(box);
  }
  return t;
}

function renderEvent(ev, html) {
  const d = ev.data || {};
  switch (ev.type) {
    case "message":
      if (d.role === "assistant" && ev.turn && state.turns[ev.turn] && state.turns[ev.turn].stream) {
        state.turns[ev.turn].stream.remove();
        state.turns[ev.turn].stream = null;
        state.turns[ev.turn].deltas = [];
      }
      if (d.role !== "assistant" && d.attachments && d.attachments.length) {
        const names = d.attachments.map((a) => "[" + a.Name + "]").join(" ");
        addMessage("user", (d.text ? d.text + "\n" : "") + names);
        break;
      }
      {
        const b = addMessage(d.role === "assistant" ? "assistant" : "user", d.text, html);
        if (d.role === "assistant" && d.attachments) showFiles(b, d.attachments);
      }
      break;
    case "notice": {
      const n = conch.el("div", { class: "notice" });
      if (html) conch.html(n, html); else n.textContent = d.text;
      $("messages").append(n);
      scrollDown();
      break;
    }
    case "approval": {
      // A question to the people of this conversation, with its buttons.
      const req = d.request || {};
      const box = conch.el("div", { class: "approval", "data-approval": d.id },
        conch.el("div", { class: "approval-title", text: req.kind === "coder" ? "The coding agent asks permission:" : "Approval needed before this runs:" }),
        conch.el("pre", { class: "approval-command", text: req.title || "" }));
      if (req.detail) box.append(conch.el("div", { class: "approval-detail", text: req.detail }));
      const buttons = conch.el("div", { class: "approval-buttons" });
      for (const [choice, label] of [["once", "Allow once"], ["conversation", "Allow for this conversation"], ["deny", "Deny"]]) {
        const b = conch.el("button", { type: "button", class: "approval-" + choice, "data-choice": choice, text: label });
        b.addEventListener("click", () => answerApproval(d.id, choice, box));
        buttons.append(b);
      }
      box.append(buttons, conch.el("div", { class: "approval-outcome" }));
      $("messages").append(box);
      scrollDown();
      break;
    }
    case "approval_resolved": {
      const box = document.querySelector('[data-approval="' + CSS.escape(d.id) + '"]');
      if (!box) break;
      const bs = box.querySelector(".approval-buttons");
      if (bs) bs.remove();
      box.classList.add("decided", d.choice === "deny" ? "denied" : "allowed");
      box.querySelector(".approval-outcome").textContent = approvalOutcome(d);
      break;
    }
    case "text_delta": {
      const t = turnBox(ev.turn);
      if (!t.stream) { t.stream = conch.el("div", { class: "msg assistant streaming" }); t.box.append(t.stream); }
      t.deltas.push(d.text);
      if (!state.deltaTimer) state.deltaTimer = setTimeout(flushDeltas, 40);
      break;
    }
    case "tool_started": {
      const t = turnBox(ev.turn);
      const line = conch.el("div", { class: "tool running" },
        conch.el("span", { class: "tool-name", text: d.name }), " ",
        conch.el("span", { class: "tool-sum", text: d.summary || "" }));
      t.tools[d.call_id] = line;
      t.box.append(line);
      scrollDown();
      break;
    }
    case "tool_finished": {
      const t = turnBox(ev.turn);
      let line = t.tools[d.call_id];
      if (!line) { line = conch.el("div", { class: "tool" }, conch.el("span", { class: "tool-name", text: d.name })); t.box.append(line); }
      line.className = "tool " + (d.is_error ? "failed" : "ok");
      const secs = (d.duration_ns / 1e9).toFixed(1) + "s";
      const exit = d.exit_code != null ? " exit " + d.exit_code : "";
      line.append(conch.el("span", { class: "tool-result", text: " → " + secs + exit + (d.summary ? ": " + d.summary : "") }));
      scrollDown();
      break;
    }
    case "tool_progress": {
      const t = turnBox(ev.turn);
      if (!t.progress) { t.progress = conch.el("pre", { class: "progress" }); t.box.append(t.progress); }
      t.progress.textContent = d.text;
      scrollDown();
      break;
    }
    case "hook": {
      if (!d.hooks) break;
      const t = turnBox(ev.turn);
      let text = d.stage + " hooks: " + d.hooks + " ran";
      if (d.failed && d.failed.length) text += ", failed: " + d.failed.join(", ");
      if (d.issues && d.issues.length) text += ", " + d.issues.length + " open issue(s) handed back";
      t.box.append(conch.el("div", { class: "tool hook", text: text }));
      scrollDown();
      break;
    }
    case "retry":
      setStatus("The model call failed (" + d.reason + "); retrying in " + Math.round(d.delay_ns / 1e9) + "s (attempt " + d.attempt + " of " + d.max + ")");
      break;
    case "turn":
      if (d.status === "pending") setStatus(d.queued ? "queued (" + d.queued + ")" : "queued");
      else if (d.status === "running") setStatus(d.attempt > 1 ? "working… (resumed after a restart)" : "working…");
      else if (d.resumes) setStatus("interrupted by a restart of conch; it resumes when conch is back");
      else {
        setStatus("");
        if (d.status !== "done" && d.reason) {
          $("messages").append(conch.el("div", { class: "notice", text: "Stopped: " + d.reason }));
          scrollDown();
        }
        const t = state.turns[ev.turn];
        if (t && t.stream) { t.stream.classList.remove("streaming"); }
      }
      break;
  }
}

function approvalOutcome(d) {
  if (d.reason === "timeout") return "Denied: nobody answered in time.";
  if (d.reason === "turn_ended") return "Denied: the turn ended before an answer.";
  const by = d.by ? " by " + d.by : "";
  if (d.choice === "once") return "Allowed once" + by + ".";
  if (d.choice === "conversation") return "Allowed for this conversation" + by + ".";
  return "Denied" + by + ".";
}

// answerApproval sends a click; the outcome arrives as an event.
async function answerApproval(id, choice, box) {
  for (const b of box.querySelectorAll("button")) b.disabled = true;
  try {
    await conch.api("POST", "/api/approvals", { conversation: state.current, id, choice });
  } catch (e) {
    box.querySelector(".approval-outcome").textContent = "Not taken: " + e.message;
    for (const b of box.querySelectorAll("button")) b.disabled = false;
  }
}

// flushDeltas shows the streamed text gathered since the last call, as one
// appended text node per turn, and scrolls once. Text is never rewritten
// and layout runs at most once per flush: per delta, a long unbroken token
// was laid out again whole each time, which froze the tab for minutes.
function flushDeltas() {
  state.deltaTimer = 0;
  let any = false;
  for (const t of Object.values(state.turns)) {
    if (!t.deltas.length) continue;
    if (t.stream) { t.stream.append(t.deltas.join("")); any = true; }
    t.deltas = [];
  }
  if (any) scrollDown();
}

function setStatus(s) {
  $("status").textContent = s;
  $("status").className = "status" + (s ? " busy" : "");
}

function newID() {
  const a = new Uint8Array(12);
  crypto.getRandomValues(a);
  return Array.from(a, (b) => b.toString(16).padStart(2, "0")).join("");
}

// sendFrame is a message as the socket carries it, with its files.
function sendFrame(m) {
  const f = { type: "send", id: m.id, text: m.text };
  if (state.sentFiles[m.id]) f.files = state.sentFiles[m.id];
  return f;
}

function send() {
  const input = $("input");
  const text = input.value;
  if ((!text.trim() && !state.files.length) || !state.current) return;
  const why = tooLong(text);
  if (why) { conch.showError(why); return; } // kept in the input, to shorten
  const names = state.files.map((f) => "[" + f.name + "]").join(" ");
  const m = { id: newID(), text, names };
  if (state.files.length) state.sentFiles[m.id] = state.files;
  state.files = [];
  renderFiles();
  setOutbox(state.current, outbox(state.current).concat([m]));
  addPending({ id: m.id, text: names ? (text ? text + "\n" : "") + names : text });
  input.value = "";
  if (state.ws && state.ws.readyState === WebSocket.OPEN) state.ws.send(JSON.stringify(sendFrame(m)));
}

// addFiles reads files (pasted, dropped, chosen or recorded) for the next
// message; files over the server's limit are refused here with words.
async function addFiles(list) {
  const max = (conch.session && conch.session.max_file_bytes) || 25 << 20;
  for (const file of list) {
    const used = state.files.reduce((n, f) => n + f.size, 0);
    if (used + file.size > max) {
      conch.showError("“" + file.name + "” was not attached: the files of one message may be " + Math.floor(max / 1048576) + " MB together.");
      continue;
    }
    const data = await new Promise((resolve, reject) => {
      const r = new FileReader();
      r.onload = () => resolve(String(r.result).replace(/^data:[^,]*,/, ""));
      r.onerror = () => reject(r.error);
      r.readAsDataURL(file);
    });
    state.files.push({ name: file.name || "pasted", type: file.type, data, size: file.size });
  }
  renderFiles();
}

function renderFiles() {
  const box = $("attachments");
  box.replaceChildren();
  box.hidden = !state.files.length;
  state.files.forEach((f, i) => {
    const chip = conch.el("span", { class: "chip", text: f.name + " (" + Math.ceil(f.size / 1024) + " KB)" });
    const x = conch.el("button", { type: "button", title: "Remove", text: "×" });
    x.addEventListener("click", () => { state.files.splice(i, 1); renderFiles(); });
    chip.append(x);
    box.append(chip);
  });
}

// record starts or stops a voice message; when it stops, the recording is
// sent at once (it is transcribed and answered).
async function record() {
  const btn = $("record");
  if (state.recorder) { state.recorder.stop(); return; }
  let stream;
  try {
    stream = await navigator.mediaDevices.getUserMedia({ audio: true });
  } catch (e) {
    conch.showError("The microphone cannot be used: " + e.message);
    return;
  }
  const rec = new MediaRecorder(stream);
  const chunks = [];
  rec.ondataavailable = (e) => { if (e.data.size) chunks.push(e.data); };
  rec.onstop = async () => {
    stream.getTracks().forEach((t) => t.stop());
    state.recorder = null;
    btn.classList.remove("recording");
    btn.textContent = "Record";
    const type = (rec.mimeType || "audio/webm").split(";")[0];
    const ext = type.includes("ogg") ? ".ogg" : type.includes("mp4") ? ".m4a" : ".webm";
    const file = new File(chunks, "voice-" + new Date().toISOString().replace(/[:.]/g, "-") + ext, { type });
    await addFiles([file]);
    send();
  };
  state.recorder = rec;
  rec.start();
  btn.classList.add("recording");
  btn.textContent = "Stop";
}

function main() {
  $("composer").addEventListener("submit", (e) => { e.preventDefault(); send(); });
  $("input").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) { e.preventDefault(); send(); }
  });
  $("input").addEventListener("paste", (e) => {
    const files = e.clipboardData ? Array.from(e.clipboardData.files) : [];
    if (files.length) { e.preventDefault(); addFiles(files).catch((err) => conch.showError(err.message)); }
  });
  const area = document.querySelector("main") || document.body;
  area.addEventListener("dragover", (e) => { e.preventDefault(); area.classList.add("drop-target"); });
  area.addEventListener("dragleave", () => area.classList.remove("drop-target"));
  area.addEventListener("drop", (e) => {
    e.preventDefault();
    area.classList.remove("drop-target");
    const files = e.dataTransfer ? Array.from(e.dataTransfer.files) : [];
    if (files.length) addFiles(files).catch((err) => conch.showError(err.message));
  });
  $("attach").addEventListener("click", () => $("file").click());
  $("file").addEventListener("change", () => { addFiles(Array.from($("file").files)).catch((err) => conch.showError(err.message)); $("file").value = ""; });
  $("record").addEventListener("click", () => record().catch((err) => conch.showError(err.message)));
  $("new-conv").addEventListener("click", () => newConv().catch((e) => conch.showError(e.message)));
  $("rename").addEventListener("click", async () => {
    const c = state.convs.find((x) => x.id === state.current);
    const t = prompt("New name", c ? c.title : "");
    if (t == null) return;
    try {
      await conch.api("PATCH", "/api/conversations/" + encodeURIComponent(state.current), { title: t });
      await loadConvs();
      const nc = state.convs.find((x) => x.id === state.current);
      if (nc) $("conv-title").textContent = nc.title;
    } catch (e) { conch.showError(e.message); }
  });
  $("delete").addEventListener("click", async () => {
    if (!confirm("Delete this conversation? Its history is forgotten and its computer removed.")) return;
    try {
      await conch.api("DELETE", "/api/conversations/" + encodeURIComponent(state.current));
      setOutbox(state.current, []);
      state.current = null;
      await loadConvs();
      if (state.convs.length) openConv(state.convs[0].id); else await newConv();
    } catch (e) { conch.showError(e.message); }
  });
  $("logout").addEventListener("click", () => {
    if (state.ws) { state.ws.onclose = null; state.ws.close(); state.ws = null; }
    conch.logout();
  });
  setInterval(() => loadConvs().catch(() => {}), 10000);
  loadConvs().then(() => {
    const want = location.hash.slice(1);
    if (want && state.convs.some((c) => c.id === want)) openConv(want);
    else if (state.convs.length) openConv(state.convs[0].id);
    else return newConv();
  }).catch((e) => conch.showError(e.message));
}

conch.start(main);
