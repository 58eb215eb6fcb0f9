// Provenance in the chat: under an answer, what it saved to memory (with Undo) and "What this answer was sent";
// beside a message the owner edited or tried again, what the version left behind saved (keep / forget).
//
// chat.js owns the thread and re-renders it from the snapshot (Idiomorph); this file only builds parts of an
// answer from the snapshot's `memory` field and from the request view it fetches when the owner opens it, so every
// render rebuilds the same nodes. chat.js calls `attach` once with its helpers, and the two builders per message.
(function () {
  "use strict";

  let chat = null; // { api, refetch, render, announce, showRefusal, config }
  let linkedRun = null; // the run id a link to #run-<id> points at
  const requestViews = new Map(); // run id -> the request view, or { loading } / { error }
  const openSent = new Set(); // run ids whose "What this answer was sent" the owner has open
  const openSaved = new Set(); // run ids whose "Saved N memories" list is open
  const KEPT_KEY = "oc-kept-branches";

  function kept() {
    try { return new Set(JSON.parse(localStorage.getItem(KEPT_KEY) || "[]")); } catch (e) { return new Set(); }
  }
  function keep(messageId) {
    const ids = kept();
    ids.add(String(messageId));
    try { localStorage.setItem(KEPT_KEY, JSON.stringify([...ids].slice(-500))); } catch (e) { /* private mode */ }
  }

  function fileSize(bytes) {
    if (bytes < 1024) return bytes + " B";
    if (bytes < 1024 * 1024) return Math.round(bytes / 1024) + " KB";
    return (bytes / (1024 * 1024)).toFixed(1) + " MB";
  }

  const node = window.ocDom.node;

  function plural(n, one, many) { return n + " " + (n === 1 ? one : many); }
  function memories(n) { return plural(n, "memory", "memories"); }

  const relative = new Intl.RelativeTimeFormat(undefined, { numeric: "auto" });
  function ago(iso) {
    const seconds = Math.round((new Date(iso).getTime() - Date.now()) / 1000);
    const abs = Math.abs(seconds);
    if (abs < 45) return "just now";
    if (abs < 3600) return relative.format(Math.round(seconds / 60), "minute");
    if (abs < 86400) return relative.format(Math.round(seconds / 3600), "hour");
    return relative.format(Math.round(seconds / 86400), "day");
  }

  function quote(text, limit) {
    let flat = String(text || "").replace(/\s+/g, " ").trim();
    const cut = flat.endsWith("…") || flat.length > limit;
    flat = flat.replace(/…$/, "").slice(0, limit).trimEnd();
    return "“" + flat + (cut ? "…" : "") + "”";
  }

  function memoryBase(nodeId) { return "/workflows/" + chat.config.workflow_id + "/memory/" + encodeURIComponent(nodeId) + "/"; }

  function itemLabel(item) { return item.title || item.content || "A memory"; }

  // "saved by Lead while answering “my cat is Tom…”, 2 minutes ago"
  function provenanceWords(item) {
    const verb = item.operation === "remember" ? "saved" : "changed";
    let words = verb + " by " + (item.agent_name || "the agent");
    if (item.prompt_excerpt) words += " while answering " + quote(item.prompt_excerpt, 40);
    return words + ", " + ago(item.created_at);
  }

  // --- under an answer: Saved N memories, Undo ------------------------------------------------------------------

  function savedMarker(message, memory) {
    const run = message.run;
    const mark = run && memory.runs[String(run.id)];
    if (!mark) return null;
    const undone = mark.undone || {};
    const took = (undone.forgotten || 0) + (undone.restored || 0);
    const created = mark.saved || 0;
    const changed = mark.changed || 0;
    let words = [];
    if (created) words.push("Saved " + memories(created));
    if (changed) words.push((created ? "changed " : "Changed ") + memories(changed));
    if (!words.length && undone.forgotten) words.push("Saved " + memories(undone.forgotten));
    if (!words.length && mark.branch_forgotten) words.push("Saved " + memories(mark.branch_forgotten));
    let title = words.join(", ");
    if (took && !mark.can_undo) title += " · undone";
    else if (mark.branch_forgotten && !mark.kept_created && !changed) title += " · forgotten";
    const details = node("details", { class: "mem-saved", id: "mem-saved-" + run.id, "data-mem-run": run.id, open: openSaved.has(String(run.id)) || null }, [
      node("summary", {}, [node("span", { class: "mem-icon", "aria-hidden": "true", text: "◆" }), node("span", { class: "mem-title", text: title })]),
    ]);
    const list = node("ul", { class: "mem-items" });
    for (const item of mark.items) {
      const link = node("a", { href: memoryBase(item.node_id) + "items/" + item.item_id + "/history/", text: item.kept ? "History" : "History (forgotten)" });
      list.appendChild(node("li", { class: item.kept ? "" : "gone" }, [
        node("span", { class: "mem-item-text", text: itemLabel(item) }),
        node("span", { class: "meta", text: " — " + provenanceWords(item) + (item.kept ? "" : ". Forgotten since.") + " " }),
        link,
      ]));
    }
    if (mark.items.length) details.appendChild(list);
    const said = [];
    if (undone.forgotten) said.push("forgot " + plural(undone.forgotten, "memory it saved", "memories it saved"));
    if (undone.restored) said.push("put back " + plural(undone.restored, "memory it changed", "memories it changed") + " as it was before");
    if (said.length) details.appendChild(node("p", { class: "mem-undone", text: "You undid this answer's memory: " + said.join(" and ") + ". Nothing else was touched." }));
    if (mark.branch_forgotten) details.appendChild(node("p", { class: "mem-undone", text: "Forgotten with the version it was on: " + memories(mark.branch_forgotten) + "." }));
    const actions = node("div", { class: "mem-actions" });
    if (mark.can_undo) {
      actions.appendChild(node("button", { type: "button", class: "mem-undo", "data-prov": "undo", "data-run": run.id, text: "Undo",
        "aria-label": "Undo what this answer saved to memory" }));
    }
    const nodeId = (mark.items[0] && mark.items[0].node_id) || (chat.config.memory_nodes || [])[0];
    if (nodeId) {
      actions.appendChild(node("a", { href: memoryBase(nodeId) + "history/?chat_run=" + run.id, class: "mem-see", text: "See in the Memory panel" }));
    }
    details.appendChild(actions);
    return node("div", { class: "mem-mark" }, [details]);
  }

  async function undo(runId) {
    try {
      const result = await chat.api("POST", "runs/" + runId + "/memory/undo/");
      const parts = [];
      if (result.forgotten.length) parts.push("forgot " + memories(result.forgotten.length));
      if (result.restored.length) parts.push("put " + memories(result.restored.length) + " back as before");
      if (result.already_gone.length) parts.push(plural(result.already_gone.length, "memory was", "memories were") + " already forgotten");
      const words = parts.length ? "Undone: " + parts.join(", ") + "." : "Nothing to undo.";
      openSaved.add(String(runId));
      chat.announce(words);
      await chat.refetch();
    } catch (error) { chat.showRefusal(error); }
  }

  // --- beside a message with versions: what the left versions saved ------------------------------------------

  function leftNotes(message, memory) {
    const versions = (memory.left || {})[String(message.id)];
    if (!versions) return null;
    const hidden = kept();
    const box = node("div", { class: "mem-left" });
    for (const left of versions) {
      const one = versions.length === 1;
      const what = left.role === "user"
        ? (one ? "The answer to your earlier version of this message" : "The answer to version " + left.version + " of this message")
        : (one ? "The earlier answer" : "Answer " + left.version);
      const them = left.kept === 1 ? "it" : "them";
      if (left.kept) {
        if (hidden.has(String(left.message_id))) continue;
        const names = left.items.slice(0, 3).map((item) => quote(itemLabel(item), 40)).join(", ") + (left.items.length > 3 ? ", …" : "");
        box.appendChild(node("p", { class: "mem-left-note", "data-left": left.message_id }, [
          node("span", { text: what + " saved " + memories(left.kept) + " the agent still remembers: " + names + ". " }),
          node("span", { class: "mem-left-actions" }, [
            node("button", { type: "button", "data-prov": "keep", "data-left": left.message_id, text: "Keep " + them, "aria-label": "Keep what the earlier version saved" }),
            node("button", { type: "button", class: "danger", "data-prov": "forget-branch", "data-left": left.message_id, text: "Forget " + them, "aria-label": "Forget what the earlier version saved" }),
          ]),
        ]));
      } else if (left.forgotten) {
        box.appendChild(node("p", { class: "mem-left-note done", text: "You forgot the " + memories(left.forgotten) + " " + what.charAt(0).toLowerCase() + what.slice(1) + " saved." }));
      }
    }
    return box.childElementCount ? box : null;
  }

  async function forgetBranch(messageId) {
    try {
      const result = await chat.api("POST", "messages/" + messageId + "/branch-memory/");
      chat.announce("Forgot " + memories(result.forgotten.length) + " the earlier version saved.");
      await chat.refetch();
    } catch (error) { chat.showRefusal(error); }
  }

  // --- What this answer was sent -----------------------------------------------------------------------------

  const number = new Intl.NumberFormat();
  function tokens(n) { return number.format(n || 0); }
  function money(value) {
    if (value === null || value === undefined || value === "") return "unknown (no price known for this model)";
    const n = Number(value);
    if (n === 0) return "$0";
    return "$" + (n < 0.0001 ? n.toPrecision(2) : n.toFixed(4));
  }

  function row(label, value) {
    return node("div", { class: "sent-row" }, [node("dt", { text: label }), node("dd", {}, Array.isArray(value) ? value : [value])]);
  }

  function sentBody(view) {
    const box = node("div", { class: "sent-body" });
    const t = view.tokens || {};
    const steps = view.steps || [];
    const dl = node("dl", { class: "sent-facts" });
    if (view.model) dl.appendChild(row("Model", (view.provider ? view.provider + " · " : "") + view.model));
    dl.appendChild(row(steps.length > 1 ? "Tokens (all requests)" : "Tokens", [
      node("span", { class: "sent-tokens", text: tokens(t.input_tokens) + " in" }),
      " (" + tokens(t.cached_input_tokens) + " of them read from the provider's cache) · ",
      node("span", { text: tokens(t.output_tokens) + " out" }),
      t.reasoning_tokens ? " · " + tokens(t.reasoning_tokens) + " reasoning" : "",
    ]));
    dl.appendChild(row("Cost", money(view.cost)));
    dl.appendChild(row("Requests", plural(steps.length, "request to the model", "requests to the model") + (steps.length > 1 ? " (one more after each tool result)" : "")));
    const first = (steps[0] && steps[0].request) || {};
    if (steps.length) {
      dl.appendChild(row("Conversation carried", plural(first.messages || 0, "message", "messages") + " in the first request, "
        + plural(first.stored_messages || 0, "of them", "of them") + " from the stored conversation"
        + (first.compaction_summary ? ", starting with a summary of older turns" : ", no summary of older turns") + "."));
      // Attached files the request carried: name, type and size (the bytes are never part of this view).
      const files = first.attachments || [];
      dl.appendChild(row("Files", files.length
        ? files.map((f) => f.name + " (" + f.media_type + ", " + fileSize(f.size) + ")").join("; ") + "."
        : "None."));
    }
    dl.appendChild(row("Your notes", view.notes_carried ? plural(view.notes_carried, "note", "notes") + " from you went with it (ratings, memory edits, version changes)." : "None."));
    const changed = view.changed_since_previous;
    if (changed) {
      const parts = [changed.messages >= 0 ? "the conversation grew by " + plural(changed.messages, "message", "messages") : "the conversation shrank by " + plural(-changed.messages, "message", "messages")];
      if (changed.compaction_summary_now) parts.push("older turns now summarized");
      if (changed.tools_added && changed.tools_added.length) parts.push("tools added: " + changed.tools_added.join(", "));
      if (changed.tools_removed && changed.tools_removed.length) parts.push("tools removed: " + changed.tools_removed.join(", "));
      const sentence = parts.join("; ");
      dl.appendChild(row("Since the previous answer", sentence.charAt(0).toUpperCase() + sentence.slice(1) + "."));
    } else {
      dl.appendChild(row("Since the previous answer", "This was the first answer of the conversation."));
    }
    const next = view.next_turn;
    if (next) {
      const priced = next.cost !== null && next.cost !== undefined && Number(next.cost) > 0;
      const cost = next.free ? "nothing (the offline model is free)" : priced ? "about " + money(next.cost) : "an unknown amount (no price known for this model)";
      const cached = priced && next.cost_if_cached !== null && next.cost_if_cached !== undefined ? " (" + money(next.cost_if_cached) + " if the provider's cache still holds it)" : "";
      dl.appendChild(row("Your next message", [node("span", { class: "sent-next", text: "will cost " + cost + cached + " to send, for about " + tokens(next.input_tokens_estimate) + " tokens of stored conversation. " }),
        node("span", { class: "meta", text: "An estimate: tokens are counted at 4 bytes each, and the answer's own length is not included." })]));
    }
    box.appendChild(dl);

    const recalled = view.recalled_memories || [];
    box.appendChild(node("h4", { text: "Memories recalled" }));
    if (recalled.length) {
      box.appendChild(node("ul", { class: "sent-recalled" }, recalled.map((m) => node("li", {}, [
        node("span", { text: m.title ? m.title + ": " : "" }),
        node("span", { class: "sent-memory", text: m.content }),
        node("span", { class: "meta", text: " — match " + Number(m.score).toFixed(2) }),
      ]))));
    } else {
      box.appendChild(node("p", { class: "meta", text: "None: the agent did not search its memory for this answer." }));
    }

    if (steps.length > 1) {
      const table = node("table", { class: "sent-steps" }, [
        node("thead", {}, [node("tr", {}, ["Request", "Messages", "Tokens in", "Cached", "Out", "Cost"].map((h) => node("th", { scope: "col", text: h })))]),
        node("tbody", {}, steps.map((s, i) => node("tr", {}, [
          node("td", { text: String(i + 1) }),
          node("td", { text: String((s.request || {}).messages || 0) }),
          node("td", { text: tokens(s.usage.input_tokens) }),
          node("td", { text: tokens(s.usage.cached_input_tokens) }),
          node("td", { text: tokens(s.usage.output_tokens) }),
          node("td", { text: s.cost === null || s.cost === undefined ? "unknown" : Number(s.cost) === 0 ? "$0" : money(s.cost) }),
        ]))),
      ]);
      box.appendChild(node("div", { class: "sent-table-wrap" }, [table]));
    }

    const tools = view.tools || [];
    if (tools.length) {
      box.appendChild(node("details", { class: "sent-prompt sent-tools-wrap" }, [
        node("summary", { text: "Tools offered: " + tools.map((tool) => tool.name).join(", ") }),
        node("ul", { class: "sent-tools" }, tools.map((tool) => node("li", {}, [node("code", { text: tool.name }), tool.description ? " — " + tool.description : ""]))),
      ]));
    } else {
      box.appendChild(node("p", { class: "meta", text: "No tools were offered." }));
    }
    if (view.system_prompt) {
      box.appendChild(node("details", { class: "sent-prompt" }, [
        node("summary", { text: "Instructions (system prompt)" }),
        node("pre", { text: view.system_prompt }),
      ]));
    }
    return box;
  }

  function sentDisclosure(message) {
    const run = message.run;
    if (!run) return null;
    const key = String(run.id);
    const isOpen = openSent.has(key);
    const details = node("details", { class: "sent", id: "sent-" + run.id, "data-sent-run": run.id, open: isOpen || null }, [
      node("summary", { text: "What this answer was sent" }),
    ]);
    if (isOpen) {
      const view = requestViews.get(key);
      if (!view || view.loading) details.appendChild(node("p", { class: "meta", text: "Loading…" }));
      else if (view.error) details.appendChild(node("p", { class: "meta", text: "Could not load it: " + view.error }));
      else if (!view.steps || !view.steps.length) details.appendChild(node("p", { class: "meta", text: "Nothing recorded: the model was not called for this answer, or its record was removed after the retention period." }));
      else details.appendChild(sentBody(view));
    }
    return details;
  }

  async function loadRequestView(runId) {
    const key = String(runId);
    const cached = requestViews.get(key);
    if (cached && !cached.error) return;
    requestViews.set(key, { loading: true });
    chat.render();
    try {
      requestViews.set(key, await chat.api("GET", "runs/" + runId + "/request/"));
    } catch (error) {
      requestViews.set(key, { error: error.message });
    }
    chat.render();
  }

  // --- wiring ------------------------------------------------------------------------------------------------

  document.addEventListener("toggle", (event) => {
    const details = event.target;
    if (!(details instanceof HTMLDetailsElement)) return;
    if (details.dataset.sentRun) {
      const key = details.dataset.sentRun;
      if (details.open === openSent.has(key)) return; // a re-render, not the owner
      if (details.open) { openSent.add(key); loadRequestView(key); } else { openSent.delete(key); }
    } else if (details.dataset.memRun) {
      if (details.open) openSaved.add(details.dataset.memRun); else openSaved.delete(details.dataset.memRun);
    }
  }, true);

  document.addEventListener("click", (event) => {
    const target = event.target.closest("button[data-prov]");
    if (!target || !chat) return;
    const action = target.dataset.prov;
    if (action === "undo") { target.disabled = true; undo(target.dataset.run); }
    else if (action === "forget-branch") { target.disabled = true; forgetBranch(target.dataset.left); }
    else if (action === "keep") { keep(target.dataset.left); chat.announce("Kept."); chat.render(); }
  });

  window.ocProvenance = {
    attach(helpers) {
      chat = helpers;
      // A link from the Memory history ("the answer in the chat") lands on that answer, after chat.js has
      // scrolled to the latest message.
      // The mark is part of what the builder returns, so a later re-render keeps it.
      linkedRun = /^#run-\d+$/.test(location.hash) ? location.hash.slice(5) : null;
      if (linkedRun) {
        setTimeout(() => {
          const target = document.getElementById("run-" + linkedRun);
          if (target) target.scrollIntoView({ block: "center" });
        }, 0);
      }
    },
    // Parts under an answer, in order: the memory marker, then the request disclosure.
    answerParts(message, thread) {
      if (!chat) return [];
      const memory = thread.memory || { runs: {}, left: {} };
      const linked = message.run && String(message.run.id) === linkedRun
        ? node("span", { class: "linked-here", role: "note", text: "The answer you came from" }) : null;
      return [linked, savedMarker(message, memory), sentDisclosure(message)].filter(Boolean);
    },
    // A note beside a message whose left versions saved memories.
    leftParts(message, thread) {
      if (!chat) return [];
      const box = leftNotes(message, thread.memory || { runs: {}, left: {} });
      return box ? [box] : [];
    },
  };
})();
