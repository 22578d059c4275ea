// baton inbox: the WebAuthn ceremonies (passkey enrollment, login and step-up).
// Served same-origin from /inbox/static/passkey.js; the pages hold no inline script. A form with
// data-passkey="create" or "get" carries the server's options in data-options; on submit this script
// runs navigator.credentials.create/get, puts the credential (JSON) in the form's "credential" field
// and submits the form as usual. A button with data-passkey="skip" (reject, decline) submits at once.
"use strict";

(function () {
  function fromB64url(text) {
    const b64 = text.replace(/-/g, "+").replace(/_/g, "/") + "===".slice((text.length + 3) % 4);
    const raw = atob(b64);
    const bytes = new Uint8Array(raw.length);
    for (let i = 0; i < raw.length; i++) bytes[i] = raw.charCodeAt(i);
    return bytes.buffer;
  }

  function toB64url(buffer) {
    const bytes = new Uint8Array(buffer);
    let raw = "";
    for (let i = 0; i < bytes.length; i++) raw += String.fromCharCode(bytes[i]);
    return btoa(raw).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  }

  function descriptors(list) {
    return (list || []).map(function (d) { return Object.assign({}, d, { id: fromB64url(d.id) }); });
  }

  function creationOptions(o) {
    return Object.assign({}, o, {
      challenge: fromB64url(o.challenge),
      user: Object.assign({}, o.user, { id: fromB64url(o.user.id) }),
      excludeCredentials: descriptors(o.excludeCredentials),
    });
  }

  function requestOptions(o) {
    return Object.assign({}, o, {
      challenge: fromB64url(o.challenge),
      allowCredentials: descriptors(o.allowCredentials),
    });
  }

  function credentialJSON(c) {
    const r = c.response;
    const response = { clientDataJSON: toB64url(r.clientDataJSON) };
    if (r.attestationObject) {
      response.attestationObject = toB64url(r.attestationObject);
      response.transports = r.getTransports ? r.getTransports() : [];
    } else {
      response.authenticatorData = toB64url(r.authenticatorData);
      response.signature = toB64url(r.signature);
      if (r.userHandle) response.userHandle = toB64url(r.userHandle);
    }
    return {
      id: c.id,
      rawId: toB64url(c.rawId),
      type: c.type,
      response: response,
      clientExtensionResults: c.getClientExtensionResults ? c.getClientExtensionResults() : {},
      authenticatorAttachment: c.authenticatorAttachment || undefined,
    };
  }

  function say(form, text) {
    const status = form.querySelector("[data-passkey-status]");
    if (status) status.textContent = text;
  }

  async function ceremony(form, submitter) {
    const options = JSON.parse(form.dataset.options);
    say(form, "Waiting for your passkey…");
    try {
      const credential = form.dataset.passkey === "create"
        ? await navigator.credentials.create({ publicKey: creationOptions(options) })
        : await navigator.credentials.get({ publicKey: requestOptions(options) });
      form.elements.credential.value = JSON.stringify(credentialJSON(credential));
    } catch (error) {
      if (error.name === "SecurityError" && /^[0-9.]+$|:/.test(location.hostname)) {
        say(form, "Passkeys need a host name, not an IP address: open http://localhost" +
          (location.port ? ":" + location.port : "") + location.pathname + location.search + " instead.");
        return;
      }
      say(form, "The passkey was not used (" + error.name + "). Nothing was sent.");
      return;
    }
    if (submitter && submitter.name) {
      const chosen = document.createElement("input");
      chosen.type = "hidden";
      chosen.name = submitter.name;
      chosen.value = submitter.value;
      form.appendChild(chosen);
    }
    say(form, "Checking…");
    form.submit();
  }

  document.querySelectorAll("form[data-passkey]").forEach(function (form) {
    form.addEventListener("submit", function (event) {
      const submitter = event.submitter;
      if (submitter && submitter.dataset.passkey === "skip") return;
      event.preventDefault();
      if (!window.PublicKeyCredential) {
        say(form, "This browser cannot use passkeys.");
        return;
      }
      ceremony(form, submitter);
    });
  });
})();
