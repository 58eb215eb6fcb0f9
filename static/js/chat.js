// The chat page: renders the thread snapshot, streams the answer over the workflow socket, and calls the REST
// handlers for every action. The server is the source of truth: after anything but a delta the page refetches the
// snapshot (GET /api/workflows/<id>/chat/) and re-renders.
//
// Rendering: the owner's messages are shown as typed (text, never HTML). Answers arrive as sanitized HTML from the
// server's one Markdown renderer (chat/rendering.py); while an answer streams the page asks the server for the
// text so far rendered the same way (GET runs/<id>/, `partial_html`), so nothing jumps when the answer ends. The
// thread is rebuilt as a detached tree and morphed into the page (Idiomorph), so focus, selection, open
// disclosures and the edit box survive an update. Buttons are handled by delegation: a morphed button keeps no
// stale closure.
(function () {
  "use strict";

  const config = JSON.parse(document.getElementById("chat-config").textContent);
  let thread = JSON.parse(document.getElementById("chat-thread").textContent);
  const el = {
    scroller: document.getElementById("thread-scroll"),
    thread: document.getElementById("thread"),
    empty: document.getElementById("empty"),
    notice: document.getElementById("notice"),
    connection: document.getElementById("connection"),
    status: document.getElementById("status"),
    form: document.getElementById("composer-form"),
    composer: document.getElementById("composer"),
    send: document.getElementById("send"),
    stop: document.getElementById("stop"),
    clear: document.getElementById("clear-chat"),
    jump: document.getElementById("jump-latest"),
    attachments: document.getElementById("attachments"),
    attach: document.getElementById("attach"),
    attachInput: document.getElementById("attach-input"),
    attachmentsNote: document.getElementById("attachments-note"),
  };
  // The active run as the page knows it: id, last applied seq, text so far, and the server's rendering of a
  // prefix of that text (`html` renders `htmlText`).
  let live = null;
  let hubEpoch = thread.hub_epoch;
  let refetchTimer = null;
  let editing = null; // the id of the owner's message being edited
  let stick = true; // follow the newest text; false once the owner scrolls up
  let followedTop = 0; // where following last put the view
  const toggledByOwner = new Set(); // disclosures the owner opened or closed themselves
  let renderTimer = null;
  let renderInFlight = false;
  let reconnectTimer = null;
  const composerPlaceholder = el.composer.placeholder;
  const RENDER_EVERY_MS = 200;

  const timeFormat = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "short" });
  const shortTime = new Intl.DateTimeFormat(undefined, { hour: "numeric", minute: "2-digit" });

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
    el.notice.hidden = false;
    if (["revision_conflict", "run_in_progress", "approval_pending", "already_decided"].includes(error.code)) refetch();
  }

  function clearNotice(code) {
    if (code && el.notice.dataset.code !== code) return;
    el.notice.hidden = true; el.notice.textContent = ""; el.notice.dataset.code = "";
  }

  function announce(text) { el.status.textContent = ""; setTimeout(() => { el.status.textContent = text; }, 30); }

  // --- building the thread ---------------------------------------------------------------------------------

  function escapeHtml(text) {
    return text.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
  }

  const node = window.ocDom.node;

  function button(label, attrs) { return node("button", { type: "button", text: label, ...attrs }); }

  function seconds(ms) { return ms < 1000 ? "<1s" : Math.round(ms / 1000) + "s"; }

  function stamp(iso) {
    if (!iso) return null;
    const when = new Date(iso);
    return node("time", { datetime: iso, title: timeFormat.format(when), class: "stamp", text: shortTime.format(when) });
  }

  // Answer HTML (already sanitized by the server) with a copy button on each code block.
  function answerBody(html, tail) {
    const body = node("div", { class: "body answer-body" });
    body.innerHTML = html || "";
    if (tail) {
      const last = body.lastElementChild;
      const target = last && last.tagName === "P" ? last : body.appendChild(document.createElement("p"));
      target.appendChild(document.createTextNode(tail));
    }
    for (const pre of body.querySelectorAll("pre")) {
      const wrap = node("div", { class: "code-block" });
      const head = node("div", { class: "code-head" }, [
        node("span", { class: "code-lang", text: pre.dataset.lang || "code" }),
        button("Copy code", { class: "copy-code", "data-action": "copy-code", "aria-label": "Copy this code" }),
      ]);
      pre.replaceWith(wrap);
      wrap.append(head, pre);
    }
    return body;
  }

  function argumentsLine(args) {
    const parts = [];
    for (const [key, value] of Object.entries(args || {})) {
      const shown = typeof value === "string" ? value : JSON.stringify(value);
      parts.push(key + ": " + (shown.length > 60 ? shown.slice(0, 60) + "…" : shown));
      if (parts.length === 3) break;
    }
    return parts.join(" · ");
  }

  function stepItem(step) {
    const state = step.state === "started" ? "running" : step.is_error ? "failed" : "done";
    const summary = node("summary", {}, [
      node("span", { class: "step-state " + state, "aria-label": state, text: state === "running" ? "…" : state === "failed" ? "✕" : "✓" }),
      node("span", { class: "step-name", text: step.label || step.name }),
      node("span", { class: "step-args", text: argumentsLine(step.arguments) }),
    ]);
    const details = node("details", { class: "step", "data-step": step.id }, [summary]);
    if (step.summary) details.appendChild(node("p", { class: "step-summary", text: step.summary }));
    if (step.arguments && Object.keys(step.arguments).length) {
      details.appendChild(node("p", { class: "step-label", text: "Arguments" }));
      details.appendChild(node("pre", { class: "step-json", text: JSON.stringify(step.arguments, null, 2) }));
    }
    if (step.result) {
      details.appendChild(node("details", { class: "step-full", "data-step": step.id }, [
        node("summary", { text: "Full result" }),
        node("pre", { class: "step-json", text: prettyMaybe(step.result) }),
      ]));
    }
    return node("li", {}, [details]);
  }

  function prettyMaybe(text) {
    try { return JSON.stringify(JSON.parse(text), null, 2); } catch (e) { return text; }
  }

  function stepsDisclosure(run, { live: isLive } = {}) {
    if (!run) return null;
    const n = run.steps.length;
    const worked = isLive ? (run.state === "stopping" ? "Stopping" : "Working") : "Worked for " + seconds(run.duration_ms || 0);
    // An answer without tool steps needs no "worked for" line; a long one says how long it took.
    if (!n) return isLive || run.duration_ms >= 10000 ? node("p", { class: "steps flat", text: worked }) : null;
    const list = node("ul", { class: "step-list" }, run.steps.map(stepItem));
    return node("details", { class: "steps", "data-run": run.id, open: isLive || null }, [
      node("summary", { text: worked + " · " + n + (n === 1 ? " step" : " steps") }),
      list,
    ]);
  }

  function switcher(message) {
    const s = message.siblings;
    if (s.count < 2) return null;
    const what = message.role === "user" ? "version of your message" : "answer";
    return node("span", { class: "switcher" }, [
      button("‹", { "aria-label": "Previous " + what, class: "switch-prev", "data-action": "switch", "data-target": s.previous_id || "", disabled: !s.previous_id || !!live }),
      node("span", { class: "switch-label", text: s.index + " / " + s.count }),
      button("›", { "aria-label": "Next " + what, class: "switch-next", "data-action": "switch", "data-target": s.next_id || "", disabled: !s.next_id || !!live }),
    ]);
  }

  // A turn a schedule or webhook sent in the owner's name (docs/triggers.md): "Scheduled: morning summary".
  const TRIGGER_WORDS = { schedule: "Scheduled", webhook: "Webhook" };

  function who(role, trigger) {
    const name = trigger ? (TRIGGER_WORDS[trigger.kind] || "Trigger") + ": " + trigger.name : role === "user" ? "You" : (config.agent_name || "Agent");
    return node("div", { class: "who" }, [
      node("span", { class: "who-name", text: name }),
      role === "assistant" ? node("span", { class: "who-tag", text: "agent" }) : null,
      trigger ? node("span", { class: "who-tag trigger-tag", text: trigger.kind }) : null,
    ]);
  }

  function messageItem(message) {
    const isUser = message.role === "user";
    const id = !isUser && message.run ? "run-" + message.run.id : "msg-" + message.id;
    const li = node("li", { class: "msg " + message.role + (message.trigger ? " triggered" : ""), id, "data-id": message.id, "data-status": message.status });
    const head = node("div", { class: "msg-head" }, [who(message.role, message.trigger), stamp(message.created_at)]);
    li.appendChild(head);
    li.appendChild(node("span", { class: "visually-hidden", text: isUser ? "You said:" : "Answer:" }));
    const beingEdited = editing === message.id;
    if (isUser) {
      li.appendChild(node("div", { class: "body user-body", text: message.text, hidden: beingEdited }));
      if (message.files && message.files.length) li.appendChild(messageFiles(message.files));
    } else {
      li.appendChild(answerBody(message.html));
    }
    if (message.status !== "complete") {
      const code = message.error_code;
      const words = message.status === "stopped" ? "Stopped" : "Could not finish" + (code ? ": " + (config.plain_codes[code] || code.replace(/_/g, " ")) : "");
      li.appendChild(node("span", { class: "badge " + message.status, text: words }));
      if (message.status !== "stopped" && message.error_message) {
        li.appendChild(node("p", { class: "run-error", text: message.error_message }));
      }
    }
    const steps = isUser ? null : stepsDisclosure(message.run);
    if (steps) li.appendChild(steps);
    // Approvals hook (static/chat/approvals.js): who decided which tool call, when.
    if (!isUser && window.ocApprovals) li.append(...window.ocApprovals.history(message.run));
    const tools = node("div", { class: "msg-tools", hidden: beingEdited });
    const sw = switcher(message);
    if (sw) tools.appendChild(sw);
    if (isUser) {
      if (message.can_edit) tools.appendChild(button("Edit", { class: "edit", "aria-label": "Edit this message", "data-action": "edit" }));
    } else {
      const good = message.rating === "good";
      const bad = message.rating === "bad";
      tools.append(
        button("Copy", { class: "copy", "aria-label": "Copy this answer", "data-action": "copy-answer" }),
        button(good ? "✓ Good" : "Good", { class: "rate-good", "aria-pressed": String(good), "aria-label": "Good answer", "data-action": "rate", "data-rating": "good" }),
        button(bad ? "✓ Bad" : "Bad", { class: "rate-bad", "aria-pressed": String(bad), "aria-label": "Bad answer", "data-action": "rate", "data-rating": "bad" }),
      );
      if (message.can_regenerate) tools.appendChild(button("Try again", { class: "regenerate", "data-action": "regenerate" }));
    }
    // Provenance hook (static/chat/provenance.js): what this answer saved to memory, and what it was sent.
    if (!isUser && window.ocProvenance) li.append(...window.ocProvenance.answerParts(message, thread));
    li.appendChild(tools);
    // Provenance hook: what the versions this one replaced saved to memory (keep / forget).
    if (window.ocProvenance) li.append(...window.ocProvenance.leftParts(message, thread));
    if (beingEdited) {
      // The live edit box is kept by the morph (see `preserve`); this placeholder only marks where it goes.
      li.appendChild(node("div", { class: "edit-box", id: "edit-box-" + message.id }));
    }
    return li;
  }

  // The files the owner attached: images as thumbnails, documents as a named chip; both download (owner only).
  function messageFiles(files) {
    const list = node("ul", { class: "msg-files", "aria-label": "Attached files" });
    for (const f of files) {
      const label = f.name + " (" + fileSize(f.size) + ")";
      const link = node("a", { href: f.url, download: f.name, title: "Download " + label, class: f.is_image ? "file-thumb" : "file-chip" });
      if (f.is_image) link.appendChild(node("img", { src: f.url, alt: f.name, loading: "lazy" }));
      else link.append(node("span", { class: "file-kind", "aria-hidden": "true", text: fileKind(f) }), node("span", { class: "file-name", text: f.name }), node("span", { class: "file-size", text: fileSize(f.size) }));
      list.appendChild(node("li", {}, [link]));
    }
    return list;
  }

  // A document's kind as a short badge: PDF, CSV, JSON, MD, TXT.
  function fileKind(f) {
    const kinds = { "application/pdf": "PDF", "text/csv": "CSV", "application/json": "JSON", "text/markdown": "MD" };
    return kinds[f.media_type] || "TXT";
  }

  function fileSize(bytes) {
    if (bytes >= 1000 * 1000) return (bytes / (1000 * 1000)).toFixed(1) + " MB";
    return Math.max(1, Math.round(bytes / 1000)) + " KB";
  }

  function markerItem(marker) {
    const words = marker.kind === "context_cleared" ? "Context cleared: the agent starts fresh from here"
      : marker.kind === "compacted" ? "Older messages summarized: the agent keeps a summary of what came before"
      : "The agent's context changed here";
    return node("li", { class: "marker", id: "marker-" + marker.id, role: "separator" }, [
      node("span", { text: words }), stamp(marker.created_at),
    ]);
  }

  function streamingItem() {
    const li = node("li", { class: "msg assistant streaming", id: "run-" + live.id, "data-run-id": live.id, "aria-busy": "true" });
    li.appendChild(node("div", { class: "msg-head" }, [who("assistant")]));
    li.appendChild(node("span", { class: "visually-hidden", text: "Answer being written:" }));
    let tail = live.text.slice(live.htmlText.length);
    // The rendered prefix dropped its trailing blank; keep the space between it and the plain tail.
    if (tail && /\s$/.test(live.htmlText) && !/^\s/.test(tail)) tail = " " + tail;
    const body = answerBody(live.html, tail);
    const last = body.lastElementChild;
    const caretHome = last && (last.tagName === "P" || last.tagName === "LI") ? last : body;
    caretHome.appendChild(node("span", { class: "caret", "aria-hidden": "true" }));
    li.appendChild(body);
    const steps = stepsDisclosure({ ...live, duration_ms: null }, { live: true });
    li.appendChild(steps || node("p", { class: "steps flat", text: live.state === "stopping" ? "Stopping…" : "" }));
    // Approvals hook: a card per tool call that waits for the owner's decision.
    if (window.ocApprovals) li.append(...window.ocApprovals.cards(live));
    return li;
  }

  function buildThread() {
    const ol = node("ol", { id: "thread", class: "thread", "aria-describedby": "thread-help" });
    const markers = {};
    for (const marker of thread.markers || []) (markers[marker.after_message_id ?? "top"] ||= []).push(marker);
    for (const marker of markers.top || []) ol.appendChild(markerItem(marker));
    for (const message of thread.messages) {
      ol.appendChild(messageItem(message));
      for (const marker of markers[message.id] || []) ol.appendChild(markerItem(marker));
    }
    if (live) ol.appendChild(streamingItem());
    return ol;
  }

  // Morph callbacks: keep what the owner is doing (an open disclosure, the edit box they type in).
  const preserve = {
    beforeNodeMorphed(oldNode) { return !(oldNode.classList && oldNode.classList.contains("edit-box") && oldNode.dataset.live); },
    beforeNodeRemoved(oldNode) { return !(oldNode.classList && oldNode.classList.contains("edit-box") && oldNode.dataset.live && editing); },
    // A disclosure the owner opened or closed keeps their choice; others follow the page (open while working).
    beforeAttributeUpdated(name, element) {
      return !(name === "open" && element.tagName === "DETAILS" && toggledByOwner.has(disclosureKey(element)));
    },
  };

  function disclosureKey(details) {
    if (details.dataset.run) return "run:" + details.dataset.run;
    if (details.dataset.step) return "step:" + details.dataset.step + (details.classList.contains("step-full") ? ":full" : "");
    return "";
  }

  function render() {
    // The owner moved the view up since we last followed (a scroll event may not have fired yet): stop following.
    if (stick && el.scroller.scrollTop + 4 < followedTop) stick = false;
    const wasAtBottom = stick;
    window.Idiomorph.morph(el.thread, buildThread(), { morphStyle: "outerHTML", callbacks: preserve });
    el.thread = document.getElementById("thread");
    el.empty.hidden = thread.messages.length > 0 || !!live;
    el.stop.hidden = !live;
    el.send.disabled = !!live;
    // While a card waits, the composer says so: a new message is refused until the owner decides or stops.
    const waiting = !!(window.ocApprovals && window.ocApprovals.waiting(live));
    el.composer.placeholder = waiting ? "A tool call is waiting for your decision above: approve or deny it, or press Stop." : composerPlaceholder;
    el.form.classList.toggle("awaiting-approval", waiting);
    if (wasAtBottom) scrollToLatest();
    updateJump();
    observeHeights();
  }

  // --- scrolling --------------------------------------------------------------------------------------------

  function distanceFromBottom() { return el.scroller.scrollHeight - el.scroller.scrollTop - el.scroller.clientHeight; }

  function scrollToLatest() {
    el.scroller.scrollTop = el.scroller.scrollHeight;
    followedTop = el.scroller.scrollTop;
    stick = true;
  }

  function updateJump() { el.jump.hidden = stick || distanceFromBottom() < 40; }

  el.scroller.addEventListener("scroll", () => {
    stick = distanceFromBottom() < 40;
    if (stick) followedTop = el.scroller.scrollTop;
    updateJump();
  }, { passive: true });
  el.scroller.addEventListener("wheel", (event) => { if (event.deltaY < 0) { stick = false; updateJump(); } }, { passive: true });
  el.jump.addEventListener("click", () => { scrollToLatest(); updateJump(); el.composer.focus(); });
  // Heights also change between renders (a notice above the composer comes or goes, a highlighted code block or a
  // thumbnail settles): a page that follows the newest text keeps following it then too.
  const followResizes = "ResizeObserver" in window
    ? new ResizeObserver(() => { if (stick) scrollToLatest(); updateJump(); })
    : null;
  let observedThread = null;
  function observeHeights() {
    if (!followResizes || observedThread === el.thread) return;
    if (observedThread) followResizes.unobserve(observedThread);
    followResizes.observe(el.thread);
    observedThread = el.thread;
  }
  if (followResizes) followResizes.observe(el.scroller);
  observeHeights();

  // --- the snapshot -----------------------------------------------------------------------------------------

  function adopt(snapshot) {
    thread = snapshot;
    const run = snapshot.active_run;
    // The snapshot's epoch is the one its seq counts in; a seq of another epoch (Redis restarted empty since the
    // page counted) says nothing about this one, so the page starts again from the snapshot.
    if (snapshot.hub_epoch) hubEpoch = snapshot.hub_epoch;
    if (run) {
      const same = live && live.id === run.id && live.epoch === snapshot.hub_epoch && live.seq >= run.seq;
      live = same ? { ...live, state: run.state, steps: run.steps, approvals: run.approvals || [] }
        : { id: run.id, seq: run.seq, epoch: snapshot.hub_epoch, text: run.partial_text || "", html: run.partial_html || "", htmlText: run.partial_text || "", state: run.state, steps: run.steps, approvals: run.approvals || [] };
    } else {
      live = null;
      clearNotice("run_in_progress");
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

  function newLive(run) {
    return { id: run.id, seq: Math.max(run.seq || 0, 0), epoch: hubEpoch, text: "", html: "", htmlText: "", state: run.state, steps: [], approvals: [] };
  }

  // While an answer streams, ask the server for the text so far rendered like the final answer (at most one
  // request in flight, a few per second); the deltas that arrive meanwhile show as plain text after it.
  function scheduleRender() {
    if (renderTimer || renderInFlight) return;
    renderTimer = setTimeout(async () => {
      renderTimer = null;
      if (!live) return;
      const runId = live.id;
      renderInFlight = true;
      try {
        const run = await api("GET", "runs/" + runId + "/");
        if (live && live.id === runId && run.partial_text && live.text.startsWith(run.partial_text)
          && run.partial_text.length >= live.htmlText.length) {
          live.html = run.partial_html;
          live.htmlText = run.partial_text;
          render();
        }
      } catch (e) { /* the next delta asks again */ }
      renderInFlight = false;
      if (live && live.id === runId && live.htmlText.length < live.text.length) scheduleRender();
    }, RENDER_EVERY_MS);
  }

  // --- attachments (docs/chat.md#files) -------------------------------------------------------------------
  // Each file uploads as soon as it is added (POST /api/files/); the message then names the uploaded ids. A chip
  // shows its name, size and a remove button, or why the server refused it.

  let pending = []; // {key, name, size, state: uploading|ready|error, id, error}

  function renderAttachments() {
    el.attachments.replaceChildren();
    el.attachments.hidden = !pending.length;
    for (const p of pending) {
      const chip = node("li", { class: "attachment " + p.state, "data-key": p.key }, [
        node("span", { class: "file-name", text: p.name }),
        node("span", { class: "file-size", text: p.state === "uploading" ? "uploading…" : fileSize(p.size) }),
        button("×", { class: "remove-file", "aria-label": "Remove " + p.name, "data-key": p.key }),
        p.error ? node("span", { class: "file-error", role: "alert", text: p.error }) : null,
      ]);
      el.attachments.appendChild(chip);
    }
    // What the answering model gets instead of a file it does not take (server's words, config.file_forms).
    const changed = pending.filter((p) => p.state === "ready" && config.file_forms[p.media_type]);
    el.attachmentsNote.textContent = changed.length
      ? "Not every file goes to " + config.agent_model + " as itself: " + changed.map((p) => p.name + " " + config.file_forms[p.media_type]).join("; ") + "."
      : "";
    el.attachmentsNote.hidden = !changed.length;
  }

  async function uploadOne(entry, file) {
    const form = new FormData();
    form.append("file", file, entry.name);
    try {
      const response = await fetch("/api/files/", {
        method: "POST",
        credentials: "same-origin",
        headers: { "X-CSRFToken": csrfToken(), Accept: "application/json", "Idempotency-Key": entry.key },
        body: form,
      });
      let data = {};
      try { data = await response.json(); } catch (e) { data = {}; }
      if (!response.ok) throw new Error(data.message || (response.status === 413 ? entry.name + " is too large." : "Could not attach " + entry.name + "."));
      entry.state = "ready"; entry.id = data.id; entry.size = data.size; entry.name = data.name; entry.media_type = data.media_type;
    } catch (error) {
      entry.state = "error"; entry.error = error.message;
    }
    renderAttachments();
  }

  function addFiles(files) {
    for (const file of files) {
      if (pending.length >= config.file_max_count) { showRefusal({ code: "too_many_files", message: "A message may carry at most " + config.file_max_count + " files." }); break; }
      const name = file.name || "pasted-" + pending.length + (file.type === "image/png" ? ".png" : "");
      const entry = { key: newClientId(), name, size: file.size, state: "uploading", id: null, error: "", media_type: "" };
      pending.push(entry);
      if (file.size > config.file_max_bytes) {
        entry.state = "error";
        entry.error = name + " is " + fileSize(file.size) + "; a file may be at most " + fileSize(config.file_max_bytes) + ".";
      } else {
        uploadOne(entry, file);
      }
    }
    renderAttachments();
  }

  el.attach.addEventListener("click", () => el.attachInput.click());
  el.attachInput.addEventListener("change", () => { addFiles(Array.from(el.attachInput.files)); el.attachInput.value = ""; });
  el.attachments.addEventListener("click", (event) => {
    const target = event.target.closest("button.remove-file");
    if (!target) return;
    pending = pending.filter((p) => p.key !== target.dataset.key);
    renderAttachments();
    if (!pending.some((p) => p.state === "error")) clearNotice("files_refused");
    el.composer.focus();
  });
  el.composer.addEventListener("paste", (event) => {
    const files = Array.from(event.clipboardData ? event.clipboardData.files : []);
    if (!files.length) return; // plain text pastes as usual
    event.preventDefault();
    addFiles(files);
  });
  el.form.addEventListener("dragover", (event) => {
    if (!event.dataTransfer || !Array.from(event.dataTransfer.types).includes("Files")) return;
    event.preventDefault();
    el.form.classList.add("dropping");
  });
  el.form.addEventListener("dragleave", () => el.form.classList.remove("dropping"));
  el.form.addEventListener("drop", (event) => {
    el.form.classList.remove("dropping");
    if (!event.dataTransfer || !event.dataTransfer.files.length) return;
    event.preventDefault();
    addFiles(Array.from(event.dataTransfer.files));
  });

  // --- actions ---------------------------------------------------------------------------------------------

  function newClientId() {
    return (crypto.randomUUID ? crypto.randomUUID() : String(Date.now()) + Math.random().toString(16).slice(2));
  }

  function messageById(id) { return thread.messages.find((m) => String(m.id) === String(id)); }

  async function send(text) {
    clearNotice();
    if (pending.some((p) => p.state === "uploading")) { showRefusal({ code: "files_uploading", message: "Wait for the files to finish uploading." }); return; }
    if (pending.some((p) => p.state === "error")) { showRefusal({ code: "files_refused", message: "Remove the files that could not be attached, then send." }); return; }
    try {
      const body = { text, client_message_id: newClientId(), expected_revision: null };
      if (pending.length) body.file_ids = pending.map((p) => p.id);
      const result = await api("POST", "messages/", body);
      el.composer.value = "";
      pending = [];
      renderAttachments();
      if (!live || live.id !== result.run.id) live = newLive(result.run);
      stick = true;
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
      live = newLive(run);
      stick = true;
      await refetch();
    } catch (error) { showRefusal(error); }
  }

  async function rate(message, rating) {
    try { await api("POST", "messages/" + message.id + "/feedback/", { rating }); announce(rating ? "Rated " + rating + "." : "Rating removed."); await refetch(); }
    catch (error) { showRefusal(error); }
  }

  async function copy(text, what) {
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
    announce(what + " copied.");
  }

  function startEdit(li, message) {
    if (editing) return;
    editing = message.id;
    render();
    const box = document.getElementById("edit-box-" + message.id);
    box.dataset.live = "1";
    const id = "edit-" + message.id;
    box.appendChild(node("label", { for: id, text: "Edit your message" }));
    const area = node("textarea", { id, rows: "3" });
    area.value = message.text;
    box.appendChild(area);
    box.appendChild(node("p", { class: "meta", text: "Enter sends, Shift+Enter adds a line, Esc cancels. The agent forgets everything after this message." + (message.files && message.files.length ? " Its files stay with it." : "") }));
    const cancel = () => {
      editing = null;
      box.remove();
      render();
      document.querySelector("#msg-" + message.id + " .edit")?.focus();
    };
    const save = async () => {
      const text = area.value;
      if (!text.trim()) return;
      clearNotice();
      try {
        const result = await api("POST", "messages/" + message.id + "/edit/", { text, expected_revision: thread.revision, client_message_id: newClientId() });
        editing = null;
        box.remove();
        live = newLive(result.run);
        await refetch();
        el.composer.focus();
      } catch (error) { showRefusal(error); }
    };
    const saveButton = button("Save and send", { class: "edit-save primary" });
    const cancelButton = button("Cancel", { class: "edit-cancel" });
    saveButton.addEventListener("click", save);
    cancelButton.addEventListener("click", cancel);
    box.appendChild(node("div", { class: "msg-tools" }, [saveButton, cancelButton]));
    area.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && !event.shiftKey && !event.isComposing) { event.preventDefault(); save(); }
      else if (event.key === "Escape") { event.preventDefault(); event.stopPropagation(); cancel(); }
    });
    area.focus();
  }

  // One listener for every button in the thread: it reads the current snapshot, never a closure of an old one.
  document.getElementById("thread-scroll").addEventListener("click", (event) => {
    const summary = event.target.closest("summary");
    if (summary && summary.parentElement.tagName === "DETAILS") toggledByOwner.add(disclosureKey(summary.parentElement));
    const target = event.target.closest("button[data-action]");
    if (!target) return;
    if (window.ocApprovals && window.ocApprovals.handle(target)) return;
    const li = target.closest("li.msg");
    const message = li ? messageById(li.dataset.id) : null;
    const action = target.dataset.action;
    if (action === "copy-code") {
      copy(target.closest(".code-block").querySelector("pre").textContent, "Code");
    } else if (!message) {
      return;
    } else if (action === "switch") {
      switchTo(target.dataset.target);
    } else if (action === "edit") {
      startEdit(li, message);
    } else if (action === "copy-answer") {
      copy(message.text, "Answer");
    } else if (action === "rate") {
      const rating = target.dataset.rating;
      rate(message, message.rating === rating ? null : rating);
    } else if (action === "regenerate") {
      regenerate(message);
    }
  });

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
    if (event.target.closest && event.target.closest(".approval-card")) return; // Esc in a reason box is no Stop
    if (event.key === "Escape" && live && !editing) { event.preventDefault(); stop(); }
  });
  el.clear.addEventListener("click", async () => {
    const ok = await window.ocConfirm({
      title: "Clear the whole chat?",
      body: "Every message and answer goes, and the agents forget this conversation. Memory is kept.",
      action: "Clear chat",
    });
    if (!ok) return;
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
    // Counted in another epoch than the page's seq: the snapshot asked for on the epoch change sets it again.
    if (event.hub_epoch && live.epoch !== event.hub_epoch) { refetchSoon(400); return; }
    if (event.seq <= live.seq) return; // a duplicate, or already in the snapshot
    if (event.seq > live.seq + 1) { refetchSoon(400); return; } // a gap (missed text): the snapshot has it
    live.seq = event.seq;
    if (event.type === "run.delta") {
      live.text += event.text;
      render();
      scheduleRender();
    } else if (event.type === "run.step") {
      const step = live.steps.find((s) => s.id === event.step_id);
      // The step's line names what runs ("Calling get_time on time…") and then how it ended.
      if (step) Object.assign(step, { state: event.phase, is_error: event.is_error, label: event.label || step.label });
      else live.steps.push({ id: event.step_id, name: event.name, label: event.label || event.name, state: event.phase, is_error: event.is_error, arguments: {}, summary: "", result: "" });
      if (event.phase === "finished") refetchSoon(100); // the step's arguments and result come with the snapshot
      render();
    } else if (event.type === "run.approval") {
      refetchSoon(50); // a call waits for the owner's decision, or was decided: the card comes with the snapshot
    } else if (event.type === "run.stopping") {
      live.state = "stopping";
      render();
    } else if (event.type === "run.finished" || event.type === "run.failed") {
      announce(event.status === "stopped" ? "Answer stopped." : event.type === "run.failed" ? "The answer could not finish." : "Answer finished.");
      clearNotice("run_in_progress");
      refetch();
    }
  }

  // Metadata only: the panels refetch through their own handlers when the owner opens them.
  function markPanelUpdated(type) {
    const links = type === "context.updated" ? [document.getElementById("context-link")] : document.querySelectorAll(".memory-link");
    for (const link of links) {
      if (link && !link.dataset.updated) { link.dataset.updated = "1"; link.appendChild(node("span", { class: "dot", text: " (updated)" })); }
    }
  }

  function connect(attempt) {
    const scheme = location.protocol === "https:" ? "wss://" : "ws://";
    const socket = new WebSocket(scheme + location.host + config.socket);
    socket.addEventListener("open", () => {
      attempt = 0;
      clearTimeout(reconnectTimer);
      el.connection.hidden = true;
    });
    socket.addEventListener("message", (message) => {
      let event;
      try { event = JSON.parse(message.data); } catch (e) { return; }
      if (event.hub_epoch && event.hub_epoch !== hubEpoch) {
        // The hub restarted: its counters did too, so nothing before counts. `adopt` takes the new epoch and
        // resets the run's seq from the snapshot.
        hubEpoch = event.hub_epoch;
        refetch();
        if (event.type === "hello") return;
      }
      if (event.type === "hello") { refetch(); return; } // events may have been missed while connecting
      if (event.type && event.type.startsWith("run.")) onRunEvent(event);
      else if (event.type === "chat.updated" && event.revision !== thread.revision) refetchSoon(50);
      else if (event.type === "context.updated" || event.type === "memory.updated") markPanelUpdated(event.type);
    });
    socket.addEventListener("close", () => {
      // A short blip is not worth a banner; a drop that lasts is.
      clearTimeout(reconnectTimer);
      reconnectTimer = setTimeout(() => { el.connection.hidden = false; }, 1200);
      setTimeout(() => connect(attempt + 1), Math.min(5000, 300 * 2 ** Math.min(attempt, 4)));
    });
    window.chatSocket = socket;
  }

  // Provenance hook: the helpers static/chat/provenance.js acts through (it never keeps a snapshot of its own).
  if (window.ocProvenance) window.ocProvenance.attach({ api, refetch, render, announce, showRefusal, config });
  if (window.ocApprovals) window.ocApprovals.attach({ refetch, render, announce, showRefusal, csrfToken });
  adopt(thread);
  scrollToLatest();
  el.composer.focus();
  connect(0);
})();
