/**
 * The console's entry (index.html loads it; docs/console.md): reads config.json, signs in (or completes
 * the sign-in on the redirect URI), then renders the shell. Nothing runs inline in the page.
 */
import { type ComponentChild, render } from "preact";
import { createApi } from "./api.ts";
import { Auth } from "./auth.ts";
import { loadConfig } from "./config.ts";
import { Shell } from "./shell.tsx";
import "./styles.css";

/** Replaces the page's content (index.html's loading notice, or an earlier screen) with `content`. */
function show(root: HTMLElement, content: ComponentChild): void {
  render(null, root);
  root.replaceChildren();
  render(content, root);
}

async function start(root: HTMLElement): Promise<void> {
  const config = await loadConfig();
  if (location.pathname === `${config.basePath}/` && Auth.justSignedOut()) {
    history.replaceState(null, "", `${config.basePath}/`);
    show(root, <SignedOut />);
    return;
  }
  const auth = await Auth.discover(config);
  if (location.pathname === `${config.basePath}/callback`) {
    const returnTo = await auth.completeSignIn();
    history.replaceState(null, "", returnTo); // the code and state leave the address bar and the history
  } else {
    await auth.signIn();
  }
  show(root, <Shell auth={auth} api={createApi(auth)} basePath={config.basePath} />);
}

function SignedOut() {
  return (
    <main class="signed-out">
      <h1>Platform Console</h1>
      <p>You have signed out.</p>
      <p>
        <a href="/ui/console/">Sign in again</a>
      </p>
    </main>
  );
}

const root = document.getElementById("app")!;
start(root).catch((error: Error) => {
  show(
    root,
    <main class="signed-out">
      <h1>Platform Console</h1>
      <p role="alert">The console could not start: {error.message}</p>
      <p>
        <a href="/ui/console/">Try again</a>
      </p>
    </main>,
  );
});
