// The chat page's small DOM builders, shared by chat.js, provenance.js and approvals.js (loaded before them).
(function () {
  "use strict";

  // An element with attributes (`text` sets its text; null, undefined and false leave an attribute out) and
  // children (elements, or strings as text).
  function node(tag, attrs, children) {
    const n = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "text") n.textContent = v; else n.setAttribute(k, v === true ? "" : v);
    }
    for (const child of children || []) if (child) n.appendChild(typeof child === "string" ? document.createTextNode(child) : child);
    return n;
  }

  window.ocDom = { node };
})();
