import type { ApiService } from "../api/register.ts";
import { actionsService } from "./actions/service.ts";
import { appsService } from "./apps/apps.ts";
import type { ServiceDeps } from "./deps.ts";
import { domainsService } from "./domains/domains.ts";
import { eventsService } from "./events/events.ts";
import { idpsService } from "./idps/idps.ts";
import { instancesService } from "./instances/instances.ts";
import { membershipsService } from "./memberships/memberships.ts";
import { notificationsService } from "./notifications/service.ts";
import { organizationsService } from "./organizations/organizations.ts";
import { projectsService } from "./projects/service.ts";
import { sessionsService } from "./sessions/sessions.ts";
import { brandingSettingsService } from "./settings/branding.ts";
import { featureSettingsService } from "./settings/features.ts";
import { languageSettingsService } from "./settings/languages.ts";
import { loginSettingsService } from "./settings/login.ts";
import { textSettingsService } from "./settings/texts.ts";
import { userGrantsService } from "./user-grants/user_grants.ts";
import { userSchemasService } from "./user-schemas/service.ts";
import { usersService } from "./users/users.ts";
import { webKeysService } from "./web-keys/web-keys.ts";

/** Every API service Platform serves. */
export function apiServices(deps: ServiceDeps): ApiService[] {
  // actionsService lists the methods of every service here (it reads the list lazily)
  const services: ApiService[] = [
    featureSettingsService(deps),
    languageSettingsService(deps),
    loginSettingsService(deps),
    textSettingsService(deps),
    brandingSettingsService(deps),
    usersService(deps),
    membershipsService(deps),
    sessionsService(deps),
    organizationsService(deps),
    domainsService(deps),
    instancesService(deps),
    projectsService(deps),
    appsService(deps),
    userGrantsService(deps),
    idpsService(deps),
    eventsService(deps),
    webKeysService(deps),
    notificationsService(deps),
    userSchemasService(deps),
    actionsService(deps, () => services.map((s) => s.service)),
  ];
  return services;
}
