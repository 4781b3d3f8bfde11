import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { SettingsOwner } from "../domain/settings/events.ts";
import { type Owner, OwnerSchema } from "../gen/platform/object/v3alpha/object_pb.ts";
import { type Details, DetailsSchema } from "../gen/platform/settings/object/v3alpha/object_pb.ts";

export function toOwner(owner: SettingsOwner): Owner {
  return create(OwnerSchema, { type: owner.type, id: owner.id });
}

/** Settings `Details`: version of the context's own settings and the context itself. */
export function settingsDetails(
  version: { sequence: number; changeDate?: Date },
  owner: SettingsOwner,
): Details {
  return create(DetailsSchema, {
    sequence: BigInt(version.sequence),
    changeDate: version.changeDate ? timestampFromDate(version.changeDate) : undefined,
    owner: toOwner(owner),
  });
}
