import type { ApiService } from "../api/register.ts";
import type { ServiceDeps } from "./deps.ts";
import { featureSettingsService } from "./settings/features.ts";
import { languageSettingsService } from "./settings/languages.ts";

/** Every API service Platform serves. */
export function apiServices(deps: ServiceDeps): ApiService[] {
  return [featureSettingsService(deps), languageSettingsService(deps)];
}
