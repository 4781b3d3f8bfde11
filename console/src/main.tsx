/**
 * The console's entry (index.html loads it; docs/console.md): reads config.json, signs in (or completes
 * the sign-in on the redirect URI), then renders the shell. Nothing runs inline in the page.
 */
import { render } from "preact";
import { createApi } from "./api.ts";
import { Auth } from "./auth.ts";
import { loadConfig } from "./config.ts";
import { Shell } from "./shell.tsx";
import "./styles.css";

async function start(root: HTMLElement): Promise<void> {
  const config = await loadConfig();
  if (location.pathname === `${config.basePath}/` && Auth.justSignedOut()) {
    history.replaceState(null, "", `${config.basePath}/`);
    render(<SignedOut />, root);
    return;
  }
  const auth = await Auth.discover(config);
  if (location.pathname === `${config.basePath}/callback`) {
    const returnTo = await auth.completeSignIn();
    history.replaceState(null, "", returnTo); // the code and state leave the address bar and the history
  } else {
    await auth.signIn();
  }
  render(<Shell auth={auth} api={createApi(auth)} basePath={config.basePath} />, root);
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
  render(
    <main class="signed-out">
      <h1>Platform Console</h1>
      <p role="alert">The console could not start: {error.message}</p>
      <p>
        <a href="/ui/console/">Try again</a>
      </p>
    </main>,
    root,
  );
});
