// Times on the owner's pages in the owner's own time zone: every <time class="local-time" datetime="…"> is
// rewritten from the server's UTC words to local ones (the full date and time stay in the tooltip).
(function () {
  "use strict";
  const short = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "short" });
  const full = new Intl.DateTimeFormat(undefined, { dateStyle: "full", timeStyle: "long" });
  for (const element of document.querySelectorAll("time.local-time[datetime]")) {
    const when = new Date(element.getAttribute("datetime"));
    if (Number.isNaN(when.getTime())) continue;
    element.textContent = short.format(when);
    element.title = full.format(when);
  }
})();
