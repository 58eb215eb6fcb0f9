// The Context panel reloads when its agent's stored conversation changes. The event carries metadata only; the
// page refetches through the authorized handler (itself).
(function () {
  "use strict";
  const live = document.getElementById("ctx-live");
  const agentData = document.getElementById("ctx-agent");
  if (!live || !agentData) return;
  const agent = JSON.parse(agentData.textContent);
  const generation = Number(live.dataset.generation);
  const scheme = location.protocol === "https:" ? "wss://" : "ws://";
  const socket = new WebSocket(scheme + location.host + "/ws/workflows/" + live.dataset.workflowId + "/");
  socket.onmessage = function (e) {
    const event = JSON.parse(e.data);
    if (event.type === "context.updated" && event.agent_node_id === agent && event.generation === generation) {
      location.reload();
    }
  };
})();
