// Shared by the chat and the dashboard: API calls, the login check, small DOM helpers.
//
// Every request carries the session's request token besides its cookie: the
// token came with the answer to the login link (login.js) and lives in this
// origin's localStorage, which pages of other ports cannot read, while the
// cookie is sent to any port of this host. Fetches send it as a header,
// WebSockets as a subprotocol.
"use strict";

const conch = {
  token() { return localStorage.getItem("conch.token") || ""; },
  async api(method, path, body) {
    const opts = { method, headers: { "X-Conch-Token": conch.token() }, credentials: "same-origin" };
    if (body !== undefined) {
      opts.headers["Content-Type"] = "application/json";
      opts.body = JSON.stringify(body);
    }
    const r = await fetch(path, opts);
    let data = null;
    try { data = await r.json(); } catch (e) { data = null; }
    if (r.status === 401) { conch.showLogin(); throw new Error("not logged in"); }
    if (!r.ok) throw new Error((data && data.error) || ("HTTP " + r.status));
    return data;
  },
  // text fetches a text resource (/metrics) with the token.
  async text(path) {
    const r = await fetch(path, { headers: { "X-Conch-Token": conch.token() }, credentials: "same-origin" });
    if (r.status === 401) { conch.showLogin(); throw new Error("not logged in"); }
    if (!r.ok) throw new Error("HTTP " + r.status);
    return r.text();
  },
  showLogin() {
    document.getElementById("app").hidden = true;
    document.getElementById("login").hidden = false;
  },
  async start(main) {
    try {
      conch.session = await conch.api("GET", "/api/session");
    } catch (e) {
      conch.showLogin();
      return;
    }
    document.getElementById("login").hidden = true;
    document.getElementById("app").hidden = false;
    main();
  },
  el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") e.className = v;
      else if (k === "text") e.textContent = v;
      else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v);
    }
    for (const c of children) e.append(c);
    return e;
  },
  wsURL(path) {
    return (location.protocol === "https:" ? "wss://" : "ws://") + location.host + path;
  },
  // ws opens a WebSocket carrying the request token.
  ws(path) {
    return new WebSocket(conch.wsURL(path), ["conch", "conch-token." + conch.token()]);
  },
  async logout() {
    try { await conch.api("POST", "/api/logout"); } catch (e) { /* shown as login */ }
    localStorage.removeItem("conch.token");
    conch.showLogin();
  },
  showError(msg) {
    const e = document.getElementById("error");
    if (!msg) { e.hidden = true; return; }
    e.textContent = msg;
    e.hidden = false;
    clearTimeout(conch._errTimer);
    conch._errTimer = setTimeout(() => { e.hidden = true; }, 10000);
  },
  // html inserts HTML the server rendered and sanitised (Markdown replies).
  html(e, s) { e.innerHTML = s; return e; },
  bytes(n) {
    if (n == null || n < 0) return "?";
    const u = ["B", "KiB", "MiB", "GiB"];
    let i = 0;
    while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
    return n.toFixed(i ? 1 : 0) + " " + u[i];
  },
  ago(t) {
    if (!t) return "";
    const s = Math.round((Date.now() - new Date(t).getTime()) / 1000);
    if (s < 60) return s + "s ago";
    if (s < 3600) return Math.round(s / 60) + "m ago";
    if (s < 86400) return Math.round(s / 3600) + "h ago";
    return new Date(t).toLocaleDateString();
  },
};
