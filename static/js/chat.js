// The chat page: renders the thread snapshot, streams the answer over the workflow socket, and calls the REST
// handlers for every action. The server is the source of truth: after anything but a delta the page refetches the
// snapshot (GET /api/workflows/<id>/chat/) and re-renders. Stored messages arrive as sanitized HTML; streaming
// text is escaped first and only then lightly formatted.
(function () {
  "use strict";

  const config = JSON.parse(document.getElementById("chat-config").textContent);
  let thread = JSON.parse(document.getElementById("chat-thread").textContent);
  const el = {
    thread: document.getElementById("thread"),
    empty: document.getElementById("empty"),
    notice: document.getElementById("notice"),
    status: document.getElementById("status"),
    form: document.getElementById("composer-form"),
    composer: document.getElementById("composer"),
    send: document.getElementById("send"),
    stop: document.getElementById("stop"),
    clear: document.getElementById("clear-chat"),
  };
  // The active run as the page knows it: id, last applied seq, text so far.
  let live = null;
  let hubEpoch = thread.hub_epoch;
  let refetchTimer = null;
  let editing = null;

  function csrfToken() {
    const match = document.cookie.match(/(?:^|;\s*)csrftoken=([^;]+)/);
    return match ? decodeURIComponent(match[1]) : "";
  }

  async function api(method, path, body) {
    const response = await fetch(config.api + path, {
      method,
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRFToken": csrfToken(), Accept: "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    let data = {};
    try { data = await response.json(); } catch (e) { data = {}; }
    if (!response.ok) {
      const error = new Error(data.message || "Something went wrong.");
      error.code = data.code || "error";
      error.data = data;
      throw error;
    }
    return data;
  }

  // --- notices and announcements ---------------------------------------------------------------------------

  function showRefusal(error) {
    const words = config.plain_words[error.code] || error.message || "Something went wrong.";
    el.notice.textContent = words;
    el.notice.dataset.code = error.code || "";
    el.notice.className = "notice";
    el.notice.hidden = false;
    if (error.code === "revision_conflict" || error.code === "run_in_progress") refetch();
  }

  function clearNotice() { el.notice.hidden = true; el.notice.textContent = ""; el.notice.dataset.code = ""; }

  function announce(text) { el.status.textContent = ""; setTimeout(() => { el.status.textContent = text; }, 30); }

  // --- rendering -------------------------------------------------------------------------------------------

  function escapeHtml(text) {
    return text.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
  }

  // Escaped first, so the only markup is what this adds: `code` and **bold**.
  function formatStreaming(text) {
    return escapeHtml(text)
      .replace(/`([^`\n]+)`/g, "<code>$1</code>")
      .replace(/\*\*([^*\n]+)\*\*/g, "<strong>$1</strong>");
  }

  function button(label, attrs, onClick) {
    const b = document.createElement("button");
    b.type = "button";
    b.textContent = label;
    for (const [k, v] of Object.entries(attrs || {})) b.setAttribute(k, v);
    if (onClick) b.addEventListener("click", onClick);
    return b;
  }

  function seconds(ms) { return ms < 1000 ? "<1s" : Math.round(ms / 1000) + "s"; }

  function stepsDisclosure(run) {
    if (!run || !run.steps.length && run.duration_ms == null) return null;
    const n = run.steps.length;
    const worked = run.duration_ms != null ? "Worked for " + seconds(run.duration_ms) : "Working";
    if (!n) {
      const flat = document.createElement("span");
      flat.className = "steps flat";
      flat.textContent = worked;
      return flat;
    }
    const details = document.createElement("details");
    details.className = "steps";
    const summary = document.createElement("summary");
    summary.textContent = worked + " · " + n + (n === 1 ? " step" : " steps");
    details.appendChild(summary);
    if (n) {
      const list = document.createElement("ul");
      for (const step of run.steps) {
        const item = document.createElement("li");
        item.textContent = step.name + (step.state === "started" ? " (running)" : step.is_error ? " (failed)" : "");
        list.appendChild(item);
      }
      details.appendChild(list);
    }
    return details;
  }

  function switcher(message) {
    const s = message.siblings;
    if (s.count < 2) return null;
    const wrap = document.createElement("span");
    wrap.className = "switcher";
    const what = message.role === "user" ? "version of your message" : "answer";
    const prev = button("‹", { "aria-label": "Previous " + what, class: "switch-prev" }, () => switchTo(s.previous_id));
    const next = button("›", { "aria-label": "Next " + what, class: "switch-next" }, () => switchTo(s.next_id));
    prev.disabled = !s.previous_id || !!live;
    next.disabled = !s.next_id || !!live;
    const label = document.createElement("span");
    label.className = "switch-label";
    label.textContent = s.index + " / " + s.count;
    wrap.append(prev, label, next);
    return wrap;
  }

  function renderMessage(message) {
    const li = document.createElement("li");
    li.className = "msg " + message.role;
    li.dataset.id = message.id;
    li.dataset.status = message.status;
    const who = document.createElement("span");
    who.className = "visually-hidden";
    who.textContent = message.role === "user" ? "You said:" : "Answer:";
    li.appendChild(who);
    const body = document.createElement("div");
    body.className = "body";
    body.innerHTML = message.html; // sanitized server-side (chat/rendering.py)
    li.appendChild(body);
    if (message.status !== "complete") {
      const badge = document.createElement("span");
      badge.className = "badge " + message.status;
      badge.textContent = message.status === "stopped" ? "Stopped" : "Could not finish" + (message.error_code ? " (" + message.error_code + ")" : "");
      li.appendChild(badge);
    }
    if (message.role === "assistant") {
      const steps = stepsDisclosure(message.run);
      if (steps) li.appendChild(steps);
    }
    const tools = document.createElement("div");
    tools.className = "msg-tools";
    const sw = switcher(message);
    if (sw) tools.appendChild(sw);
    if (message.role === "user") {
      if (message.can_edit) tools.appendChild(button("Edit", { class: "edit", "aria-label": "Edit this message" }, () => startEdit(li, message)));
    } else {
      tools.appendChild(button("Copy", { class: "copy", "aria-label": "Copy this answer" }, () => copy(message.text)));
      tools.appendChild(button("Good", { class: "rate-good", "aria-pressed": String(message.rating === "good"), "aria-label": "Good answer" },
        () => rate(message, message.rating === "good" ? null : "good")));
      tools.appendChild(button("Bad", { class: "rate-bad", "aria-pressed": String(message.rating === "bad"), "aria-label": "Bad answer" },
        () => rate(message, message.rating === "bad" ? null : "bad")));
      if (message.can_regenerate) tools.appendChild(button("Try again", { class: "regenerate" }, () => regenerate(message)));
    }
    li.appendChild(tools);
    return li;
  }

  function renderStreaming() {
    let li = el.thread.querySelector("li.streaming");
    if (!live) { if (li) li.remove(); return; }
    if (!li) {
      li = document.createElement("li");
      li.className = "msg assistant streaming";
      li.setAttribute("aria-live", "polite");
      li.setAttribute("aria-busy", "true");
      li.innerHTML = '<span class="visually-hidden">Answer being written:</span><div class="body"></div><div class="steps live-steps"></div>';
      el.thread.appendChild(li);
    }
    li.dataset.runId = live.id;
    li.querySelector(".body").innerHTML = formatStreaming(live.text) + '<span class="caret" aria-hidden="true"></span>';
    const steps = li.querySelector(".live-steps");
    steps.textContent = live.steps.length
      ? live.steps.map((s) => s.name + (s.state === "started" ? " …" : " ✓")).join(" · ")
      : live.state === "stopping" ? "Stopping…" : "";
  }

  function render() {
    el.thread.innerHTML = "";
    for (const message of thread.messages) el.thread.appendChild(renderMessage(message));
    el.empty.hidden = thread.messages.length > 0 || !!live;
    renderStreaming();
    el.stop.hidden = !live;
    el.send.disabled = !!live;
  }

  function adopt(snapshot) {
    thread = snapshot;
    const run = snapshot.active_run;
    if (run) {
      const same = live && live.id === run.id && live.seq >= run.seq;
      live = same ? { ...live, state: run.state, steps: run.steps }
        : { id: run.id, seq: run.seq, text: run.partial_text || "", state: run.state, steps: run.steps };
    } else {
      live = null;
    }
    render();
  }

  async function refetch() {
    clearTimeout(refetchTimer);
    refetchTimer = null;
    try { adopt(await api("GET", "")); } catch (error) { showRefusal(error); }
  }

  function refetchSoon(ms) {
    if (!refetchTimer) refetchTimer = setTimeout(refetch, ms);
  }

  // --- actions ---------------------------------------------------------------------------------------------

  function newClientId() {
    return (crypto.randomUUID ? crypto.randomUUID() : String(Date.now()) + Math.random().toString(16).slice(2));
  }

  async function send(text) {
    clearNotice();
    try {
      const result = await api("POST", "messages/", { text, client_message_id: newClientId(), expected_revision: null });
      el.composer.value = "";
      if (!live || live.id !== result.run.id) {
        live = { id: result.run.id, seq: Math.max(result.run.seq, 0), text: "", state: result.run.state, steps: [] };
      }
      await refetch();
    } catch (error) {
      showRefusal(error);
    }
  }

  async function stop() {
    if (!live) return;
    try {
      await api("POST", "runs/" + live.id + "/stop/");
      announce("Stopping the answer.");
      await refetch();
    } catch (error) { showRefusal(error); }
  }

  async function switchTo(messageId) {
    if (!messageId) return;
    clearNotice();
    try { adopt(await api("POST", "messages/" + messageId + "/switch/", { expected_revision: thread.revision })); announce("Switched version."); }
    catch (error) { showRefusal(error); }
  }

  async function regenerate(message) {
    clearNotice();
    try {
      const run = await api("POST", "messages/" + message.id + "/regenerate/", { expected_revision: thread.revision });
      live = { id: run.id, seq: run.seq, text: "", state: run.state, steps: [] };
      await refetch();
    } catch (error) { showRefusal(error); }
  }

  async function rate(message, rating) {
    try { await api("POST", "messages/" + message.id + "/feedback/", { rating }); announce(rating ? "Rated " + rating + "." : "Rating removed."); await refetch(); }
    catch (error) { showRefusal(error); }
  }

  async function copy(text) {
    try {
      await navigator.clipboard.writeText(text);
    } catch (e) {
      const area = document.createElement("textarea");
      area.value = text;
      document.body.appendChild(area);
      area.select();
      try { document.execCommand("copy"); } catch (ignored) { /* nothing more to try */ }
      area.remove();
    }
    announce("Copied.");
  }

  function startEdit(li, message) {
    if (editing) return;
    editing = message.id;
    const body = li.querySelector(".body");
    const tools = li.querySelector(".msg-tools");
    body.hidden = true;
    tools.hidden = true;
    const box = document.createElement("div");
    box.className = "edit-box";
    const id = "edit-" + message.id;
    box.innerHTML = '<label for="' + id + '">Edit your message</label><textarea id="' + id + '" rows="3"></textarea>'
      + '<p class="meta">Enter sends, Esc cancels. The agent forgets everything after this message.</p>';
    const area = box.querySelector("textarea");
    area.value = message.text;
    const actions = document.createElement("div");
    actions.className = "msg-tools";
    const cancel = () => { editing = null; box.remove(); body.hidden = false; tools.hidden = false; li.querySelector(".edit")?.focus(); };
    const save = async () => {
      const text = area.value;
      if (!text.trim()) return;
      clearNotice();
      try {
        const result = await api("POST", "messages/" + message.id + "/edit/", { text, expected_revision: thread.revision, client_message_id: newClientId() });
        editing = null;
        live = { id: result.run.id, seq: result.run.seq, text: "", state: result.run.state, steps: [] };
        await refetch();
        el.composer.focus();
      } catch (error) { showRefusal(error); }
    };
    actions.append(button("Save and send", { class: "edit-save" }, save), button("Cancel", { class: "edit-cancel" }, cancel));
    box.appendChild(actions);
    area.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && !event.shiftKey) { event.preventDefault(); save(); }
      else if (event.key === "Escape") { event.preventDefault(); event.stopPropagation(); cancel(); }
    });
    li.appendChild(box);
    area.focus();
  }

  el.form.addEventListener("submit", (event) => {
    event.preventDefault();
    const text = el.composer.value;
    if (text.trim()) send(text);
  });
  el.composer.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) { event.preventDefault(); el.form.requestSubmit(); }
  });
  el.stop.addEventListener("click", stop);
  document.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && live && !editing) { event.preventDefault(); stop(); }
  });
  el.clear.addEventListener("click", async () => {
    if (!window.confirm("Clear the whole chat? The agents forget this conversation too.")) return;
    try { await api("POST", "clear/"); announce("Chat cleared."); await refetch(); } catch (error) { showRefusal(error); }
  });

  // --- realtime --------------------------------------------------------------------------------------------

  function onRunEvent(event) {
    if (!live || live.id !== event.run_id) {
      // A run this page does not know (another tab sent it) or one that already ended here: take the snapshot.
      if (event.type === "run.started" || (live === null && event.type === "run.delta")) refetchSoon(50);
      else if (event.type === "run.finished" || event.type === "run.failed") refetchSoon(50);
      return;
    }
    if (event.seq <= live.seq) return; // a duplicate, or already in the snapshot
    if (event.seq > live.seq + 1) { refetchSoon(400); return; } // a gap: the snapshot says where we stand
    live.seq = event.seq;
    if (event.type === "run.delta") {
      live.text += event.text;
      renderStreaming();
    } else if (event.type === "run.step") {
      const step = live.steps.find((s) => s.id === event.step_id);
      if (step) step.state = event.phase; else live.steps.push({ id: event.step_id, name: event.name, state: event.phase, is_error: event.is_error });
      renderStreaming();
    } else if (event.type === "run.stopping") {
      live.state = "stopping";
      renderStreaming();
    } else if (event.type === "run.finished" || event.type === "run.failed") {
      announce(event.status === "stopped" ? "Answer stopped." : event.type === "run.failed" ? "The answer could not finish." : "Answer finished.");
      live = null;
      refetch();
    }
  }

  // Metadata only: the panels refetch through their own handlers when the owner opens them.
  function markPanelUpdated(type) {
    const links = type === "context.updated" ? [document.getElementById("context-link")] : document.querySelectorAll(".memory-link");
    for (const link of links) {
      if (link && !link.dataset.updated) { link.dataset.updated = "1"; link.textContent += " (updated)"; }
    }
  }

  function connect(attempt) {
    const scheme = location.protocol === "https:" ? "wss://" : "ws://";
    const socket = new WebSocket(scheme + location.host + config.socket);
    socket.addEventListener("open", () => { attempt = 0; });
    socket.addEventListener("message", (message) => {
      let event;
      try { event = JSON.parse(message.data); } catch (e) { return; }
      if (event.hub_epoch && event.hub_epoch !== hubEpoch) {
        hubEpoch = event.hub_epoch; // the hub restarted: its counters did too, so nothing before counts
        refetch();
        if (event.type === "hello") return;
      }
      if (event.type === "hello") { refetch(); return; } // events may have been missed while connecting
      if (event.type && event.type.startsWith("run.")) onRunEvent(event);
      else if (event.type === "chat.updated" && event.revision !== thread.revision) refetchSoon(50);
      else if (event.type === "context.updated" || event.type === "memory.updated") markPanelUpdated(event.type);
    });
    socket.addEventListener("close", () => {
      setTimeout(() => connect(attempt + 1), Math.min(5000, 300 * 2 ** Math.min(attempt, 4)));
    });
    window.chatSocket = socket;
  }

  adopt(thread);
  connect(0);
})();
