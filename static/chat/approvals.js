// Approval cards in the chat: a tool call that asks the owner first shows, under the answer in progress, which agent
// wants to call which tool on which server with which arguments, and Approve / Deny with an optional reason (one
// card per call). Under a finished answer, one line per decided call says who decided what, when.
//
// chat.js owns the thread and re-renders it from the snapshot (Idiomorph); this file only builds the cards from the
// run's `approvals` and sends a decision (POST /api/tool-approvals/<id>/decision/ with an Idempotency-Key per
// click). A reason being typed is kept here, so a re-render never loses it.
(function () {
  "use strict";

  let chat = null; // { refetch, announce, showRefusal }
  const reasons = new Map(); // approval id -> the reason typed so far
  const sending = new Set(); // approval ids whose decision is on its way
  const FOLD_CHARS = 160;
  const shortTime = new Intl.DateTimeFormat(undefined, { hour: "numeric", minute: "2-digit" });

  const node = window.ocDom.node;

  function parsed(text) {
    try { return { ok: true, value: JSON.parse(text) }; } catch (e) { return { ok: false, value: text }; }
  }

  // Long string values folded, so a card stays readable; the whole arguments are one click away.
  function folded(value) {
    if (typeof value === "string" && value.length > FOLD_CHARS) {
      return value.slice(0, FOLD_CHARS) + "… (" + (value.length - FOLD_CHARS) + " more characters)";
    }
    if (Array.isArray(value)) return value.map(folded);
    if (value && typeof value === "object") {
      const out = {};
      for (const [k, v] of Object.entries(value)) out[k] = folded(v);
      return out;
    }
    return value;
  }

  function argumentsBlock(approval) {
    const args = parsed(approval.arguments);
    const full = args.ok ? JSON.stringify(args.value, null, 2) : String(args.value);
    const shown = args.ok ? JSON.stringify(folded(args.value), null, 2) : full;
    const parts = [node("pre", { class: "approval-args", "aria-label": "Arguments", text: shown })];
    if (shown !== full) {
      parts.push(node("details", { class: "approval-full", "data-approval": approval.id }, [
        node("summary", { text: "All arguments" }),
        node("pre", { class: "approval-args", text: full }),
      ]));
    }
    return parts;
  }

  function who(approval) {
    return (approval.teammate ? "Teammate " : "") + approval.agent_name;
  }

  function card(approval) {
    const busy = sending.has(approval.id);
    const reasonId = "approval-reason-" + approval.id;
    return node("section", { class: "approval-card", "data-approval": approval.id, "aria-label": "Approval needed: " + approval.tool }, [
      node("p", { class: "approval-title" }, [
        node("strong", { text: who(approval) }),
        " wants to run ",
        node("code", { class: "approval-tool", text: approval.tool }),
        approval.server ? " on " : "",
        approval.server ? node("span", { class: "approval-server", text: approval.server }) : null,
      ]),
      node("p", { class: "approval-help meta", text: "It waits for your decision and runs only if you approve." }),
      ...argumentsBlock(approval),
      node("label", { class: "approval-reason-label", for: reasonId, text: "Reason (optional, the agent reads it)" }),
      node("input", { class: "approval-reason", id: reasonId, type: "text", maxlength: "2000", "data-approval": approval.id, value: reasons.get(approval.id) || "", disabled: busy }),
      node("div", { class: "approval-actions" }, [
        node("button", { type: "button", class: "approve", "data-action": "approve", "data-approval": approval.id, disabled: busy, text: "Approve" }),
        node("button", { type: "button", class: "deny", "data-action": "deny", "data-approval": approval.id, disabled: busy, text: "Deny" }),
      ]),
    ]);
  }

  function decidedWords(approval) {
    const by = approval.decided_by || "the owner";
    const when = approval.decided_at ? " at " + shortTime.format(new Date(approval.decided_at)) : "";
    if (approval.state === "approved") return "Approved by " + by + when;
    if (approval.state === "denied") return "Declined by " + by + when + (approval.reason ? ": " + approval.reason : "");
    if (approval.state === "expired") return "Declined" + when + ": " + (approval.reason || "no decision in time");
    if (approval.state === "cancelled") return "Not decided: the answer was stopped";
    return "Waiting for your decision";
  }

  function historyLine(approval) {
    return node("li", { class: "approval-decided " + approval.state, "data-approval": approval.id }, [
      node("code", { text: approval.tool }),
      approval.teammate ? " (" + approval.agent_name + ")" : "",
      " — " + decidedWords(approval),
    ]);
  }

  async function decide(approvalId, decision) {
    if (sending.has(approvalId)) return;
    sending.add(approvalId);
    chat.render();
    const key = (crypto.randomUUID ? crypto.randomUUID() : String(Date.now()) + Math.random().toString(16).slice(2));
    try {
      const response = await fetch("/api/tool-approvals/" + encodeURIComponent(approvalId) + "/decision/", {
        method: "POST",
        credentials: "same-origin",
        headers: { "Content-Type": "application/json", "X-CSRFToken": chat.csrfToken(), Accept: "application/json", "Idempotency-Key": key },
        body: JSON.stringify({ decision, reason: reasons.get(approvalId) || "" }),
      });
      let data = {};
      try { data = await response.json(); } catch (e) { data = {}; }
      if (!response.ok) {
        const error = new Error(data.message || "Something went wrong.");
        error.code = data.code || "error";
        throw error;
      }
      reasons.delete(approvalId);
      chat.announce(decision === "approve" ? "Approved: the call runs now." : "Declined: the agent is told.");
    } catch (error) {
      chat.showRefusal(error); // 409 already_decided says what stands
    } finally {
      sending.delete(approvalId);
      await chat.refetch();
    }
  }

  window.ocApprovals = {
    attach(helpers) {
      chat = helpers;
      document.addEventListener("input", (event) => {
        const input = event.target.closest && event.target.closest("input.approval-reason");
        if (input) reasons.set(input.dataset.approval, input.value);
      });
    },
    waiting(run) { return !!run && (run.approvals || []).some((a) => a.state === "pending"); },
    // Under the answer in progress: a card per waiting call, and a line per call decided meanwhile.
    cards(run) {
      const approvals = (run && run.approvals) || [];
      const parts = approvals.filter((a) => a.state === "pending").map(card);
      const decided = approvals.filter((a) => a.state !== "pending");
      if (decided.length) parts.unshift(node("ul", { class: "approval-history" }, decided.map(historyLine)));
      return parts;
    },
    // Under a finished answer: who decided what, when.
    history(run) {
      const approvals = (run && run.approvals) || [];
      return approvals.length ? [node("ul", { class: "approval-history" }, approvals.map(historyLine))] : [];
    },
    // A click in the thread: true when it was an approval button.
    handle(target) {
      const action = target.dataset.action;
      if (action !== "approve" && action !== "deny") return false;
      decide(target.dataset.approval, action);
      return true;
    },
  };
})();
