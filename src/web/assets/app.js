// git orch web: the one script of every page. A page with a live part
// (an element with data-live, the URL of its event stream) gets that part
// replaced by each "update" the server sends: the same HTML the server
// renders for the whole page, escaped there. Nothing else runs here.
"use strict";
(function () {
  const live = document.querySelector("[data-live]");
  if (!live || !window.EventSource) {
    return;
  }
  const source = new EventSource(live.getAttribute("data-live"));
  source.addEventListener("update", function (event) {
    live.innerHTML = event.data;
    document.documentElement.setAttribute("data-updated", String(Date.now()));
  });
  source.addEventListener("error", function () {
    document.documentElement.setAttribute("data-live-state", "reconnecting");
  });
  source.addEventListener("open", function () {
    document.documentElement.setAttribute("data-live-state", "open");
  });
})();
