// The Memory panel: `memory.updated` carries ids only; the panel offers to show the latest (it never reloads by
// itself, so a draft being typed is never lost).
(function () {
  "use strict";
  const live = document.getElementById("memory-live");
  if (!live) return;
  const scheme = location.protocol === "https:" ? "wss://" : "ws://";
  try {
    const socket = new WebSocket(scheme + location.host + live.dataset.socket);
    socket.addEventListener("message", (message) => {
      let event;
      try { event = JSON.parse(message.data); } catch (e) { return; }
      if (event.type === "memory.updated" && event.memory_node_id === live.dataset.node) {
        document.getElementById("memory-changed").hidden = false;
      }
    });
  } catch (e) { /* the page works without live updates */ }
})();
