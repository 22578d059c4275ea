// baton inbox and console: live updates over server-sent events (/inbox/events).
// The tab title shows how many requests wait; a list page reloads when the store changed, and a page
// where a person may be typing shows a "changed" bar instead of reloading under them.
(function () {
  "use strict";
  var body = document.body;
  var version = Number(body.getAttribute("data-version") || "0");
  var reloads = body.getAttribute("data-live") === "reload";
  var baseTitle = document.title.replace(/^\(\d+\+?\) /, "");
  var bar = document.getElementById("live-bar");
  function typing() {
    var el = document.activeElement;
    return !!el && (el.tagName === "TEXTAREA" || (el.tagName === "INPUT" && el.type !== "submit")) && !!el.value;
  }
  var source = new EventSource("/inbox/events");
  source.addEventListener("state", function (event) {
    var state = JSON.parse(event.data);
    var count = String(state.pending) + (state.pending_exact === false ? "+" : "");
    document.title = (state.pending > 0 ? "(" + count + ") " : "") + baseTitle;
    var counter = document.getElementById("pending-count");
    if (counter) { counter.textContent = count; }
    if (state.version !== version) {
      if (reloads && !typing()) { window.location.reload(); return; }
      if (bar) { bar.hidden = false; }
    }
  });
})();
