// The Context panel: two small charts (uPlot, vendored) and a reload when the agent's conversation changes.
(function () {
  "use strict";

  const live = document.getElementById("ctx-live");
  if (live) {
    // The event carries metadata only; the page refetches through its own authorized handler (a reload).
    const scheme = location.protocol === "https:" ? "wss://" : "ws://";
    try {
      const socket = new WebSocket(scheme + location.host + live.dataset.socket);
      socket.addEventListener("message", (message) => {
        let event;
        try { event = JSON.parse(message.data); } catch (e) { return; }
        if (event.type === "context.updated" && event.agent_node_id === live.dataset.agent
          && String(event.generation) === live.dataset.generation) location.reload();
      });
    } catch (e) { /* the page works without live updates */ }
  }

  const data = document.getElementById("ctx-charts");
  if (!data || !window.uPlot) return;
  const charts = JSON.parse(data.textContent);
  const css = getComputedStyle(document.documentElement);
  const color = (name, fallback) => (css.getPropertyValue(name) || fallback).trim();
  const ink = color("--muted", "#5b6475");
  const grid = color("--line", "#dfe3ea");
  const axis = { stroke: ink, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid, width: 1 } };
  const numbers = (u, values) => values.map((v) => (v >= 1000 ? (v / 1000).toFixed(v >= 10000 ? 0 : 1) + "k" : String(v)));

  function width(element) { return Math.max(280, element.clientWidth || 600); }

  const sizeEl = document.getElementById("chart-size");
  const calls = charts.calls;
  const x = calls.map((_, i) => i + 1);
  const sent = calls.map((c) => c.input_tokens);
  const series = [{ label: "Model call" }, { label: "Tokens sent", stroke: color("--accent", "#2f5bd3"), width: 2, fill: "rgba(47,91,211,.08)" }];
  const columns = [x, sent];
  if (charts.window) {
    series.push({ label: "Window", stroke: color("--err", "#b3261e"), width: 1.5, dash: [6, 4] });
    columns.push(x.map(() => charts.window));
  }
  const sizePlot = new uPlot({
    width: width(sizeEl), height: 220,
    scales: { x: { time: false }, y: { range: (u, min, max) => [0, Math.max(max, 10) * 1.08] } },
    axes: [{ ...axis, label: "Model call" }, { ...axis, values: numbers, size: 56 }],
    series,
  }, columns, sizeEl);

  const daysEl = document.getElementById("chart-days");
  const days = charts.days;
  const dayX = days.map((d) => Date.parse(d.day + "T12:00:00Z") / 1000);
  const daySeries = [
    {},
    { label: "Tokens read", stroke: color("--accent", "#2f5bd3"), width: 2, points: { show: true, size: 6 } },
    { label: "Tokens written", stroke: color("--agent", "#2f9e6e"), width: 2, points: { show: true, size: 6 } },
  ];
  const dayColumns = [dayX, days.map((d) => d.input_tokens), days.map((d) => d.output_tokens)];
  const dayAxes = [{ ...axis }, { ...axis, values: numbers, size: 56 }];
  if (days.some((d) => d.cost != null)) {
    daySeries.push({ label: "Cost ($)", stroke: color("--warn-ink", "#8a5300"), width: 2, scale: "usd", points: { show: true, size: 6 } });
    dayColumns.push(days.map((d) => d.cost));
    dayAxes.push({ ...axis, scale: "usd", side: 1, grid: { show: false }, values: (u, v) => v.map((n) => "$" + n.toFixed(2)), size: 60 });
  }
  const dayPlot = new uPlot({ width: width(daysEl), height: 200, series: daySeries, axes: dayAxes, scales: { usd: { auto: true } } },
    dayColumns, daysEl);

  window.addEventListener("resize", () => {
    sizePlot.setSize({ width: width(sizeEl), height: 220 });
    dayPlot.setSize({ width: width(daysEl), height: 200 });
  });
})();
