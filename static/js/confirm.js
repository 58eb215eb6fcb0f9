// One confirmation for every destructive action (Clear chat, Clear context, Forget, Clear memory): a dialog that
// names what goes and what stays, focused on Cancel. Forms opt in with data-confirm-title / data-confirm-body /
// data-confirm-action; scripts call window.ocConfirm({title, body, action}) and get a Promise<boolean>.
(function () {
  "use strict";

  function ocConfirm({ title, body, action }) {
    return new Promise((resolve) => {
      const dialog = document.createElement("dialog");
      dialog.className = "confirm";
      dialog.setAttribute("aria-labelledby", "confirm-title");
      const heading = document.createElement("h2");
      heading.id = "confirm-title";
      heading.textContent = title;
      const text = document.createElement("p");
      text.textContent = body || "";
      const actions = document.createElement("div");
      actions.className = "actions";
      const cancel = document.createElement("button");
      cancel.type = "button";
      cancel.textContent = "Cancel";
      const go = document.createElement("button");
      go.type = "button";
      go.className = "danger-solid";
      go.textContent = action || "Continue";
      actions.append(cancel, go);
      dialog.append(heading, text, actions);
      document.body.appendChild(dialog);
      let answer = false;
      cancel.addEventListener("click", () => dialog.close());
      go.addEventListener("click", () => { answer = true; dialog.close(); });
      dialog.addEventListener("close", () => { dialog.remove(); resolve(answer); });
      dialog.showModal();
      cancel.focus();
    });
  }

  window.ocConfirm = ocConfirm;

  document.addEventListener("submit", async (event) => {
    const form = event.target;
    if (!(form instanceof HTMLFormElement) || !form.dataset.confirmTitle || form.dataset.confirmed) return;
    event.preventDefault();
    const submitter = event.submitter;
    const ok = await ocConfirm({
      title: form.dataset.confirmTitle,
      body: form.dataset.confirmBody,
      action: form.dataset.confirmAction,
    });
    if (!ok) return;
    form.dataset.confirmed = "1";
    form.requestSubmit(submitter || undefined);
  });
})();
