// Behaviour shared by every page, bound through data-* attributes (the CSP allows no inline handlers).
// Confirmations before destructive actions are confirm.js (data-confirm-title / -body / -action).
(function () {
  "use strict";

  // The header's menu on a phone: the button opens and closes it; Escape or a click elsewhere closes it.
  const toggle = document.querySelector(".menu-toggle");
  if (toggle) {
    const bar = toggle.closest(".topbar");
    const setOpen = (open) => { bar.classList.toggle("menu-open", open); toggle.setAttribute("aria-expanded", String(open)); };
    toggle.addEventListener("click", () => setOpen(!bar.classList.contains("menu-open")));
    document.addEventListener("keydown", (event) => {
      if (event.key === "Escape" && bar.classList.contains("menu-open")) { setOpen(false); toggle.focus(); }
    });
    document.addEventListener("click", (event) => { if (!bar.contains(event.target)) setOpen(false); });
  }

  // <button data-copy-target="element-id">: copy that element's text and say so next to the button.
  document.addEventListener("click", async function (event) {
    const button = event.target instanceof Element ? event.target.closest("[data-copy-target]") : null;
    if (!button) return;
    const source = document.getElementById(button.dataset.copyTarget);
    if (!source) return;
    const status = button.parentElement ? button.parentElement.querySelector(".copy-status") : null;
    const text = source.textContent.trim();
    let copied = false;
    try {
      await navigator.clipboard.writeText(text);
      copied = true;
    } catch (error) {
      // No clipboard permission (an http page, an old browser): select the text so Ctrl-C copies it.
      const range = document.createRange();
      range.selectNodeContents(source);
      const selection = window.getSelection();
      selection.removeAllRanges();
      selection.addRange(range);
    }
    if (status) status.textContent = copied ? "Copied." : "Selected: press Ctrl-C to copy.";
  });
})();
