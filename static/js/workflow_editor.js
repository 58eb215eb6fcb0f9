// The workflow editor (/workflows/<id>/): a Drawflow canvas whose palette, handles and forms come only from
// /api/node-types/. The server is the authority on the graph: every save replaces the draft with the normalized
// graph it returns, and the validator's codes (through /validate/) are what mark nodes and wires as wrong.
(function () {
  "use strict";

  const config = JSON.parse(document.getElementById("editor-config").textContent);
  const root = document.getElementById("editor");
  const $ = (id) => document.getElementById(id);
  const TERMINAL = new Set(["finished", "failed", "stopped"]);
  const CONTEXT_CODES = new Set(["MULTIPLE_CONTEXTS", "SHARED_CONTEXT", "INVALID_CONTEXT_EDGE"]);

  const state = {
    types: {}, // type -> node type data
    providers: [],
    workflow: null, // the last server answer (GET, PUT, subagents)
    savedGraph: '{"nodes":[],"edges":[]}', // JSON of the draft as last loaded or saved, for "unsaved changes"
    issues: [],
    aliases: {},
    lastAliases: {}, // {draft id: canonical id} from the last save
    selectedNode: null, // drawflow id
    selectedConnection: null,
    newCounter: 0,
    validateTimer: null,
    validateSeq: 0,
    rebuilding: false,
    form: null,
    busy: false,
    history: [], // JSON snapshots of the draft graph, oldest first: undo and redo walk it
    historyIndex: -1,
    snapshotPending: false,
    lastEdit: null, // {key, at}: keystrokes in one field within a moment are one undo step
    clipboard: null, // a copied node: {type, params}
  };

  // --- small helpers ------------------------------------------------------------------------------------------

  function csrfToken() {
    const match = document.cookie.match(/(?:^|;\s*)csrftoken=([^;]+)/);
    return match ? decodeURIComponent(match[1]) : "";
  }

  async function api(method, url, body) {
    const response = await fetch(url, {
      method,
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRFToken": csrfToken(), Accept: "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    let data = null;
    try { data = await response.json(); } catch (_) { data = null; }
    if (!response.ok) {
      const error = new Error((data && data.message) || `Request failed (${response.status})`);
      error.status = response.status;
      error.data = data || {};
      throw error;
    }
    return data;
  }

  function el(tag, attrs, text) {
    const node = document.createElement(tag);
    Object.entries(attrs || {}).forEach(([key, value]) => {
      if (value === undefined || value === null || value === false) return;
      if (key === "className") node.className = value;
      else node.setAttribute(key, value === true ? "" : String(value));
    });
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function escapeHtml(text) {
    return String(text == null ? "" : text).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
  }

  let bannerTimer = null;
  function banner(message, kind) {
    const box = $("banner");
    clearTimeout(bannerTimer);
    // Confirmations fade; errors stay until the next message.
    if (message && kind !== "error") bannerTimer = setTimeout(() => { box.hidden = true; }, 12000);
    box.textContent = "";
    if (!message) { box.hidden = true; return; }
    box.className = `banner banner-${kind || "info"}`;
    if (message instanceof Node) box.append(message); else box.textContent = message;
    box.hidden = false;
  }

  function setSaveState(text) { $("save-state").textContent = text; }

  function announce(text) {
    // Screen readers hear what a keyboard action did (the canvas itself says nothing).
    const live = $("editor-live");
    live.textContent = "";
    window.setTimeout(() => { live.textContent = text; }, 30);
  }

  // --- the canvas -----------------------------------------------------------------------------------------------

  const editor = new Drawflow($("canvas"));
  editor.reroute = false;
  editor.zoom_min = 0.3;
  editor.zoom_max = 2;
  // Deleting is ours (Delete and Backspace, the node list, the side panel), so Drawflow's own key handling is off.
  editor.key = function (event) { this.dispatch("keydown", event); };
  editor.start();

  function getNode(dfId) {
    // Drawflow's getNodeFromId throws for an id it no longer has (a node removed mid-event).
    const data = editor.drawflow.drawflow[editor.module].data;
    return dfId != null && data[dfId] ? editor.getNodeFromId(dfId) : null;
  }

  function typeOf(dfId) {
    const node = getNode(dfId);
    return node ? state.types[node.data.type] : null;
  }

  function nodeData(dfId) {
    const node = getNode(dfId);
    return node ? node.data : null;
  }

  function allNodes() {
    return Object.values(editor.export().drawflow.Home.data);
  }

  function dfIdOf(nodeId) {
    const node = allNodes().find((n) => n.data.id === nodeId);
    return node ? String(node.id) : null;
  }

  function handleAt(type, direction, cls) {
    // Drawflow numbers a node's dots input_1, input_2...; the node type's handle list gives their ids and kinds.
    const list = direction === "input" ? type.inputs : type.outputs;
    return list[parseInt(String(cls).split("_")[1], 10) - 1] || null;
  }

  function dotClass(type, direction, handleId) {
    const list = direction === "input" ? type.inputs : type.outputs;
    const index = list.findIndex((h) => h.id === handleId);
    return index < 0 ? null : `${direction}_${index + 1}`;
  }

  function nodeTitle(data) {
    const type = state.types[data.type];
    return (data.params && data.params.name) || (type ? type.label : data.type);
  }

  function nodeSubtitle(data) {
    const type = state.types[data.type];
    const params = data.params || {};
    if (!type) return data.type;
    if (params.model) return `${params.provider || ""} · ${params.model}`;
    if (params.reset_policy) return `${type.toolName ? "tool " + type.toolName + " · " : ""}reset: ${params.reset_policy}`;
    if (type.toolName) return `tool ${type.toolName}`;
    if (type.panel === "mcp" && Array.isArray(params.tools) && params.tools.length) return mcpToolsLine(params.tools);
    return type.description.split(";")[0].split(".")[0];
  }

  // An MCP server node on the canvas: how many tools it offers and how many ask the owner first.
  function mcpToolsLine(tools) {
    const policies = tools.map((t) => t.policy || defaultPolicy(t.annotations));
    const offered = policies.filter((p) => p !== "never").length;
    const asking = policies.filter((p) => p === "ask").length;
    return `${offered} tool${offered === 1 ? "" : "s"}` + (asking ? ` · ${asking} ask${asking === 1 ? "s" : ""} first` : "");
  }

  function nodeHtml(data) {
    const type = state.types[data.type] || { label: data.type, inputs: [] };
    const wantsContext = type.inputs.some((h) => h.kind === "context");
    return `<div class="node-card">
      <div class="node-kind">${escapeHtml(type.label)}</div>
      <div class="node-title" title="${escapeHtml(nodeTitle(data))}">${escapeHtml(nodeTitle(data))}</div>
      <div class="node-sub" title="${escapeHtml(nodeSubtitle(data))}">${escapeHtml(nodeSubtitle(data))}</div>
      ${wantsContext ? '<button type="button" class="add-context" tabindex="-1">+ Context</button>' : ""}
      <div class="node-issues"></div>
    </div>`;
  }

  function decorate(dfId) {
    // Label and colour each dot by its handle kind, and tag the node for styles and tests.
    const node = getNode(dfId);
    const type = node && state.types[node.data.type];
    const element = $(`node-${dfId}`);
    if (!element || !type) return;
    element.dataset.nodeId = node.data.id;
    element.dataset.type = node.data.type;
    element.classList.toggle("has-inputs", type.inputs.length > 0);
    element.classList.toggle("has-outputs", type.outputs.length > 0);
    ["input", "output"].forEach((direction) => {
      element.querySelectorAll(`.${direction}`).forEach((dot) => {
        const handle = handleAt(type, direction, dot.classList[1]);
        if (!handle) return;
        dot.dataset.kind = handle.kind;
        dot.dataset.handle = handle.id;
        dot.dataset.label = handle.label;
        const limit = handle.maxConnections ? `, at most ${handle.maxConnections} wire${handle.maxConnections > 1 ? "s" : ""}` : "";
        dot.title = `${handle.label} (${handle.kind} ${direction}${limit})`;
      });
    });
    const button = element.querySelector(".add-context");
    if (button) {
      button.hidden = hasContext(dfId);
      button.onclick = (event) => { event.stopPropagation(); addContext(dfId); };
    }
  }

  function hasContext(dfId) {
    const node = getNode(dfId);
    const type = node && state.types[node.data.type];
    const contextInput = type && type.inputs.find((h) => h.kind === "context");
    if (!contextInput) return false;
    const cls = dotClass(type, "input", contextInput.id);
    return (node.inputs[cls] || { connections: [] }).connections.length > 0;
  }

  function refreshNode(dfId) {
    const element = $(`node-${dfId}`);
    if (!element) return;
    const content = element.querySelector(".drawflow_content_node");
    const data = nodeData(dfId);
    content.innerHTML = nodeHtml(data);
    decorate(dfId);
    editor.updateConnectionNodes(`node-${dfId}`);
  }

  function addNode(data, position) {
    const type = state.types[data.type];
    const inputs = type ? type.inputs.length : 0;
    const outputs = type ? type.outputs.length : 0;
    const pos = position || { x: 40, y: 40 };
    const dfId = editor.addNode(data.type, inputs, outputs, pos.x, pos.y, `node-type-${data.type}`, data, nodeHtml(data));
    decorate(dfId);
    return String(dfId);
  }

  function connect(sourceDf, sourceHandle, targetDf, targetHandle) {
    const out = dotClass(typeOf(sourceDf), "output", sourceHandle);
    const inp = dotClass(typeOf(targetDf), "input", targetHandle);
    if (!out || !inp) return false;
    editor.addConnection(sourceDf, targetDf, out, inp);
    return true;
  }

  // --- graph <-> canvas ----------------------------------------------------------------------------------------

  function draftGraph() {
    const data = editor.export().drawflow.Home.data;
    const nodes = [];
    const edges = [];
    Object.values(data).forEach((node) => {
      nodes.push({
        id: node.data.id,
        type: node.data.type,
        params: node.data.params || {},
        position: { x: Math.round(node.pos_x), y: Math.round(node.pos_y) },
      });
      const type = state.types[node.data.type];
      if (!type) return;
      Object.entries(node.outputs).forEach(([cls, output]) => {
        const sourceHandle = handleAt(type, "output", cls);
        output.connections.forEach((connection) => {
          const target = data[connection.node];
          const targetType = target && state.types[target.data.type];
          const targetHandle = targetType && handleAt(targetType, "input", connection.output);
          if (!sourceHandle || !targetHandle) return;
          edges.push({ source: node.data.id, sourceHandle: sourceHandle.id, target: target.data.id, targetHandle: targetHandle.id });
        });
      });
    });
    return { nodes, edges };
  }

  function graphKey(graph) {
    const nodes = graph.nodes.map((n) => [n.id, n.type, JSON.stringify(n.params || {}), Math.round((n.position || {}).x || 0), Math.round((n.position || {}).y || 0)]);
    const edges = graph.edges.map((e) => [e.source, e.sourceHandle, e.target, e.targetHandle].join("|"));
    return JSON.stringify([nodes.sort(), edges.sort()]);
  }

  function isDirty() { return graphKey(draftGraph()) !== state.savedGraph; }

  function loadGraph(graph, { restoring = false } = {}) {
    const keepSelected = state.selectedNode && nodeData(state.selectedNode) ? nodeData(state.selectedNode).id : null;
    state.rebuilding = true;
    editor.clear();
    state.selectedNode = null;
    state.selectedConnection = null;
    const byId = {};
    (graph.nodes || []).forEach((node, index) => {
      // A graph made through the API may carry no positions: lay those nodes out in a grid instead of a pile.
      const position = node.position || { x: 40 + (index % 3) * 320, y: 40 + Math.floor(index / 3) * 170 };
      byId[node.id] = addNode({ id: node.id, type: node.type, params: node.params || {} }, position);
    });
    (graph.edges || []).forEach((edge) => {
      if (byId[edge.source] && byId[edge.target]) connect(byId[edge.source], edge.sourceHandle, byId[edge.target], edge.targetHandle);
    });
    Object.values(byId).forEach(decorate);
    state.rebuilding = false;
    if (!restoring) {
      state.savedGraph = graphKey(draftGraph());
      state.aliases = {};
    }
    // The selection survives a save (under the node's canonical id) and an undo, when the node is still there.
    const again = keepSelected && dfIdOf(state.lastAliases[keepSelected] || keepSelected);
    if (again) selectNode(again); else renderSelection();
    refreshLists();
  }

  // --- undo and redo ------------------------------------------------------------------------------------------

  function snapshot() { return JSON.stringify(draftGraph()); }

  function resetHistory() {
    state.history = [snapshot()];
    state.historyIndex = 0;
    state.lastEdit = null;
    updateHistoryButtons();
  }

  function recordEdit(key) {
    // Called on every change; events fired together (a node and its wires removed) become one step.
    const now = Date.now();
    const merge = key && state.lastEdit && state.lastEdit.key === key && now - state.lastEdit.at < 1500;
    state.lastEdit = key ? { key, at: now } : null;
    if (state.snapshotPending) return;
    state.snapshotPending = true;
    Promise.resolve().then(() => {
      state.snapshotPending = false;
      const current = snapshot();
      if (current === state.history[state.historyIndex]) return;
      if (merge && state.historyIndex > 0) {
        state.history[state.historyIndex] = current;
      } else {
        state.history = state.history.slice(0, state.historyIndex + 1);
        state.history.push(current);
        if (state.history.length > 200) state.history.shift();
        state.historyIndex = state.history.length - 1;
      }
      updateHistoryButtons();
    });
  }

  function restore(index) {
    if (index < 0 || index >= state.history.length) return;
    state.historyIndex = index;
    state.lastEdit = null;
    loadGraph(JSON.parse(state.history[index]), { restoring: true });
    updateHistoryButtons();
    changed({ fromHistory: true });
  }

  function undo() { restore(state.historyIndex - 1); }
  function redo() { restore(state.historyIndex + 1); }

  function updateHistoryButtons() {
    $("undo").disabled = state.historyIndex <= 0;
    $("redo").disabled = state.historyIndex >= state.history.length - 1;
  }

  function remapHistory(aliases) {
    // After a save, drafts' client ids are canonical ids: undo must bring back those nodes, not new ones.
    if (!aliases || !Object.keys(aliases).length) return;
    const map = (id) => aliases[id] || id;
    state.history = state.history.map((text) => {
      const graph = JSON.parse(text);
      graph.nodes.forEach((n) => { n.id = map(n.id); });
      graph.edges.forEach((e) => { e.source = map(e.source); e.target = map(e.target); });
      return JSON.stringify(graph);
    });
  }

  function adoptWorkflow(data, { history = "replace" } = {}) {
    state.workflow = data;
    $("workflow-name").textContent = data.name;
    $("workflow-name").title = data.name; // the whole name on hover when the bar cuts it
    loadGraph(data.graph);
    if (history === "reset" || !state.history.length) resetHistory();
    else if (history === "push") recordEdit(null);
    else {
      // A save: the stored graph is the step the owner was at (normalized), not a new step.
      state.history[state.historyIndex] = snapshot();
      updateHistoryButtons();
    }
    setSaveState(`Saved · revision ${data.revision}`);
    updateRunState();
    scheduleValidate(0);
  }

  function changed(options) {
    if (state.rebuilding) return;
    const { fromHistory = false, key = null } = options || {};
    if (!fromHistory) recordEdit(key);
    setSaveState(isDirty() ? "Unsaved changes" : `Saved · revision ${state.workflow.revision}`);
    $("save").disabled = !isDirty();
    refreshLists();
    scheduleValidate();
  }

  // --- palette -----------------------------------------------------------------------------------------------------

  function renderPalette() {
    const list = $("palette");
    list.textContent = "";
    Object.values(state.types).filter((t) => t.palette).forEach((type) => {
      const item = el("li");
      const button = el("button", { type: "button", className: "palette-item", draggable: "true", "data-type": type.type, title: type.description });
      button.append(el("span", { className: "palette-label" }, type.label));
      button.append(el("span", { className: "palette-desc" }, type.description));
      button.addEventListener("dragstart", (event) => {
        event.dataTransfer.setData("application/x-node-type", type.type);
        event.dataTransfer.effectAllowed = "copy";
      });
      button.addEventListener("click", () => {
        const dfId = createNode(type.type, freeSpot(visibleSpot()));
        selectNode(dfId);
        announce(`Added ${type.label}.`);
      });
      item.append(button);
      list.append(item);
    });
    filterPalette();
  }

  function filterPalette() {
    const words = $("palette-search").value.trim().toLowerCase().split(/\s+/).filter(Boolean);
    let shown = 0;
    document.querySelectorAll("#palette li").forEach((item) => {
      const text = item.textContent.toLowerCase();
      item.hidden = !words.every((word) => text.includes(word));
      if (!item.hidden) shown += 1;
    });
    $("palette-none").hidden = shown > 0;
  }
  $("palette-search").addEventListener("input", filterPalette);
  $("palette-search").addEventListener("keydown", (event) => {
    // Enter adds the first match, as a search box in a node picker does.
    if (event.key !== "Enter") return;
    event.preventDefault();
    const shown = [...document.querySelectorAll("#palette li:not([hidden]) .palette-item")];
    const word = $("palette-search").value.trim().toLowerCase();
    const byLabel = shown.find((b) => b.querySelector(".palette-label").textContent.toLowerCase().includes(word));
    if (byLabel || shown[0]) (byLabel || shown[0]).click(); // a match in the name first, then in the description
  });

  function canvasPoint(clientX, clientY) {
    const rect = editor.precanvas.getBoundingClientRect();
    return { x: (clientX - rect.x) / editor.zoom, y: (clientY - rect.y) / editor.zoom };
  }

  function freeSpot(wanted) {
    // Below the wanted point until the new card (about 260 x 110) overlaps no node's card, so it never hides one.
    const taken = allNodes().map((n) => {
      const element = $(`node-${n.id}`);
      return { x: n.pos_x, y: n.pos_y, w: element ? element.offsetWidth : 260, h: element ? element.offsetHeight : 110 };
    });
    const gap = 20;
    const overlaps = (spot) => taken.some((t) => spot.x < t.x + t.w + gap && t.x < spot.x + 260 + gap
      && spot.y < t.y + t.h + gap && t.y < spot.y + 110 + gap);
    const spot = { x: Math.max(wanted.x, 10), y: Math.max(wanted.y, 10) };
    for (let i = 0; i < 60 && overlaps(spot); i += 1) spot.y += 40;
    return spot;
  }

  function visibleSpot() {
    const rect = $("canvas").getBoundingClientRect();
    return canvasPoint(rect.left + rect.width / 4, rect.top + 40);
  }

  function createNode(typeName, position, params) {
    const type = state.types[typeName];
    state.newCounter += 1;
    // A client id; the server gives it a canonical `<workflow>:<type>:<n>` on save and returns the alias.
    const id = `new-${typeName}-${Date.now().toString(36)}-${state.newCounter}`;
    const dfId = addNode({ id, type: typeName, params: params || JSON.parse(JSON.stringify(type.newParams || {})) }, position);
    changed();
    return dfId;
  }

  $("canvas").addEventListener("dragover", (event) => { event.preventDefault(); event.dataTransfer.dropEffect = "copy"; });
  $("canvas").addEventListener("drop", (event) => {
    event.preventDefault();
    const typeName = event.dataTransfer.getData("application/x-node-type");
    if (!state.types[typeName]) return;
    const dfId = createNode(typeName, canvasPoint(event.clientX, event.clientY));
    selectNode(dfId);
  });

  // --- wiring rules ----------------------------------------------------------------------------------------------

  // While a wire is dragged, inputs of its kind light up and the others are marked refused.
  editor.on("connectionStart", ({ output_id, output_class }) => {
    const handle = handleAt(typeOf(output_id), "output", output_class);
    root.classList.add("wiring");
    document.querySelectorAll("#canvas .input").forEach((dot) => {
      const own = dot.closest(".drawflow-node").id === `node-${output_id}`;
      dot.classList.toggle("accepts", !own && handle && dot.dataset.kind === handle.kind);
      dot.classList.toggle("refuses", own || !handle || dot.dataset.kind !== handle.kind);
    });
  });

  function endWiring() {
    root.classList.remove("wiring");
    document.querySelectorAll("#canvas .input").forEach((dot) => dot.classList.remove("accepts", "refuses"));
  }
  editor.on("connectionCancel", endWiring);
  editor.on("mouseUp", endWiring);

  editor.on("connectionCreated", ({ output_id, input_id, output_class, input_class }) => {
    endWiring();
    if (state.rebuilding) return;
    const source = handleAt(typeOf(output_id), "output", output_class);
    const target = handleAt(typeOf(input_id), "input", input_class);
    if (!source || !target || source.kind !== target.kind) {
      editor.removeSingleConnection(output_id, input_id, output_class, input_class);
      banner(source && target
        ? `Not connected: “${source.label}” is a ${source.kind} output and only joins a ${source.kind} input; “${target.label}” takes ${target.kind}.`
        : "Not connected: those two handles do not fit together.", "warn");
      return;
    }
    decorate(input_id);
    if (state.selectedNode === String(input_id)) renderSelection();
    changed();
  });

  editor.on("connectionRemoved", ({ input_id }) => {
    if (state.rebuilding) return;
    decorate(input_id);
    if (state.selectedNode === String(input_id)) renderSelection();
    changed();
  });
  editor.on("nodeRemoved", () => { if (!state.rebuilding) { state.selectedNode = null; renderSelection(); changed(); } });
  editor.on("nodeMoved", () => changed());
  editor.on("nodeSelected", (id) => { state.selectedNode = String(id); state.selectedConnection = null; renderSelection(); });
  editor.on("nodeUnselected", () => { state.selectedNode = null; renderSelection(); });
  editor.on("connectionSelected", (connection) => {
    state.selectedConnection = connection;
    state.selectedNode = null;
    renderSelection();
    showWireDelete(connection);
  });
  editor.on("connectionUnselected", () => { state.selectedConnection = null; hideWireDelete(); });
  editor.on("nodeSelected", hideWireDelete);
  editor.on("translate", hideWireDelete);
  editor.on("zoom", hideWireDelete);

  function wireSvg(c) {
    return document.querySelector(`#canvas svg.connection.node_in_node-${c.input_id}.node_out_node-${c.output_id}.${c.output_class}.${c.input_class}`);
  }

  function showWireDelete(connection) {
    // On a touch screen there is no Delete key: a selected wire gets a button of its own, at its middle.
    const svg = wireSvg(connection);
    const path = svg && svg.querySelector(".main-path");
    if (!path) return;
    const box = path.getBoundingClientRect();
    const wrap = $("canvas").parentElement.getBoundingClientRect();
    const button = $("wire-delete");
    button.style.left = `${box.left + box.width / 2 - wrap.left}px`;
    button.style.top = `${box.top + box.height / 2 - wrap.top}px`;
    button.hidden = false;
  }

  function hideWireDelete() { $("wire-delete").hidden = true; }

  $("wire-delete").addEventListener("click", () => {
    const c = state.selectedConnection;
    if (c && removeSelected()) announce("Wire deleted.");
    hideWireDelete();
  });

  function removeSelected() {
    if (state.selectedConnection) {
      const c = state.selectedConnection;
      state.selectedConnection = null;
      hideWireDelete();
      editor.removeSingleConnection(c.output_id, c.input_id, c.output_class, c.input_class);
      return true;
    }
    if (state.selectedNode) {
      const dfId = state.selectedNode;
      state.selectedNode = null;
      editor.removeNodeId(`node-${dfId}`);
      return true;
    }
    return false;
  }

  document.addEventListener("keydown", (event) => {
    const tag = (event.target.tagName || "").toUpperCase();
    if (["INPUT", "TEXTAREA", "SELECT"].includes(tag) || event.target.isContentEditable) return;
    if (event.key === "Delete" || event.key === "Backspace") {
      if (removeSelected()) event.preventDefault();
    } else if (event.key === "Escape") {
      state.selectedNode = null;
      state.selectedConnection = null;
      renderSelection();
    }
  });
  document.addEventListener("keydown", (event) => {
    if ((event.ctrlKey || event.metaKey) && event.key.toLowerCase() === "s") { event.preventDefault(); save(); }
  }, true);
  document.addEventListener("keydown", (event) => {
    // Undo and redo of canvas edits; inside a text field the field's own undo applies.
    if (!(event.ctrlKey || event.metaKey) || event.altKey) return;
    const tag = (event.target.tagName || "").toUpperCase();
    if (["INPUT", "TEXTAREA", "SELECT"].includes(tag) || event.target.isContentEditable) return;
    if ($("reset-dialog").open || $("conflict-dialog").open) return;
    const key = event.key.toLowerCase();
    if (key === "z" && !event.shiftKey) { event.preventDefault(); undo(); }
    else if ((key === "z" && event.shiftKey) || key === "y") { event.preventDefault(); redo(); }
    else if (key === "c" && state.selectedNode && !window.getSelection().toString()) {
      const data = nodeData(state.selectedNode);
      if (data && state.types[data.type] && state.types[data.type].palette) {
        state.clipboard = { type: data.type, params: JSON.parse(JSON.stringify(data.params || {})) };
        announce(`Copied ${nodeTitle(data)}.`);
      }
    } else if (key === "v" && state.clipboard) {
      event.preventDefault();
      pasteNode();
    }
  });

  function pasteNode() {
    const copy = state.clipboard;
    const from = state.selectedNode && getNode(state.selectedNode);
    const near = from ? { x: from.pos_x + 40, y: from.pos_y + 40 } : visibleSpot();
    const dfId = createNode(copy.type, freeSpot(near), JSON.parse(JSON.stringify(copy.params)));
    selectNode(dfId);
    announce(`Pasted ${nodeTitle(nodeData(dfId))}.`);
  }

  $("undo").addEventListener("click", undo);
  $("redo").addEventListener("click", redo);

  // --- Add Context, Add teammate ----------------------------------------------------------------------------------

  function contextType() {
    // The type that feeds a `context` input: found by its handle kind, never by name.
    return Object.values(state.types).find((t) => t.outputs.some((h) => h.kind === "context"));
  }

  function addContext(agentDf) {
    const type = contextType();
    const agentType = typeOf(agentDf);
    const input = agentType && agentType.inputs.find((h) => h.kind === "context");
    if (!type || !input) return;
    const agent = getNode(agentDf);
    const dfId = createNode(type.type, freeSpot({ x: agent.pos_x - 300, y: agent.pos_y + 110 }));
    connect(dfId, type.outputs.find((h) => h.kind === "context").id, agentDf, input.id);
    decorate(agentDf);
    changed();
    selectNode(agentDf);
  }

  async function addTeammate(agentDfBefore) {
    let agentDf = agentDfBefore;
    if (isDirty()) {
      // Saving rebuilds the canvas under canonical ids: find the lead again through the returned aliases.
      const draftId = nodeData(agentDf).id;
      if (!(await save())) return;
      agentDf = dfIdOf(state.lastAliases[draftId] || draftId);
      if (!agentDf) return;
    }
    const lead = nodeData(agentDf);
    const teammateType = state.types[lead.type];
    const params = Object.assign({}, teammateType.newParams, { name: "Teammate" });
    try {
      // Left of and below the lead: the teammate's output then runs forward into the lead's tools input.
      const leadNode = getNode(agentDf);
      const position = freeSpot({ x: leadNode.pos_x - 320, y: leadNode.pos_y + 200 });
      const data = await api("POST", config.api + "subagents/", {
        lead_node_id: lead.id, params, revision: state.workflow.revision, position,
      });
      adoptWorkflow(data, { history: "push" });
      fitView();
      banner(`Added a teammate (${data.subagent_node_id}) with its own Context, wired as ${lead.params.name || lead.id}'s tool.`, "ok");
      const dfId = dfIdOf(data.subagent_node_id);
      if (dfId) selectNode(dfId);
    } catch (error) {
      handleWriteError(error, "Could not add a teammate");
    }
  }

  // --- selection and the side panel ------------------------------------------------------------------------------

  function selectNode(dfId) {
    document.querySelectorAll("#canvas .drawflow-node.selected").forEach((n) => n.classList.remove("selected"));
    const element = $(`node-${dfId}`);
    if (element) element.classList.add("selected");
    editor.node_selected = element;
    state.selectedNode = String(dfId);
    state.selectedConnection = null;
    renderSelection();
  }

  function savedIds() {
    return new Set(((state.workflow && state.workflow.graph.nodes) || []).map((n) => n.id));
  }

  function renderSelection() {
    const body = $("node-panel-body");
    body.textContent = "";
    state.form = null;
    $("node-select").value = state.selectedNode ? nodeData(state.selectedNode).id : "";
    if (!state.selectedNode || !nodeData(state.selectedNode)) {
      body.append(el("p", { className: "empty" }, "Select a node to edit it."));
      return;
    }
    const dfId = state.selectedNode;
    const data = nodeData(dfId);
    const type = state.types[data.type];
    body.append(el("p", { className: "node-heading" }, `${type.label} `));
    body.lastChild.append(savedIds().has(data.id) ? el("code", {}, data.id) : el("span", { className: "meta" }, "(not saved yet)"));
    if (type.description) body.append(el("p", { className: "meta" }, type.description));
    const formBox = el("div", { id: "node-form" });
    body.append(formBox);
    state.form = SchemaForm.render(formBox, {
      schema: type.paramsSchema,
      params: data.params,
      idPrefix: "param",
      catalogue: state.providers,
      onChange: (params, field) => {
        editor.updateNodeDataFromId(dfId, Object.assign({}, nodeData(dfId), { params }));
        const element = $(`node-${dfId}`);
        ["title", "sub"].forEach((part) => {
          const box = element.querySelector(`.node-${part}`);
          box.textContent = part === "title" ? nodeTitle(nodeData(dfId)) : nodeSubtitle(nodeData(dfId));
          box.title = box.textContent; // the whole text on hover when the card cuts it
        });
        changed({ key: `params:${data.id}:${field}` });
      },
    });
    showFieldErrors();
    if (type.panel === "mcp") body.append(mcpSection(dfId));
    const actions = el("div", { className: "node-actions" });
    if (type.inputs.some((h) => h.kind === "context") && !hasContext(dfId)) {
      // As the node's "+ Context": offered only while the agent has none (a second one is MULTIPLE_CONTEXTS).
      const addCtx = el("button", { type: "button", id: "add-context" }, "Add Context");
      addCtx.addEventListener("click", () => addContext(dfId));
      actions.append(addCtx);
    }
    if (type.capabilities.isAgent && type.outputs.some((h) => h.kind === "tool")) {
      const teammate = el("button", { type: "button", id: "add-teammate" }, "Add teammate");
      teammate.addEventListener("click", () => addTeammate(dfId));
      actions.append(teammate);
    }
    const saved = savedIds().has(data.id);
    if (type.panel === "context") {
      actions.append(saved ? el("a", { className: "button", href: config.contextPanelUrl + encodeURIComponent(data.id) }, "Open Context panel")
        : el("span", { className: "meta" }, "Save to open its Context panel."));
    }
    if (type.panel === "memory") {
      actions.append(saved ? el("a", { className: "button", href: `${config.memoryPanelUrl}${encodeURIComponent(data.id)}/` }, "Open Memory panel")
        : el("span", { className: "meta" }, "Save to open its Memory panel."));
    }
    if (type.panel === "webhook") actions.append(saved ? webhookAddress(data.id) : el("span", { className: "meta" }, "Save to make its address."));
    const remove = el("button", { type: "button", className: "danger", id: "delete-node" }, "Delete node");
    remove.addEventListener("click", () => { state.selectedNode = dfId; removeSelected(); });
    actions.append(remove);
    body.append(actions);
  }

  // --- an MCP server node: its stdio server, headers (secret names), Test connection and the tick list ---------------

  const KEPT_TOOL_FIELDS = ["name", "description", "input_schema", "digest", "annotations"];
  // Run / ask first / never, per ticked tool (docs/tools.md#approvals); unset, the default its annotations suggest
  // (mcp_nodes/policy.py): read-only runs, everything else asks first.
  const POLICIES = [["run", "Run"], ["ask", "Ask me first"], ["never", "Never (not offered)"]];

  function defaultPolicy(annotations) {
    const hints = annotations || {};
    return hints.readOnlyHint === true && hints.destructiveHint !== true ? "run" : "ask";
  }

  function policySelect(dfId, name, annotations, enabled) {
    const ticked = (nodeData(dfId).params.tools || []).find((t) => t.name === name);
    const select = el("select", { id: `mcp-policy-${name}`, className: "mcp-policy", "aria-label": `When the agent calls ${name}`, disabled: !enabled });
    POLICIES.forEach(([value, words]) => select.append(el("option", { value }, words)));
    select.value = (ticked && ticked.policy) || defaultPolicy(annotations);
    select.addEventListener("change", () => {
      const tools = (nodeData(dfId).params.tools || []).map((t) => (t.name === name ? Object.assign({}, t, { policy: select.value }) : t));
      setMcpParams(dfId, { tools });
    });
    return select;
  }

  function setMcpParams(dfId, changes) {
    const params = Object.assign({}, nodeData(dfId).params, changes);
    editor.updateNodeDataFromId(dfId, Object.assign({}, nodeData(dfId), { params }));
    const sub = $(`node-${dfId}`) && $(`node-${dfId}`).querySelector(".node-sub");
    if (sub) { sub.textContent = nodeSubtitle(nodeData(dfId)); sub.title = sub.textContent; } // the canvas says it too
    if (state.form) state.form.refresh(params); // the generic form keeps a copy of the params: hand it the new ones
    changed();
  }

  function mcpSection(dfId) {
    const params = nodeData(dfId).params || {};
    const box = el("section", { id: "mcp-panel", className: "mcp-panel", "aria-label": "MCP server" });

    const serverField = el("div", { className: "field" });
    serverField.append(el("label", { for: "mcp-server" }, "stdio server"));
    const server = el("select", { id: "mcp-server" });
    server.append(el("option", { value: "" }, "—"));
    if (params.server) server.append(el("option", { value: params.server }, params.server));
    server.value = params.server || "";
    server.addEventListener("change", () => setMcpParams(dfId, { server: server.value }));
    serverField.append(server, el("p", { className: "help" }, "For the stdio transport: a server the operator lists."));
    box.append(serverField);
    api("GET", "/api/mcp-servers/stdio/").then((servers) => {
      servers.forEach((entry) => {
        if (entry.name === params.server) return;
        server.append(el("option", { value: entry.name }, entry.label === entry.name ? entry.name : `${entry.label} (${entry.name})`));
      });
      server.value = nodeData(dfId).params.server || "";
    }).catch(() => {});

    const headers = el("div", { className: "field mcp-headers" });
    headers.append(el("p", { className: "node-heading" }, "Headers"));
    headers.append(el("p", { className: "help" }, "Each value is one of your secrets, named here (stored on /api/secrets/)."));
    const rows = el("ul", { id: "mcp-header-rows", className: "plain" });
    const drawHeaders = () => {
      rows.textContent = "";
      (nodeData(dfId).params.headers || []).forEach((header, index) => {
        const row = el("li");
        const name = el("input", { type: "text", "aria-label": `Header ${index + 1} name`, value: header.name, placeholder: "Authorization" });
        const secret = el("input", { type: "text", "aria-label": `Header ${index + 1} secret`, value: header.secret, placeholder: "secret name" });
        const update = () => {
          const list = (nodeData(dfId).params.headers || []).slice();
          list[index] = { name: name.value, secret: secret.value };
          setMcpParams(dfId, { headers: list });
        };
        name.addEventListener("input", update);
        secret.addEventListener("input", update);
        const drop = el("button", { type: "button", "aria-label": `Remove header ${index + 1}` }, "×");
        drop.addEventListener("click", () => {
          setMcpParams(dfId, { headers: (nodeData(dfId).params.headers || []).filter((_, i) => i !== index) });
          drawHeaders();
        });
        row.append(name, secret, drop);
        rows.append(row);
      });
    };
    const addHeader = el("button", { type: "button", id: "mcp-add-header" }, "Add header");
    addHeader.addEventListener("click", () => {
      setMcpParams(dfId, { headers: [...(nodeData(dfId).params.headers || []), { name: "Authorization", secret: "" }] });
      drawHeaders();
    });
    drawHeaders();
    headers.append(rows, addHeader);
    box.append(headers);

    const test = el("button", { type: "button", id: "mcp-test" }, "Test connection");
    const status = el("p", { id: "mcp-status", className: "meta", role: "status" });
    const tools = el("ul", { id: "mcp-tools", className: "plain mcp-tools" });
    const drawTicked = () => {
      // Before a test: the ticked tools as the node pinned them.
      tools.textContent = "";
      (nodeData(dfId).params.tools || []).forEach((tool) => {
        const row = el("li", { className: "mcp-tool" }, `✓ ${tool.name} `);
        row.append(policySelect(dfId, tool.name, tool.annotations, true));
        tools.append(row);
      });
    };
    drawTicked();
    test.addEventListener("click", async () => {
      const id = nodeData(dfId).id;
      if (!savedIds().has(id)) {
        status.textContent = "Save the workflow first, then test the connection.";
        return;
      }
      test.disabled = true;
      status.textContent = "Connecting…";
      try {
        const answer = await api("POST", `${config.api}mcp-servers/${encodeURIComponent(id)}/tools/`, { params: nodeData(dfId).params });
        status.textContent = `${answer.tools.length} tools on ${answer.server}.` + (answer.missing.length ? ` No longer listed: ${answer.missing.join(", ")}.` : "");
        drawListed(dfId, tools, answer.tools);
      } catch (error) {
        status.textContent = error.message;
      } finally {
        test.disabled = false;
      }
    });
    box.append(test, status, tools);
    return box;
  }

  function drawListed(dfId, list, listed) {
    list.textContent = "";
    listed.forEach((tool) => {
      const row = el("li", { className: "mcp-tool" });
      const id = `mcp-tool-${tool.name}`;
      const tick = el("input", { type: "checkbox", id, checked: tool.ticked });
      const label = el("label", { for: id });
      label.append(el("code", {}, tool.name));
      const hints = tool.annotations || {};
      if (hints.readOnlyHint) label.append(el("span", { className: "badge" }, "read-only"));
      if (hints.destructiveHint) label.append(el("span", { className: "badge danger" }, "destructive"));
      if (tool.changed) label.append(el("span", { className: "badge warn" }, "changed since ticked"));
      const policy = policySelect(dfId, tool.name, tool.annotations, tool.ticked);
      row.append(tick, label, policy);
      if (tool.description) row.append(el("p", { className: "help" }, tool.description));
      tick.addEventListener("change", () => {
        const kept = (nodeData(dfId).params.tools || []).filter((t) => t.name !== tool.name);
        if (tick.checked) kept.push(Object.assign(Object.fromEntries(KEPT_TOOL_FIELDS.map((k) => [k, tool[k]])), { policy: policy.value }));
        policy.disabled = !tick.checked;
        setMcpParams(dfId, { tools: kept });
      });
      list.append(row);
    });
  }

  // A webhook trigger's address (docs/triggers.md#webhooks): the server keeps only its digest, so the full URL is
  // shown once, right after Regenerate made it; later only its last characters.
  function webhookAddress(nodeId) {
    const url = `${config.api}hooks/${encodeURIComponent(nodeId)}/`;
    const box = el("div", { className: "webhook-address", id: "webhook-address" });
    const status = el("p", { className: "meta", id: "webhook-hint" }, "…");
    const field = el("input", { type: "text", readonly: true, id: "webhook-url", "aria-label": "Webhook address", hidden: true });
    const copy = el("button", { type: "button", id: "webhook-copy", hidden: true }, "Copy");
    const regenerate = el("button", { type: "button", id: "webhook-regenerate" }, "Make address");
    copy.addEventListener("click", () => { navigator.clipboard.writeText(field.value).then(() => { copy.textContent = "Copied"; }, () => field.select()); });
    regenerate.addEventListener("click", async () => {
      try {
        const made = await api("POST", url);
        field.value = made.url;
        field.hidden = false;
        copy.hidden = false;
        regenerate.textContent = "Regenerate";
        status.textContent = "Copy it now: it is shown only this once. Regenerate retires the old one.";
      } catch (error) { status.textContent = error.message; }
    });
    api("GET", url).then((known) => {
      status.textContent = known.exists ? `Address ending …${known.hint}. Regenerate to see a new one.` : "No address yet.";
      if (known.exists) regenerate.textContent = "Regenerate";
    }, (error) => { status.textContent = error.message; });
    box.append(status, field, copy, regenerate);
    return box;
  }

  function refreshLists() {
    const nodes = allNodes();
    const select = $("node-select");
    const from = $("connect-from");
    const to = $("connect-to");
    const wires = $("wire-select");
    // The owner's From/To (and wire) choices stay chosen while the lists are rebuilt after an edit.
    const kept = [from, to, wires].map((s) => s.value);
    [select, from, to, wires].forEach((s) => { s.textContent = ""; });
    select.append(el("option", { value: "" }, "—"));
    nodes.forEach((node) => {
      const type = state.types[node.data.type];
      if (!type) return;
      const name = `${nodeTitle(node.data)} (${node.data.id})`;
      select.append(el("option", { value: node.data.id }, name));
      type.outputs.forEach((h) => from.append(el("option", { value: `${node.id}|${h.id}` }, `${name} · ${h.label}`)));
      type.inputs.forEach((h) => to.append(el("option", { value: `${node.id}|${h.id}` }, `${name} · ${h.label}`)));
    });
    wireList().forEach((w) => wires.append(el("option", { value: w.value }, w.label)));
    if (!wires.options.length) wires.append(el("option", { value: "" }, "No wires yet"));
    [from, to, wires].forEach((s, i) => {
      if ([...s.options].some((o) => o.value === kept[i])) s.value = kept[i];
    });
    $("unwire").disabled = !wireList().length;
    if (state.selectedNode && nodeData(state.selectedNode)) select.value = nodeData(state.selectedNode).id;
  }

  function handleName(dfId, direction, handleId) {
    const data = nodeData(dfId);
    const type = state.types[data.type];
    const handle = (direction === "input" ? type.inputs : type.outputs).find((h) => h.id === handleId);
    return `${nodeTitle(data)} · ${handle ? handle.label : handleId}`;
  }

  function wireList() {
    const out = [];
    allNodes().forEach((node) => {
      const type = state.types[node.data.type];
      if (!type) return;
      Object.entries(node.outputs).forEach(([cls, output]) => output.connections.forEach((c) => {
        const source = handleAt(type, "output", cls);
        const target = getNode(c.node);
        const targetHandle = target && handleAt(state.types[target.data.type], "input", c.output);
        if (!source || !targetHandle) return;
        out.push({
          value: [node.id, cls, c.node, c.output].join("|"),
          label: `${handleName(String(node.id), "output", source.id)} → ${handleName(String(c.node), "input", targetHandle.id)}`,
        });
      }));
    });
    return out;
  }

  $("unwire-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const chosen = wireList().find((w) => w.value === $("wire-select").value);
    if (!chosen) return;
    const [outputId, outputClass, inputId, inputClass] = chosen.value.split("|");
    editor.removeSingleConnection(outputId, inputId, outputClass, inputClass);
    announce(`Removed the wire ${chosen.label}.`);
  });

  $("node-select").addEventListener("change", (event) => {
    const dfId = dfIdOf(event.target.value);
    if (dfId) selectNode(dfId);
  });

  $("connect-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const [sourceDf, sourceHandle] = $("connect-from").value.split("|");
    const [targetDf, targetHandle] = $("connect-to").value.split("|");
    if (!sourceDf || !targetDf) return;
    const source = state.types[nodeData(sourceDf).type].outputs.find((h) => h.id === sourceHandle);
    const target = state.types[nodeData(targetDf).type].inputs.find((h) => h.id === targetHandle);
    const label = `${handleName(sourceDf, "output", sourceHandle)} → ${handleName(targetDf, "input", targetHandle)}`;
    let words;
    if (sourceDf === targetDf) {
      words = "Not connected: a node cannot be wired to itself.";
    } else if (source.kind !== target.kind) {
      words = `Not connected: “${source.label}” is a ${source.kind} output and only joins a ${source.kind} input; “${target.label}” takes ${target.kind}.`;
    } else {
      const outCls = dotClass(typeOf(sourceDf), "output", sourceHandle);
      const inCls = dotClass(typeOf(targetDf), "input", targetHandle);
      const already = (getNode(sourceDf).outputs[outCls] || { connections: [] }).connections
        .some((c) => String(c.node) === String(targetDf) && c.output === inCls);
      if (already) words = `Already connected: ${label}.`;
      else {
        connect(sourceDf, sourceHandle, targetDf, targetHandle);
        words = `Connected ${label}.`;
      }
    }
    if (words.startsWith("Not")) banner(words, "warn");
    announce(words);
  });

  // --- live validation --------------------------------------------------------------------------------------------

  function scheduleValidate(delay) {
    clearTimeout(state.validateTimer);
    state.validateTimer = setTimeout(validate, delay === undefined ? config.validateDelayMs : delay);
  }

  async function validate() {
    const seq = ++state.validateSeq;
    const graph = draftGraph();
    try {
      const result = await api("POST", config.api + "validate/", { graph });
      if (seq !== state.validateSeq) return; // a newer draft is being checked
      state.aliases = result.aliases || {};
      state.issues = (result.warnings || []).concat(result.issues || []);
      markIssues();
    } catch (error) {
      if (seq !== state.validateSeq) return;
      state.aliases = {};
      state.issues = ((error.data && error.data.issues) || []).concat(
        error.data && error.data.issues ? [] : [{ code: error.data.code || "invalid_graph", severity: "error", message: error.message }]);
      markIssues();
    }
  }

  function canonical(id) { return state.aliases[id] || id; }

  function markIssues() {
    const byNode = {};
    const byEdge = {};
    state.issues.forEach((issue) => {
      if (issue.node_id) (byNode[issue.node_id] = byNode[issue.node_id] || []).push(issue);
      if (issue.edge_id) (byEdge[issue.edge_id] = byEdge[issue.edge_id] || []).push(issue);
    });
    const data = editor.export().drawflow.Home.data;
    Object.values(data).forEach((node) => {
      const element = $(`node-${node.id}`);
      if (!element) return;
      const found = byNode[canonical(node.data.id)] || [];
      element.classList.toggle("has-error", found.some((i) => i.severity === "error"));
      element.classList.toggle("has-warning", found.length > 0 && !found.some((i) => i.severity === "error"));
      const box = element.querySelector(".node-issues");
      if (box) box.textContent = found.map((i) => i.code).join(" · ");
      element.dataset.issues = found.map((i) => i.code).join(" ");
    });
    document.querySelectorAll("#canvas svg.connection").forEach((svg) => svg.classList.remove("has-error", "has-warning"));
    Object.values(data).forEach((node) => {
      const type = state.types[node.data.type];
      if (!type) return;
      Object.entries(node.outputs).forEach(([cls, output]) => output.connections.forEach((connection) => {
        const target = data[connection.node];
        const source = handleAt(type, "output", cls);
        const targetHandle = handleAt(state.types[target.data.type], "input", connection.output);
        const edgeId = `${canonical(node.data.id)}:${source.id}->${canonical(target.data.id)}:${targetHandle.id}`;
        let found = byEdge[edgeId] || [];
        if (!found.length && source.kind === "context") {
          // Context rules name a node (two Contexts on an agent, one Context on two agents): mark its context wires.
          found = (byNode[canonical(target.data.id)] || []).concat(byNode[canonical(node.data.id)] || [])
            .filter((i) => CONTEXT_CODES.has(i.code));
        }
        if (!found.length) return;
        const svg = document.querySelector(`#canvas svg.connection.node_in_node-${target.id}.node_out_node-${node.id}.${cls}.${connection.output}`);
        if (svg) {
          svg.classList.add(found.some((i) => i.severity === "error") ? "has-error" : "has-warning");
          svg.dataset.issues = found.map((i) => i.code).join(" ");
        }
      }));
    });
    // What concerns the whole graph (no node or wire to mark, e.g. nothing answers the chat) sits on the canvas.
    const overall = $("canvas-issues");
    overall.textContent = "";
    state.issues.filter((i) => i.severity === "error" && !i.edge_id && (!i.node_id || i.code === "NO_ANSWERING_AGENT"))
      .forEach((i) => overall.append(el("li", { "data-code": i.code }, i.message)));
    overall.hidden = !overall.children.length;
    $("canvas").style.top = overall.hidden ? "" : `${overall.offsetHeight}px`;
    const reverse = {};
    Object.entries(state.aliases).forEach(([from, to]) => { reverse[to] = from; });
    const list = $("issues");
    list.textContent = "";
    if (!state.issues.length) list.append(el("li", { className: "ok" }, "No problems found."));
    state.issues.forEach((issue) => {
      const item = el("li", { className: `issue issue-${issue.severity}`, "data-code": issue.code });
      item.append(el("code", {}, issue.code), document.createTextNode(" " + issue.message));
      const draftId = issue.node_id && (reverse[issue.node_id] || issue.node_id);
      const dfId = draftId && dfIdOf(draftId);
      if (dfId) {
        const show = el("button", { type: "button", className: "link" }, "Show");
        show.addEventListener("click", () => selectNode(dfId));
        item.append(document.createTextNode(" "), show);
      }
      list.append(item);
    });
    showFieldErrors();
  }

  function showFieldErrors() {
    if (!state.form || !state.selectedNode) return;
    const id = canonical(nodeData(state.selectedNode).id);
    const errors = {};
    state.issues.filter((i) => i.node_id === id && i.field).forEach((i) => { errors[i.field] = i.message; });
    state.form.showErrors(errors);
  }

  // --- save ------------------------------------------------------------------------------------------------------

  function handleWriteError(error, prefix) {
    if (error.status === 409 && error.data.code === "revision_conflict") {
      setSaveState("Not saved: changed elsewhere");
      $("conflict-dialog").showModal();
      return;
    }
    if (error.data && Array.isArray(error.data.issues)) {
      state.aliases = error.data.aliases || state.aliases;
      state.issues = error.data.issues;
      markIssues();
      // The sentences, not only the codes: the owner reads what to fix (the Checks list has the details).
      const errors = error.data.issues.filter((i) => i.severity === "error");
      const words = [...new Set(errors.map((i) => i.message))].slice(0, 3).join(" ");
      banner(`${prefix}: ${words || error.message} (${[...new Set(errors.map((i) => i.code))].join(", ")})`, "error");
      return;
    }
    banner(`${prefix}: ${error.message}`, "error");
  }

  async function save() {
    if (state.busy) return false;
    state.busy = true;
    $("save").disabled = true;
    setSaveState("Saving…");
    try {
      const data = await api("PUT", config.api, { graph: draftGraph(), revision: state.workflow.revision });
      state.lastAliases = data.aliases || {};
      remapHistory(state.lastAliases);
      adoptWorkflow(data);
      const notes = (data.warnings || []).map((w) => `${w.code}: ${w.message}`);
      banner(notes.length ? `Saved with warnings — ${notes.join(" ")}` : "Saved.", notes.length ? "warn" : "ok");
      return true;
    } catch (error) {
      setSaveState("Not saved");
      $("save").disabled = false;
      handleWriteError(error, "Not saved");
      return false;
    } finally {
      state.busy = false;
    }
  }

  $("save").addEventListener("click", save);
  $("conflict-dialog").addEventListener("close", () => {
    if ($("conflict-dialog").returnValue === "reload") {
      state.savedGraph = graphKey(draftGraph()); // the owner chose to drop the draft: no unload warning
      window.location.reload();
    }
  });

  window.addEventListener("beforeunload", (event) => {
    if (state.workflow && isDirty()) { event.preventDefault(); event.returnValue = ""; }
  });

  // --- running ------------------------------------------------------------------------------------------------

  async function refreshGenerations() {
    try {
      const rows = await api("GET", config.api + "generations/");
      const list = $("generations");
      list.textContent = "";
      if (!rows.length) list.append(el("li", { className: "empty" }, "Not started yet."));
      rows.slice(0, 10).forEach((g) => list.append(el("li", { className: `gen gen-${g.state}` },
        `#${g.number} ${g.state} (${g.admitted_by}) · ${new Date(g.started_at).toLocaleString()}`)));
    } catch (_) { /* the list is informative only */ }
  }

  function updateRunState() {
    const w = state.workflow;
    const live = w.live_state === "live";
    $("run-state").textContent = live ? `Running: generation ${w.live_generation}. The chat answers with it.`
      : w.live_generation ? `Stopped (last generation ${w.live_generation}). Start to chat again.` : "Never started. Save, then Start to chat.";
    root.dataset.live = live ? "yes" : "no";
    $("start").disabled = false;
    $("stop").disabled = !live;
    $("reset").disabled = false;
    $("save").disabled = !isDirty();
    refreshGenerations();
  }

  async function reloadWorkflow() {
    adoptWorkflow(await api("GET", config.api));
  }

  $("start").addEventListener("click", async () => {
    if (isDirty() && !(await save())) return;
    try {
      const result = await api("POST", config.api + "start/");
      await reloadWorkflow();
      banner(result.created ? `Started generation ${result.generation.number}. Open the chat to talk to it.` : `Already running generation ${result.generation.number} with this graph.`, "ok");
    } catch (error) { handleWriteError(error, "Not started"); }
  });

  $("stop").addEventListener("click", async () => {
    try {
      await api("POST", config.api + "stop/");
      await reloadWorkflow();
      banner("Stopped. The chat answers again after Start.", "ok");
    } catch (error) { handleWriteError(error, "Not stopped"); }
  });

  function readableName(node) {
    // The node's own name; a type's label alone is told apart by its number ("Memory 2"), never by its raw id.
    const title = nodeTitle(node);
    const type = state.types[node.type];
    if (node.params && node.params.name) return title;
    const sameType = (state.workflow.graph.nodes || []).filter((n) => n.type === node.type && !(n.params && n.params.name));
    const number = String(node.id).split(":").pop();
    return sameType.length > 1 && /^\d+$/.test(number) ? `${type ? type.label : title} ${number}` : title;
  }

  function resetSummary() {
    const box = $("reset-body");
    box.textContent = "";
    box.append(el("p", {}, "Reset ends any answer in progress, clears every agent's stored conversation (Context) and the chat thread, and starts a fresh generation."));
    const items = el("ul", { className: "reset-list" });
    (state.workflow.graph.nodes || []).forEach((node) => {
      const type = state.types[node.type];
      if (!type || !type.hasResetHook) return;
      const policy = node.params && node.params.reset_policy;
      const name = `“${readableName(node)}”`;
      if (policy === "keep") items.append(el("li", { "data-node": node.id }, `${name}: reset_policy “keep” — its items are kept.`));
      else if (policy) items.append(el("li", { "data-node": node.id }, `${name}: reset_policy “${policy}” — its items are deleted.`));
      else items.append(el("li", { "data-node": node.id }, `${name}: cleared.`));
    });
    if (items.children.length) box.append(items);
    if (isDirty()) box.append(el("p", { className: "meta" }, "Unsaved changes are not part of the new generation; save first to include them."));
  }

  $("reset").addEventListener("click", () => { resetSummary(); $("reset-dialog").showModal(); });
  $("reset-dialog").addEventListener("close", async () => {
    if ($("reset-dialog").returnValue !== "confirm") return;
    try {
      const result = await api("POST", config.api + "reset/", { expected_generation: state.workflow.live_generation });
      await reloadWorkflow();
      banner(`Reset: generation ${result.previous_generation} ended, generation ${result.generation.number} is live with empty conversations.`, "ok");
    } catch (error) { handleWriteError(error, "Not reset"); }
  });

  $("test-run-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const prompt = $("test-prompt").value.trim();
    if (!prompt) { $("test-prompt").focus(); return; }
    if (isDirty() && !(await save())) return;
    const box = $("test-answer");
    box.hidden = false;
    box.className = "test-answer pending";
    box.textContent = "Running (generation 0)…";
    delete box.dataset.approvals;
    $("test-run").disabled = true;
    try {
      const started = await api("POST", config.api + "test-run/", { prompt });
      let run = null;
      for (let i = 0; ; i += 1) {
        run = await api("GET", started.run_url);
        if (TERMINAL.has(run.state)) break;
        // A call that asks the owner first waits for a decision here (no time limit but its own timeout).
        const waiting = pendingApprovals(run);
        showTestApprovals(waiting);
        if (i >= 600 && !waiting.length) break;
        await new Promise((resolve) => setTimeout(resolve, 500));
      }
      showTestAnswer(run, started.firing_id);
    } catch (error) {
      box.className = "test-answer failed";
      box.textContent = `Test run refused: ${error.message}`;
    } finally {
      $("test-run").disabled = false;
    }
  });

  // The test run's calls that wait for the owner's decision (its teammates' too), as the run detail lists them.
  function pendingApprovals(run) {
    const own = (run.approvals || []).filter((a) => a.state === "pending");
    return own.concat(...(run.delegations || []).map(pendingApprovals));
  }

  function showTestApprovals(waiting) {
    const box = $("test-answer");
    const key = waiting.map((a) => a.id).join(",");
    if (box.dataset.approvals === key) return; // unchanged: keep what the owner is typing
    box.dataset.approvals = key;
    if (!waiting.length) { box.textContent = "Running (generation 0)…"; return; }
    box.textContent = "";
    box.append(el("p", { className: "meta" }, "Waiting for your decision:"));
    waiting.forEach((approval) => {
      const card = el("div", { className: "test-approval", "data-approval": approval.id });
      const title = el("p");
      title.append(el("strong", {}, approval.agent_name), " wants to run ", el("code", {}, approval.tool));
      if (approval.server) title.append(" on ", el("span", { className: "tool-server" }, approval.server));
      let shown = approval.arguments;
      try { shown = JSON.stringify(JSON.parse(approval.arguments), null, 2); } catch (_) { /* shown as sent */ }
      const reason = el("input", { type: "text", maxlength: 2000, "aria-label": `Reason for ${approval.tool} (optional)`, placeholder: "Reason (optional)" });
      const buttons = el("div", { className: "test-approval-actions" });
      [["approve", "Approve"], ["deny", "Deny"]].forEach(([decision, words]) => {
        const button = el("button", { type: "button", className: decision }, words);
        button.addEventListener("click", async () => {
          buttons.querySelectorAll("button").forEach((b) => { b.disabled = true; });
          try {
            await api("POST", `/api/tool-approvals/${encodeURIComponent(approval.id)}/decision/`, { decision, reason: reason.value });
            card.replaceChildren(el("p", { className: "meta" }, decision === "approve" ? `Approved: ${approval.tool} runs now.` : `Declined: the agent is told.`));
          } catch (error) {
            card.append(el("p", { className: "error" }, error.message));
          }
        });
        buttons.append(button);
      });
      card.append(title, el("pre", { className: "tool-io" }, shown), reason, buttons);
      box.append(card);
    });
  }

  function showTestAnswer(run, firingId) {
    const box = $("test-answer");
    box.textContent = "";
    const ok = run && run.state === "finished";
    box.className = `test-answer ${ok ? "done" : "failed"}`;
    box.append(el("p", { className: "meta" }, ok ? `Answer (${run.steps.length} step${run.steps.length === 1 ? "" : "s"}, ${run.tool_calls.length} tool call${run.tool_calls.length === 1 ? "" : "s"}):`
      : `The test run ended: ${run ? run.state : "no answer"} ${run && run.error_code ? "(" + run.error_code + ")" : ""}`));
    if (run && run.answer) box.append(el("div", { className: "answer-text" }, run.answer));
    if (run && run.error_message) box.append(el("p", { className: "error" }, run.error_message));
    box.append(el("a", { href: `${config.runsUrl}${firingId}/` }, "Details in the run history"));
  }

  // --- start -----------------------------------------------------------------------------------------------------

  async function boot() {
    try {
      const [catalogue, workflow] = await Promise.all([api("GET", config.nodeTypesUrl), api("GET", config.api)]);
      catalogue.types.forEach((type) => { state.types[type.type] = type; });
      state.providers = catalogue.providers;
      renderPalette();
      adoptWorkflow(workflow, { history: "reset" });
      fitView();
      const warnings = (workflow.warnings || []).filter((w) => w.severity === "warning");
      if (warnings.length) banner(`Loaded with warnings — ${warnings.map((w) => w.code).join(", ")}`, "warn");
      root.dataset.state = "ready";
    } catch (error) {
      banner(`The editor could not load: ${error.message}`, "error");
      root.dataset.state = "error";
    }
  }

  // --- rename in place ------------------------------------------------------------------------------------------

  function showRename(open) {
    $("rename-form").hidden = !open;
    $("workflow-name").hidden = open;
    $("rename").hidden = open;
    if (open) { $("rename-input").value = state.workflow.name; $("rename-input").select(); $("rename-input").focus(); }
    else $("rename").focus();
  }
  $("rename").addEventListener("click", () => showRename(true));
  $("rename-cancel").addEventListener("click", () => showRename(false));
  $("rename-input").addEventListener("keydown", (event) => { if (event.key === "Escape") showRename(false); });
  $("rename-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const response = await fetch(config.renameUrl, {
      method: "POST",
      credentials: "same-origin",
      headers: { "X-CSRFToken": csrfToken(), Accept: "application/json" },
      body: new URLSearchParams({ name: $("rename-input").value }),
    });
    const data = await response.json().catch(() => ({}));
    if (!response.ok) { banner(`Not renamed: ${data.message || response.status}`, "error"); return; }
    state.workflow.name = data.name;
    $("workflow-name").textContent = data.name;
    $("workflow-name").title = data.name;
    document.title = document.title.replace(/^[^·]*·/, `${data.name} ·`);
    showRename(false);
    banner("Renamed.", "ok");
  });

  $("zoom-in").addEventListener("click", () => editor.zoom_in());
  $("zoom-out").addEventListener("click", () => editor.zoom_out());
  function fitView() {
    // Bring every node into view (zooming out down to half size if needed). Drawflow scales the canvas about its
    // centre, so the translation that puts the graph's corner at the margin accounts for that.
    const nodes = allNodes();
    if (!nodes.length) return;
    const width = editor.precanvas.clientWidth;
    const height = editor.precanvas.clientHeight;
    const margin = 24;
    const boxes = nodes.map((n) => {
      const element = $(`node-${n.id}`);
      return { x: n.pos_x, y: n.pos_y, w: element ? element.offsetWidth : 250, h: element ? element.offsetHeight : 90 };
    });
    const minX = Math.min(...boxes.map((b) => b.x)) - 30;
    const minY = Math.min(...boxes.map((b) => b.y));
    const maxX = Math.max(...boxes.map((b) => b.x + b.w)) + 10;
    const maxY = Math.max(...boxes.map((b) => b.y + b.h));
    const zoom = Math.max(0.5, Math.min(1, (width - 2 * margin) / (maxX - minX), (height - 2 * margin) / (maxY - minY)));
    editor.zoom = zoom;
    editor.zoom_last_value = zoom;
    editor.canvas_x = margin - width / 2 - (minX - width / 2) * zoom;
    editor.canvas_y = margin - height / 2 - (minY - height / 2) * zoom;
    editor.precanvas.style.transform = `translate(${editor.canvas_x}px, ${editor.canvas_y}px) scale(${zoom})`;
  }

  $("zoom-reset").addEventListener("click", fitView);

  boot();
})();
