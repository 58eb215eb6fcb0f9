// The Context panel: two small charts (uPlot, vendored) and a reload when the agent's conversation changes.
(function () {
  "use strict";

  const live = document.getElementById("ctx-live");
  let leaving = false; // a form is being sent: its answer is the next page, a reload would cancel it
  document.addEventListener("submit", (event) => { if (!event.defaultPrevented) leaving = true; });
  if (live) {
    // The event carries metadata only; the page refetches through its own authorized handler (a reload).
    const scheme = location.protocol === "https:" ? "wss://" : "ws://";
    try {
      const socket = new WebSocket(scheme + location.host + live.dataset.socket);
      socket.addEventListener("message", (message) => {
        let event;
        try { event = JSON.parse(message.data); } catch (e) { return; }
        if (event.type === "context.updated" && event.agent_node_id === live.dataset.agent
          && String(event.generation) === live.dataset.generation && !leaving) location.reload();
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
    axes: [{ ...axis, label: "Model call", incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500] }, { ...axis, values: numbers, size: 56 }],
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
  const dayLabel = new Intl.DateTimeFormat(undefined, { month: "short", day: "numeric", timeZone: "UTC" });
  const dayAxes = [
    { ...axis, incrs: [86400, 2 * 86400, 7 * 86400, 14 * 86400], values: (u, splits) => splits.map((s) => dayLabel.format(new Date(s * 1000))) },
    { ...axis, values: numbers, size: 56 },
  ];
  if (days.some((d) => d.cost)) {
    daySeries.push({ label: "Cost ($)", stroke: color("--warn-ink", "#8a5300"), width: 2, scale: "usd", points: { show: true, size: 6 } });
    dayColumns.push(days.map((d) => d.cost));
    dayAxes.push({ ...axis, scale: "usd", side: 1, grid: { show: false }, values: (u, v) => v.map((n) => "$" + n.toFixed(2)), size: 60 });
  }
  // At least a week wide, so a single day is a point in a week, not in years.
  const DAY = 86400;
  const first = Math.min(...dayX), last = Math.max(...dayX);
  const span = Math.max(last - first, 6 * DAY);
  const xRange = [last - span - DAY / 2, last + DAY / 2];
  const dayPlot = new uPlot({
    width: width(daysEl), height: 200, series: daySeries, axes: dayAxes,
    scales: { x: { time: true, range: () => xRange }, y: { range: (u, min, max) => [0, Math.max(max, 10) * 1.08] }, usd: { auto: true } },
  }, dayColumns, daysEl);

  window.addEventListener("resize", () => {
    sizePlot.setSize({ width: width(sizeEl), height: 220 });
    dayPlot.setSize({ width: width(daysEl), height: 200 });
  });
})();
