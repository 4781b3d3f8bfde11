// The login UI's WebAuthn forms (src/login/steps/passkey/, mfa/webauthn.ts, the passkey registrations).
// A form with data-webauthn="create" | "get" | "conditional" carries the server's options (JSON, binary
// fields base64url) in data-options: on submit (at once for "conditional", where the browser offers the
// passkeys in the login name's autofill) it asks the browser, puts the credential as JSON into the form's
// `credential` field and posts the form. A served file, so that the pages' CSP allows it (script-src 'self').
(() => {
  const bytes = (text) => {
    const base64 = text.replace(/-/g, "+").replace(/_/g, "/");
    const padded = base64 + "===".slice((base64.length + 3) % 4);
    return Uint8Array.from(atob(padded), (c) => c.charCodeAt(0));
  };
  const text = (buffer) => {
    let binary = "";
    for (const b of new Uint8Array(buffer)) binary += String.fromCharCode(b);
    return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  };
  const descriptors = (list) => (list || []).map((c) => ({ ...c, id: bytes(c.id) }));
  const creation = (o) => ({
    ...o,
    challenge: bytes(o.challenge),
    user: { ...o.user, id: bytes(o.user.id) },
    excludeCredentials: descriptors(o.excludeCredentials),
  });
  const request = (o) => ({
    ...o,
    challenge: bytes(o.challenge),
    allowCredentials: descriptors(o.allowCredentials),
  });
  const json = (credential) => {
    if (typeof credential.toJSON === "function") return credential.toJSON();
    const r = credential.response;
    const response = { clientDataJSON: text(r.clientDataJSON) };
    if (r.attestationObject) {
      response.attestationObject = text(r.attestationObject);
      if (r.getTransports) response.transports = r.getTransports();
    } else {
      response.authenticatorData = text(r.authenticatorData);
      response.signature = text(r.signature);
      if (r.userHandle) response.userHandle = text(r.userHandle);
    }
    return {
      id: credential.id,
      rawId: text(credential.rawId),
      type: credential.type,
      response,
      clientExtensionResults: credential.getClientExtensionResults(),
      authenticatorAttachment: credential.authenticatorAttachment || undefined,
    };
  };

  for (const form of document.querySelectorAll("form[data-webauthn]")) {
    const mode = form.dataset.webauthn;
    const options = JSON.parse(form.dataset.options);
    const output = form.querySelector('input[name="credential"]');
    const problem = document.getElementById(form.dataset.error || "");
    const run = async (mediation) => {
      const credential =
        mode === "create"
          ? await navigator.credentials.create({ publicKey: creation(options) })
          : await navigator.credentials.get({
              publicKey: request(options),
              ...(mediation ? { mediation } : {}),
            });
      if (!credential) throw new Error("no credential");
      output.value = JSON.stringify(json(credential));
      form.submit();
    };
    const failed = () => {
      if (problem) {
        problem.hidden = false;
        problem.focus();
      }
    };
    if (!window.PublicKeyCredential) {
      failed();
      continue;
    }
    if (mode === "conditional") {
      const available = PublicKeyCredential.isConditionalMediationAvailable;
      if (available)
        available.call(PublicKeyCredential).then((yes) => yes && run("conditional").catch(() => {}));
      continue;
    }
    form.addEventListener("submit", (event) => {
      if (output.value) return;
      event.preventDefault();
      if (problem) problem.hidden = true;
      run().catch(failed);
    });
  }
})();
