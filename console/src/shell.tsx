import type { ComponentType } from "preact";
import { useEffect, useState } from "preact/hooks";
import type { Api } from "./api.ts";
import type { Auth } from "./auth.ts";
import { type Route, routeOf, routes, type ScreenProps } from "./router.ts";

/** The path below the console's base path (`/` for the base itself). */
function consolePath(basePath: string): string {
  const rest = location.pathname.slice(basePath.length);
  return rest === "" ? "/" : rest;
}

/** The shell: header (product, signed-in user, sign out), navigation, and the current screen. */
export function Shell({ auth, api, basePath }: { auth: Auth; api: Api; basePath: string }) {
  const [path, setPath] = useState(() => consolePath(basePath));
  const [screen, setScreen] = useState<{ route: Route; Component: ComponentType<ScreenProps> } | undefined>();
  const [failure, setFailure] = useState<string | undefined>();

  useEffect(() => {
    const onPop = () => setPath(consolePath(basePath));
    addEventListener("popstate", onPop);
    return () => removeEventListener("popstate", onPop);
  }, [basePath]);

  const route = routeOf(path);
  useEffect(() => {
    if (!route) return;
    let current = true;
    setFailure(undefined);
    route.load().then(
      (module) => current && setScreen({ route, Component: module.default }),
      (error: Error) => current && setFailure(error.message),
    );
    document.title = `${route.title} · Platform Console`;
    return () => {
      current = false;
    };
  }, [route]);

  const navigate = (event: MouseEvent, to: string) => {
    if (event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
    event.preventDefault();
    history.pushState(null, "", `${basePath}${to}`);
    setPath(to);
  };

  return (
    <div class="shell">
      <header class="header">
        <span class="product">Platform Console</span>
        <span class="user" data-testid="user-name">
          {auth.user?.name}
        </span>
        <button type="button" class="sign-out" onClick={() => auth.signOut()}>
          Sign out
        </button>
      </header>
      <nav class="nav" aria-label="Console">
        <ul>
          {routes.map((r) => (
            <li key={r.path}>
              <a
                href={`${basePath}${r.path}`}
                aria-current={r.path === path ? "page" : undefined}
                onClick={(event) => navigate(event, r.path)}
              >
                {r.title}
              </a>
            </li>
          ))}
        </ul>
      </nav>
      <main class="main">
        {!route ? (
          <p>This page does not exist.</p>
        ) : failure ? (
          <p role="alert">The screen could not be loaded: {failure}</p>
        ) : screen && screen.route === route ? (
          <screen.Component api={api} />
        ) : (
          <p class="loading">Loading…</p>
        )}
      </main>
    </div>
  );
}
