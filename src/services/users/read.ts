import { create, type JsonObject } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { OwnerType } from "../../domain/settings/events.ts";
import { UserType as DomainUserType } from "../../domain/user/events.ts";
import {
  HumanEmailSchema,
  HumanPhoneSchema,
  HumanProfileSchema,
  HumanSchema,
  MachineSchema,
  type User,
  UserSchema,
} from "../../gen/platform/resources/user/v3alpha/user_service_pb.ts";
import type { Queryable } from "../../storage/database.ts";
import { resourceDetails } from "../mapping.ts";

/**
 * A users read-model row as the API reads it. The columns are listed one by one: the password hash and
 * the client secret hash are never selected, only whether they are set.
 */
export interface UserRow {
  id: string;
  org_id: string;
  type: number;
  username: string;
  state: number;
  given_name: string | null;
  family_name: string | null;
  display_name: string | null;
  nick_name: string | null;
  preferred_language: string | null;
  email: string | null;
  email_verified: boolean;
  phone: string | null;
  phone_verified: boolean;
  password_set: boolean;
  password_change_required: boolean;
  password_failed_attempts: number;
  /** Set only while a temporary password lockout lasts (by the database's clock). */
  password_locked_until: Date | null;
  machine_name: string | null;
  description: string | null;
  access_token_type: number | null;
  has_secret: boolean;
  primary_domain: string | null;
  created_at: Date;
  changed_at: Date;
  sequence: number;
  /** Custom data (docs/user-schemas.md): all three or none. */
  schema_id: string | null;
  schema_revision: number | null;
  data: Record<string, unknown> | null;
  [key: string]: unknown;
}

export const USER_COLUMNS = `u.id, u.org_id, u.type, u.username, u.state, u.given_name, u.family_name, u.display_name,
  u.nick_name, u.preferred_language, u.email, u.email_verified, u.phone, u.phone_verified,
  (u.password_hash IS NOT NULL) AS password_set, u.password_change_required, u.password_failed_attempts,
  CASE WHEN u.password_locked_until > now() THEN u.password_locked_until END AS password_locked_until,
  u.machine_name, u.description,
  u.access_token_type, (u.client_secret_hash IS NOT NULL) AS has_secret, o.primary_domain, u.created_at,
  u.changed_at, u.sequence, u.schema_id, u.schema_revision, u.data`;

export const USER_FROM = "users u LEFT JOIN orgs o ON o.instance_id = u.instance_id AND o.id = u.org_id";

/** One user of an instance, or undefined. */
export async function readUser(db: Queryable, instanceId: string, id: string): Promise<UserRow | undefined> {
  const rows = await db.query<UserRow>(
    `SELECT ${USER_COLUMNS} FROM ${USER_FROM} WHERE u.instance_id = $1 AND u.id = $2`,
    [instanceId, id],
  );
  return rows[0];
}

/** Metadata of some users: user ID → key → value (base64). */
export async function readMetadata(
  db: Queryable,
  instanceId: string,
  userIds: string[],
): Promise<Map<string, Record<string, string>>> {
  const result = new Map<string, Record<string, string>>();
  if (userIds.length === 0) return result;
  const rows = await db.query<{ user_id: string; key: string; value: string }>(
    "SELECT user_id, key, value FROM user_metadata WHERE instance_id = $1 AND user_id = ANY($2) ORDER BY key",
    [instanceId, userIds],
  );
  for (const row of rows) {
    const entries = result.get(row.user_id) ?? {};
    entries[row.key] = row.value;
    result.set(row.user_id, entries);
  }
  return result;
}

const date = (value: unknown): Date => (value instanceof Date ? value : new Date(String(value)));

/**
 * Read-model row → API User (never a password, hash or secret); `data`: the custom data the caller may
 * read (./custom-data.ts).
 */
export function toUser(
  row: UserRow,
  metadata: Record<string, string> = {},
  data?: Record<string, unknown>,
): User {
  const loginNames = [row.username];
  if (row.primary_domain) loginNames.push(`${row.username}@${row.primary_domain}`);
  const user = create(UserSchema, {
    details: resourceDetails({
      id: row.id,
      sequence: Number(row.sequence),
      changeDate: date(row.changed_at),
      owner: { type: OwnerType.org, id: row.org_id },
    }),
    username: row.username,
    loginNames,
    state: row.state,
    metadata: Object.fromEntries(
      Object.entries(metadata).map(([key, value]) => [key, new Uint8Array(Buffer.from(value, "base64"))]),
    ),
    schemaId: row.schema_id ?? "",
    schemaRevision: Number(row.schema_revision ?? 0),
    data: row.schema_id ? ((data ?? {}) as JsonObject) : undefined,
  });
  if (row.type === DomainUserType.human) {
    user.type = {
      case: "human",
      value: create(HumanSchema, {
        profile: create(HumanProfileSchema, {
          givenName: row.given_name ?? "",
          familyName: row.family_name ?? "",
          displayName: row.display_name ?? undefined,
          nickName: row.nick_name ?? undefined,
          preferredLanguage: row.preferred_language ?? undefined,
        }),
        email: create(HumanEmailSchema, { address: row.email ?? "", isVerified: row.email_verified }),
        phone: row.phone
          ? create(HumanPhoneSchema, { number: row.phone, isVerified: row.phone_verified })
          : undefined,
        passwordSet: row.password_set,
        passwordChangeRequired: row.password_change_required,
        failedPasswordAttempts: Number(row.password_failed_attempts ?? 0),
        passwordLockedUntil: row.password_locked_until
          ? timestampFromDate(date(row.password_locked_until))
          : undefined,
      }),
    };
  } else {
    user.type = {
      case: "machine",
      value: create(MachineSchema, {
        name: row.machine_name ?? "",
        description: row.description ?? "",
        accessTokenType: row.access_token_type ?? 0,
        hasSecret: row.has_secret,
      }),
    };
  }
  return user;
}
