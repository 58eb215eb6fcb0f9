// Memory history pages: times in the owner's words ("2 minutes ago", the exact local time on hover). The server
// writes UTC so the page reads right without this script.
(function () {
  "use strict";
  const exact = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "short" });
  const relative = new Intl.RelativeTimeFormat(undefined, { numeric: "auto" });
  function ago(when) {
    const seconds = Math.round((when.getTime() - Date.now()) / 1000);
    const abs = Math.abs(seconds);
    if (abs < 45) return "just now";
    if (abs < 3600) return relative.format(Math.round(seconds / 60), "minute");
    if (abs < 86400) return relative.format(Math.round(seconds / 3600), "hour");
    if (abs < 7 * 86400) return relative.format(Math.round(seconds / 86400), "day");
    return exact.format(when);
  }
  for (const time of document.querySelectorAll("time.local-time")) {
    const when = new Date(time.getAttribute("datetime"));
    if (Number.isNaN(when.getTime())) continue;
    time.title = exact.format(when);
    time.textContent = ago(when);
  }
})();
