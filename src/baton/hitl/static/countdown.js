// baton inbox and console: the time left until a request expires, kept current once a second.
// Served same-origin from /inbox/static/countdown.js (the CSP runs no inline script). An element with
// data-expires-epoch (seconds since the epoch, UTC) shows "4 min 32 s"; the absolute UTC time beside it
// is the fallback without script. Past the expiry it reads "expired" (the server has refused decisions).
(function () {
  "use strict";
  function format(left) {
    var days = Math.floor(left / 86400), hours = Math.floor((left % 86400) / 3600);
    var minutes = Math.floor((left % 3600) / 60), seconds = left % 60;
    if (days) { return days + " d " + hours + " h"; }
    if (hours) { return hours + " h " + minutes + " min"; }
    if (minutes) { return minutes + " min " + seconds + " s"; }
    return seconds + " s";
  }
  var items = document.querySelectorAll("[data-expires-epoch]");
  if (!items.length) { return; }
  function tick() {
    var now = Date.now() / 1000;
    for (var i = 0; i < items.length; i++) {
      var el = items[i];
      var left = Math.floor(Number(el.getAttribute("data-expires-epoch")) - now);
      el.textContent = left > 0 ? format(left) : "expired";
      el.classList.toggle("soon", left <= 60);
      el.setAttribute("data-ticking", "1");
    }
  }
  tick();
  window.setInterval(tick, 1000);
})();
