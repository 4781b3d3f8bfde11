import type { Projection } from "../../eventstore/types.ts";
import { actionsProjection } from "./actions.ts";
import { appsProjection } from "./apps.ts";
import { idpsProjection } from "./idps.ts";
import { instancesProjection } from "./instances.ts";
import { membershipsProjection } from "./memberships.ts";
import { notificationProvidersProjection } from "./notification-providers.ts";
import { orgsProjection } from "./orgs.ts";
import { projectsProjection } from "./projects.ts";
import { sessionsProjection } from "./sessions.ts";
import { settingsProjection } from "./settings.ts";
import { userGrantsProjection } from "./user_grants.ts";
import { userFactorsProjection } from "./user-factors.ts";
import { userSchemasProjection } from "./user-schemas.ts";
import { usersProjection } from "./users.ts";
import { webKeysProjection } from "./web-keys.ts";

/** Every inline projection; the event store runs them in the transaction of each append. */
export const projections: Projection[] = [
  instancesProjection,
  orgsProjection,
  projectsProjection,
  usersProjection,
  userFactorsProjection,
  membershipsProjection,
  settingsProjection,
  sessionsProjection,
  actionsProjection,
  appsProjection,
  userGrantsProjection,
  idpsProjection,
  webKeysProjection,
  notificationProvidersProjection,
  userSchemasProjection,
];
