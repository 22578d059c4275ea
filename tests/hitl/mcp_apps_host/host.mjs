// A minimal MCP Apps host for baton's card tests, made of the SDK's own host pieces: AppBridge and
// PostMessageTransport from @modelcontextprotocol/ext-apps. Its MCP side is the test's official Python MCP
// client, reached through bindings the test exposes (hostCallTool, hostReadResource, hostOpenLink, hostSaw).
import {
  AppBridge,
  PostMessageTransport,
  RESOURCE_MIME_TYPE,
  getToolUiResourceUri,
} from "@modelcontextprotocol/ext-apps/app-bridge";

// The spec's mapping of a resource's _meta.ui.csp to a policy; with no domains the card gets no network.
function policy(csp) {
  const resources = (csp && csp.resourceDomains) || [];
  const connect = (csp && csp.connectDomains) || [];
  const frames = (csp && csp.frameDomains) || [];
  const list = (extra) => extra.join(" ");
  return [
    "default-src 'none'",
    `script-src 'unsafe-inline' ${list(resources)}`,
    `style-src 'unsafe-inline' ${list(resources)}`,
    `img-src data: ${list(resources)}`,
    `font-src ${list(resources) || "'none'"}`,
    `connect-src ${list(connect) || "'none'"}`,
    `frame-src ${list(frames) || "'none'"}`,
    "base-uri 'none'",
    "form-action 'none'",
  ].join("; ");
}

function withPolicy(html, csp) {
  const meta = `<meta http-equiv="Content-Security-Policy" content="${policy(csp)}">`;
  return html.replace(/<head>/i, `<head>${meta}`);
}

window.mountCard = async ({ tool, args }) => {
  const uri = getToolUiResourceUri(tool);
  if (!uri) throw new Error(`${tool.name} names no UI resource`);
  const read = await window.hostReadResource({ uri });
  const content = read.contents[0];
  if (content.mimeType !== RESOURCE_MIME_TYPE) throw new Error(`not an app: ${content.mimeType}`);
  document.getElementById("tool-line").textContent = `tools/call ${tool.name} · ${uri}`;
  const iframe = document.createElement("iframe");
  iframe.id = "card";
  iframe.title = "baton request card";
  iframe.setAttribute("sandbox", "allow-scripts");
  iframe.srcdoc = withPolicy(content.text, content._meta?.ui?.csp);
  document.getElementById("chat").append(iframe);
  const bridge = new AppBridge(
    null,
    { name: "baton-test-host", version: "1.0.0" },
    { openLinks: {}, serverTools: {}, serverResources: {}, logging: {}, message: { text: {} }, updateModelContext: { text: {} }, downloadFile: {} },
    { hostContext: { theme: "light", displayMode: "inline", availableDisplayModes: ["inline"], platform: "web", toolInfo: { tool } } },
  );
  bridge.oncalltool = (params) => window.hostCallTool(params);
  bridge.onreadresource = (params) => window.hostReadResource(params);
  bridge.onlistresources = async () => ({ resources: [] });
  bridge.onopenlink = async (params) => { await window.hostOpenLink(params.url); return {}; };
  bridge.onmessage = async (params) => { await window.hostSaw("ui/message", params); return {}; };
  bridge.onupdatemodelcontext = async (params) => { await window.hostSaw("ui/update-model-context", params); return {}; };
  bridge.ondownloadfile = async (params) => { await window.hostSaw("ui/download-file", params); return { isError: true }; };
  bridge.onrequestdisplaymode = async () => ({ mode: "inline" });
  bridge.onrequestteardown = (params) => { window.hostSaw("ui/notifications/request-teardown", params ?? {}); };
  bridge.onloggingmessage = (params) => { window.hostSaw("notifications/message", params); };
  bridge.onsizechange = ({ height }) => { if (height) iframe.style.height = `${height + 2}px`; };
  const initialized = new Promise((resolve) => { bridge.oninitialized = resolve; });
  await bridge.connect(new PostMessageTransport(iframe.contentWindow, iframe.contentWindow));
  await initialized;
  await bridge.sendToolInput({ arguments: args });
  window.cardBridge = bridge;
};

window.sendToolResult = (result) => window.cardBridge.sendToolResult(result);
window.hostReady = true;
