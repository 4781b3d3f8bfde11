/** Feature flags (docs/api.md) and their defaults for a new instance. */
export const featureDefaults = {
  /** Gates the actions and identity provider resource APIs. */
  multitenancy_resources_api: true,
  /** Gates the settings APIs other than features. */
  multitenancy_settings: true,
  /** Gates the actions API and execution. */
  actions: true,
  /** Gates the token exchange grant. */
  token_exchange: false,
} as const;

export type FeatureFlag = keyof typeof featureDefaults;
export const featureFlags = Object.keys(featureDefaults) as FeatureFlag[];
export const FEATURES = "features";
