/**
 * The console's routes: each screen is its own module, loaded (esbuild splits it into its own chunk) the
 * first time it is shown. A later screen adds one line here and one link in the navigation (shell.tsx).
 */
import type { ComponentType } from "preact";
import type { Api } from "./api.ts";

export interface ScreenProps {
  api: Api;
}

export interface Route {
  /** Path below the console's base path (`/` is the home screen). */
  path: string;
  title: string;
  load: () => Promise<{ default: ComponentType<ScreenProps> }>;
}

export const routes: Route[] = [{ path: "/", title: "Home", load: () => import("./screens/home.tsx") }];

export function routeOf(path: string): Route | undefined {
  return routes.find((route) => route.path === path);
}
