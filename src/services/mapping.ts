import { create } from "@bufbuild/protobuf";
import { type Timestamp, timestampDate, timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { SettingsOwner } from "../domain/settings/events.ts";
import { InvalidArgumentError } from "../errors.ts";
import {
  type ListDetails,
  ListDetailsSchema,
  type Owner,
  OwnerSchema,
  type Details as ResourceDetails,
  DetailsSchema as ResourceDetailsSchema,
} from "../gen/platform/object/v3alpha/object_pb.ts";
import { type Details, DetailsSchema } from "../gen/platform/settings/object/v3alpha/object_pb.ts";
import type { SearchResult } from "../query/search.ts";

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

/** Resource `Details` from a read-model row's version columns. */
export function resourceDetails(fields: {
  id: string;
  sequence: number;
  changeDate?: Date;
  owner: SettingsOwner;
}): ResourceDetails {
  return create(ResourceDetailsSchema, {
    id: fields.id,
    sequence: BigInt(fields.sequence),
    changeDate: fields.changeDate ? timestampFromDate(fields.changeDate) : undefined,
    resourceOwner: toOwner(fields.owner),
  });
}

/** `ListDetails` of a search result. */
export function listDetails(result: SearchResult<Record<string, unknown>>): ListDetails {
  return create(ListDetailsSchema, {
    appliedLimit: result.appliedLimit,
    endOfList: result.endOfList,
    totalResult: BigInt(result.total),
    processedSequence: BigInt(result.processedSequence),
    timestamp: result.timestamp ? timestampFromDate(result.timestamp) : undefined,
  });
}

/** A future point in time from an optional Timestamp, RFC 3339 (undefined: never expires). */
export function expiration(ts: Timestamp | undefined, field: string): string | undefined {
  if (!ts) return undefined;
  const at = timestampDate(ts);
  if (Number.isNaN(at.getTime())) throw new InvalidArgumentError("is not a valid timestamp", field);
  if (at.getTime() <= Date.now()) throw new InvalidArgumentError("must be in the future", field);
  return at.toISOString();
}
