// memory.updated carries ids only; the panel offers a reload and refetches through the authorized page.
(function () {
  "use strict";
  const live = document.getElementById("memory-live");
  const nodeData = document.getElementById("memory-node-id");
  if (!live || !nodeData) return;
  const nodeId = JSON.parse(nodeData.textContent);
  const scheme = location.protocol === "https:" ? "wss://" : "ws://";
  try {
    const socket = new WebSocket(scheme + location.host + "/ws/workflows/" + live.dataset.workflowId + "/");
    socket.onmessage = function (message) {
      const event = JSON.parse(message.data);
      if (event.type === "memory.updated" && event.memory_node_id === nodeId) {
        document.getElementById("memory-changed").hidden = false;
      }
    };
  } catch (e) { /* the page works without live updates */ }
})();
