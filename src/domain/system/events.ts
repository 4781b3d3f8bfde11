/** The system aggregate: one per database, above every instance (events with instance_id ''). */
export const SYSTEM = "system";
export const SYSTEM_ID = "system";
export const SYSTEM_INSTANCE_ID = "";

export const SystemEvent = {
  /** Bootstrap finished creating the first instance; its presence makes bootstrap a no-op. */
  firstInstanceSet: "system.first_instance.set",
} as const;
