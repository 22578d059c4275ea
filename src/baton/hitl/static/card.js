// baton's request card for MCP Apps hosts (docs/apps.md): JSON-RPC 2.0 over postMessage with the host
// (ui/initialize, then the host's tool-input and tool-result notifications). The request is read through
// the host with tools/call of the read-only mcp_list_pending_requests and mcp_get_request_status; every
// piece of agent text goes in through textContent, never as markup. The card decides nothing: its button
// asks the host (ui/open-link) to open the request's page at baton's own origin.
(function () {
  "use strict";
  var config = JSON.parse(document.getElementById("baton-config").textContent);
  var PROTOCOL = "2026-01-26";
  var FINAL = { approved: 1, rejected: 1, answered: 1, expired: 1 };
  var state = { kind: null, args: null, requestId: null, view: null, result: null, host: {}, cancelled: false };
  var pending = {};
  var nextId = 1;
  var pollTimer = null;
  var locateTimer = null;

  function $(id) { return document.getElementById(id); }
  function setText(id, text) { $(id).textContent = text == null ? "" : String(text); }
  function show(id, on) { $(id).hidden = !on; }

  function send(message) {
    message.jsonrpc = "2.0";
    window.parent.postMessage(message, "*");
  }
  function request(method, params) {
    var id = nextId++;
    return new Promise(function (resolve, reject) {
      pending[id] = { resolve: resolve, reject: reject };
      send({ id: id, method: method, params: params });
    });
  }
  function notify(method, params) { send({ method: method, params: params }); }

  function callTool(name, args) {
    return request("tools/call", { name: name, arguments: args }).then(function (result) {
      return (result && result.structuredContent) || {};
    });
  }

  // ---- what the card shows --------------------------------------------------------------------------
  function kindOf() {
    if (state.view) { return state.view.kind; }
    if (state.kind) { return state.kind; }
    if (state.args && "question" in state.args) { return "input"; }
    return "approval";
  }
  function messageOf() {
    if (state.view) { return state.view.message; }
    if (!state.args) { return ""; }
    return kindOf() === "input" ? state.args.question : state.args.request_message;
  }
  function contextOf() {
    if (state.view) { return state.view.context; }
    return state.args ? (state.args.context === undefined ? null : state.args.context) : null;
  }
  function statusOf() {
    if (state.view) { return state.view.status; }
    if (state.result && state.result.status) { return state.result.status; }
    if (state.result && !state.requestId) { return "failed"; }
    return state.cancelled ? "cancelled" : "pending";
  }

  function format(left) {
    var days = Math.floor(left / 86400), hours = Math.floor((left % 86400) / 3600);
    var minutes = Math.floor((left % 3600) / 60), seconds = left % 60;
    if (days) { return days + " d " + hours + " h"; }
    if (hours) { return hours + " h " + minutes + " min"; }
    if (minutes) { return minutes + " min " + seconds + " s"; }
    return seconds + " s";
  }
  function countdown() {
    var view = state.view;
    if (!view || statusOf() !== "pending") { return ""; }
    var left = Math.floor(Date.parse(view.expires_at) / 1000 - Date.now() / 1000);
    return left > 0 ? format(left) : "expired";
  }

  function chip(text, tone, id) {
    var el = document.createElement("span");
    el.className = "rq-chip " + (tone || "");
    if (id) { el.id = id; }
    el.textContent = text;
    return el;
  }
  function renderChips() {
    var box = $("chips"), view = state.view || {}, args = state.args || {};
    box.replaceChildren();
    if (view.urgent || args.urgent) { box.append(chip("URGENT", "bad", "chip-urgent")); }
    if (view.step_up || args.step_up) { box.append(chip("passkey step-up", "info", "chip-step-up")); }
    var needed = view.required_approvals || args.required_approvals || 1;
    if (needed > 1) { box.append(chip((view.approvals || []).length + " of " + needed, "warn", "chip-quorum")); }
    box.append(chip(kindOf(), "", "chip-kind"));
    var risk = "Risk: the agent's own request, not a governed tool call: no adapter risk class or tool " +
      "annotations apply.";
    if (view.step_up || args.step_up) { risk += " Approving needs a passkey step-up."; }
    if (needed > 1) { risk += " " + needed + " people must approve; one rejection rejects."; }
    setText("risk", risk);
  }
  function when(iso) {
    var at = new Date(iso);
    return isNaN(at.getTime()) ? String(iso) : at.toISOString().slice(0, 16).replace("T", " ") + " UTC";
  }
  function renderAsked() {
    var el = $("asked"), view = state.view;
    el.replaceChildren();
    if (!view) { el.textContent = state.requestId ? "" : "Looking for this call's request at baton…"; return; }
    var who = document.createElement("b");
    who.id = "agent";
    who.textContent = view.agent || "an unnamed agent";
    el.append("Asked by ", who);
    var left = countdown();
    if (left) {
      var clock = document.createElement("span");
      clock.className = "rq-countdown";
      clock.id = "countdown";
      clock.textContent = left;
      el.append(" · expires in ", clock, " (" + when(view.expires_at) + ")");
    }
  }
  function renderContext() {
    var context = contextOf(), options = (state.view && state.view.options) || (state.args && state.args.options);
    setText("context-json", context == null ? "None given." : JSON.stringify(context, null, 2));
    var list = $("options");
    list.replaceChildren();
    (options || []).forEach(function (option) {
      var item = document.createElement("li");
      item.textContent = option;
      list.append(item);
    });
    show("options", !!(options && options.length));
    show("options-title", !!(options && options.length));
    var digest = state.view && state.view.arguments_sha256;
    setText("digest", digest || "");
    show("digest-line", !!digest);
  }
  function renderOutcome() {
    var status = statusOf(), view = state.view || state.result || {};
    var final = !!FINAL[status] || status === "cancelled" || status === "failed";
    show("outcome", final);
    show("decision", !final);
    if (!final) { return; }
    setText("outcome-status", status);
    $("outcome-status").className = "rq-status " + status;
    var by = "";
    if (view.decided_by) { by = "by " + view.decided_by + (view.decided_via ? " via " + view.decided_via : ""); }
    if (view.responded_at) { by += (by ? " at " : "at ") + when(view.responded_at); }
    if (status === "expired") { by = "nobody decided in time; nothing was approved"; }
    if (status === "cancelled") { by = "the host cancelled the call; the request may still be pending at baton"; }
    if (status === "failed") { by = "the call made no request: " + (view.error || "no reason given"); }
    setText("outcome-by", by);
    setText("answer", view.response || "");
    show("outcome-answer", !!view.response);
    setText("notes", view.admin_notes || "");
    show("outcome-notes", !!view.admin_notes);
  }
  function renderDecision() {
    var id = state.requestId, button = $("open-decision");
    button.textContent = kindOf() === "input" ? "Answer at baton" : "Decide at baton";
    button.disabled = !(id && config.decide_base && state.host.openLinks);
    if (id && config.decide_base && !state.host.openLinks) {  // a host that opens no links: the address to copy
      setText("decision-url", config.decide_base + "/inbox/requests/" + encodeURIComponent(id));
      show("link-fallback", true);
    }
    show("decide-cli", !!id && !config.decide_base);
    if (id && !config.decide_base) {
      var verb = kindOf() === "input" ? "answer " + id + " TEXT" : "approve " + id;
      setText("cli-command", "baton hitl " + verb);
    }
  }
  function render() {
    var status = statusOf();
    setText("kind", kindOf() === "input" ? "Question" : "Approval");
    setText("request-id", state.requestId || "finding the request…");
    setText("state", status === "pending" ? "waiting for a person" : status);
    $("state").className = "rq-status card-state " + status;
    setText("message", messageOf());
    renderChips();
    renderAsked();
    renderContext();
    renderOutcome();
    renderDecision();
  }

  // ---- finding and following the request --------------------------------------------------------------
  function canonical(value) {
    if (Array.isArray(value)) { return "[" + value.map(canonical).join(",") + "]"; }
    if (value && typeof value === "object") {
      return "{" + Object.keys(value).sort().map(function (key) {
        return JSON.stringify(key) + ":" + canonical(value[key]);
      }).join(",") + "}";
    }
    return JSON.stringify(value === undefined ? null : value);
  }
  function matches(row) {
    if (row.kind !== kindOf() || row.message !== messageOf()) { return false; }
    return row.context_truncated || canonical(row.context) === canonical(contextOf());
  }
  function locate() {
    if (state.requestId || state.result || !state.args || !state.host.serverTools) { return; }
    callTool("mcp_list_pending_requests", { limit: 100 }).then(function (page) {
      if (state.requestId || state.result) { return; }
      var found = (page.requests || []).filter(matches).sort(function (a, b) {
        return a.created_at < b.created_at ? 1 : -1;
      });
      if (found.length) { follow(found[0].request_id); } else { locateTimer = window.setTimeout(locate, config.poll_ms); }
    }, function () { locateTimer = window.setTimeout(locate, config.poll_ms); });
  }
  function follow(requestId) {
    state.requestId = requestId;
    window.clearTimeout(locateTimer);
    render();
    refresh();
  }
  function refresh() {
    window.clearTimeout(pollTimer);
    if (!state.requestId || !state.host.serverTools) { return; }
    callTool("mcp_get_request_status", { request_id: state.requestId }).then(function (view) {
      if (view.request_id === state.requestId) { state.view = view; }
      render();
      if (!FINAL[statusOf()]) { pollTimer = window.setTimeout(refresh, config.poll_ms); }
    }, function () { pollTimer = window.setTimeout(refresh, config.poll_ms); });
  }

  function openDecision() {
    var url = config.decide_base + "/inbox/requests/" + encodeURIComponent(state.requestId);
    setText("decision-url", url);
    request("ui/open-link", { url: url }).then(function (result) {
      show("link-fallback", !!(result && result.isError));
    }, function () { show("link-fallback", true); });
  }

  // ---- the host's messages --------------------------------------------------------------------------
  function applyContext(context) {
    if (!context) { return; }
    if (context.theme) { document.documentElement.setAttribute("data-theme", context.theme); }
    var variables = (context.styles && context.styles.variables) || {};
    Object.keys(variables).forEach(function (name) {
      if (/^--[a-z0-9-]+$/.test(name) && typeof variables[name] === "string") {
        document.documentElement.style.setProperty(name, variables[name]);
      }
    });
    var tool = context.toolInfo && context.toolInfo.tool;
    if (tool && tool.name === "mcp_request_admin_input") { state.kind = "input"; }
    if (tool && tool.name === "mcp_request_admin_approval") { state.kind = "approval"; }
  }
  var notifications = {
    "ui/notifications/tool-input": function (params) {
      state.args = params.arguments || {};
      render();
      locate();
    },
    "ui/notifications/tool-result": function (params) {
      var result = params.structuredContent || {};
      state.result = result;
      if (result.request_id && !state.requestId) { follow(result.request_id); return; }
      window.clearTimeout(locateTimer);
      render();
      refresh();
    },
    "ui/notifications/tool-cancelled": function () { state.cancelled = true; render(); },
    "ui/notifications/host-context-changed": function (params) { applyContext(params); render(); }
  };
  function answer(message) {
    if (message.method === "ui/resource-teardown") {
      window.clearTimeout(pollTimer);
      window.clearTimeout(locateTimer);
    }
    if (message.method === "ui/resource-teardown" || message.method === "ping") {
      send({ id: message.id, result: {} });
    } else {
      send({ id: message.id, error: { code: -32601, message: "Method not found" } });
    }
  }
  window.addEventListener("message", function (event) {
    var message = event.data;
    if (event.source !== window.parent || !message || message.jsonrpc !== "2.0") { return; }
    if (message.method === undefined) {
      var waiting = pending[message.id];
      if (!waiting) { return; }
      delete pending[message.id];
      if (message.error) { waiting.reject(message.error); } else { waiting.resolve(message.result); }
    } else if (message.id !== undefined) {
      answer(message);
    } else if (notifications[message.method]) {
      notifications[message.method](message.params || {});
    }
  });

  $("open-decision").addEventListener("click", openDecision);
  new ResizeObserver(function () {
    notify("ui/notifications/size-changed", { height: Math.ceil($("card").getBoundingClientRect().height) });
  }).observe($("card"));
  window.setInterval(function () { if (state.view && statusOf() === "pending") { renderAsked(); } }, 1000);
  render();
  request("ui/initialize", {
    appInfo: { name: "baton-request-card", version: config.version },
    appCapabilities: {},
    protocolVersion: PROTOCOL
  }).then(function (result) {
    state.host = (result && result.hostCapabilities) || {};
    applyContext(result && result.hostContext);
    notify("ui/notifications/initialized", {});
    render();
    locate();
    refresh();
  });
})();
