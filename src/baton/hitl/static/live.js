// baton inbox and console: live updates over server-sent events (/inbox/events).
// The tab title shows how many requests wait; a list page reloads when the store changed, and a page
// where a person may be typing shows a "changed" bar instead of reloading under them. A request's page
// follows that request alone: once someone decided it, its buttons give way to who decided and what.
(function () {
  "use strict";
  var body = document.body;
  var version = Number(body.getAttribute("data-version") || "0");
  var reloads = body.getAttribute("data-live") === "reload";
  var requestId = body.getAttribute("data-request-id");
  var seen = body.getAttribute("data-request-state");
  var baseTitle = document.title.replace(/^\(\d+\+?\) /, "");
  var bar = document.getElementById("live-bar");
  function typing() {
    var el = document.activeElement;
    return !!el && (el.tagName === "TEXTAREA" || (el.tagName === "INPUT" && el.type !== "submit")) && !!el.value;
  }
  function said(request) {
    var count = request.approvals.length + " of " + request.required_approvals;
    if (request.status === "pending") {
      return "Approved so far by " + request.approvals.join(", ") + " (" + count + " counted); still pending.";
    }
    var who = request.decided_by || (request.status === "expired" ? "nobody" : "someone");
    return "Already decided by " + who + ": " + request.status + ". Nothing you do here changes it; reload for the details.";
  }
  function follow(request) {
    var now = request.status + ":" + request.approvals.length;
    if (now === seen) { return; }
    seen = now;
    var note = document.getElementById("live-outcome") || document.createElement("p");
    note.id = "live-outcome";
    note.className = "rq-told told";
    note.setAttribute("role", "status");
    note.textContent = said(request);
    var form = document.getElementById("decide");
    if (form && request.status !== "pending") { form.replaceWith(note); return; }
    var quorum = document.querySelectorAll(".quorum");
    for (var i = 0; i < quorum.length; i++) { quorum[i].textContent = request.approvals.length + " of " + request.required_approvals; }
    if (form) { form.parentNode.insertBefore(note, form); }
  }
  var source = new EventSource("/inbox/events" + (requestId ? "?request=" + encodeURIComponent(requestId) : ""));
  source.addEventListener("state", function (event) {
    var state = JSON.parse(event.data);
    var count = String(state.pending) + (state.pending_exact === false ? "+" : "");
    document.title = (state.pending > 0 ? "(" + count + ") " : "") + baseTitle;
    var counter = document.getElementById("pending-count");
    if (counter) { counter.textContent = count; }
    if (requestId && state.request) { follow(state.request); return; }
    if (state.version !== version) {
      if (reloads && !typing()) { window.location.reload(); return; }
      if (bar) { bar.hidden = false; }
    }
  });
})();
