export const PROJECT = "project";

export const ProjectEvent = {
  added: "project.added",
  changed: "project.changed",
  removed: "project.removed",
} as const;

export interface ProjectAddedPayload {
  name: string;
  project_role_assertion: boolean;
  project_role_check: boolean;
}
