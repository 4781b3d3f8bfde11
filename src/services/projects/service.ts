import { apiService } from "../../api/register.ts";
import { PlatformProjects } from "../../gen/platform/resources/project/v3alpha/project_service_pb.ts";
import type { ServiceDeps } from "../deps.ts";
import { grantRpcs } from "./grants.ts";
import { projectRpcs } from "./projects.ts";
import { roleRpcs } from "./roles.ts";

/** PlatformProjects: projects, their roles and their project grants. */
export function projectsService(deps: ServiceDeps) {
  return apiService(PlatformProjects, { ...projectRpcs(deps), ...roleRpcs(deps), ...grantRpcs(deps) });
}
