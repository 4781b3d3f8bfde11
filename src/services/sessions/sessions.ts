import { create } from "@bufbuild/protobuf";
import { type Timestamp, timestampDate, timestampFromDate } from "@bufbuild/protobuf/wkt";
import { apiService } from "../../api/register.ts";
import type { Caller, ResolvedContext } from "../../auth/caller.ts";
import {
  type CheckedUser,
  checkSession,
  createSession,
  findUser,
  passwordPolicyOf,
  terminateSession,
  type UserCheck,
} from "../../domain/session/commands.ts";
import { SESSION } from "../../domain/session/events.ts";
import { OwnerType } from "../../domain/settings/events.ts";
import { USER } from "../../domain/user/events.ts";
import { InvalidArgumentError, NotFoundError, PermissionDeniedError } from "../../errors.ts";
import type { CheckUser } from "../../gen/platform/resources/session/v3alpha/session_pb.ts";
import {
  FactorsSchema,
  type GetSession,
  GetSessionSchema,
  IdpFactorSchema,
  OTPFactorSchema,
  PasswordFactorSchema,
  SessionFieldName,
  SessionSchema,
  SessionUserSchema,
  UserFactorSchema,
  WebAuthnFactorSchema,
} from "../../gen/platform/resources/session/v3alpha/session_pb.ts";
import {
  CreateSessionResponseSchema,
  DeleteSessionResponseSchema,
  GetSessionResponseSchema,
  PatchSessionResponseSchema,
  PlatformSessions,
  SearchSessionsResponseSchema,
} from "../../gen/platform/resources/session/v3alpha/session_service_pb.ts";
import { search, toPage, Where } from "../../query/search.ts";
import { type AuthorizedCall, authorize } from "../call.ts";
import type { ServiceDeps } from "../deps.ts";
import { listDetails, resourceDetails } from "../mapping.ts";
import { challengesAnswer, challengesOf, factorChecksOf } from "./factors.ts";
import { requireAllowedByLoginPolicy } from "./policy.ts";
import { webAuthnChallengeOf } from "./webauthn.ts";

interface SessionRow {
  id: string;
  user_id: string;
  org_id: string;
  creator: string;
  user_checked_at: Date | null;
  password_checked_at: Date | null;
  idp_checked_at: Date | null;
  idp_id: string | null;
  totp_checked_at: Date | null;
  otp_email_checked_at: Date | null;
  otp_sms_checked_at: Date | null;
  recovery_code_checked_at: Date | null;
  webauthn_checked_at: Date | null;
  webauthn_user_verified: boolean | null;
  created_at: Date;
  changed_at: Date;
  sequence: number;
  username: string | null;
  display_name: string | null;
  given_name: string | null;
  family_name: string | null;
  machine_name: string | null;
  password_change_required: boolean | null;
  primary_domain: string | null;
  [key: string]: unknown;
}

const SELECT = `s.id, s.user_id, s.org_id, s.creator, s.user_checked_at, s.password_checked_at, s.idp_checked_at,
  s.idp_id, s.totp_checked_at, s.otp_email_checked_at, s.otp_sms_checked_at, s.recovery_code_checked_at,
  s.webauthn_checked_at, s.webauthn_user_verified, s.created_at,
  s.changed_at, s.sequence, u.username, u.display_name, u.given_name, u.family_name, u.machine_name,
  u.password_change_required, o.primary_domain`;
const FROM = `sessions s
  LEFT JOIN users u ON u.instance_id = s.instance_id AND u.id = s.user_id
  LEFT JOIN orgs o ON o.instance_id = s.instance_id AND o.id = s.org_id`;

const sortColumns: Record<number, string> = {
  [SessionFieldName.UNSPECIFIED]: "s.created_at",
  [SessionFieldName.ID]: "s.id",
  [SessionFieldName.CREATION_DATE]: "s.created_at",
  [SessionFieldName.CHANGE_DATE]: "s.changed_at",
};

/** TimestampFilterMethod → SQL operator. */
const timestampOperators = ["=", ">", ">=", "<", "<="];

const ts = (date: Date | null | undefined) => (date ? timestampFromDate(new Date(date)) : undefined);

function displayName(row: SessionRow): string {
  if (row.display_name) return row.display_name;
  if (row.machine_name) return row.machine_name;
  return [row.given_name, row.family_name].filter(Boolean).join(" ");
}

/** A second factor's check time as `OTPFactor` (unset: never passed). */
const otpFactor = (at: Date | null) => (at ? create(OTPFactorSchema, { verifiedAt: ts(at) }) : undefined);

function toGetSession(row: SessionRow): GetSession {
  const loginName = row.username
    ? row.primary_domain
      ? `${row.username}@${row.primary_domain}`
      : row.username
    : "";
  return create(GetSessionSchema, {
    details: resourceDetails({
      id: row.id,
      sequence: Number(row.sequence),
      changeDate: new Date(row.changed_at),
      owner: { type: OwnerType.org, id: row.org_id },
    }),
    session: create(SessionSchema, {
      id: row.id,
      creationDate: ts(row.created_at),
      changeDate: ts(row.changed_at),
      user: create(SessionUserSchema, {
        id: row.user_id,
        loginName,
        displayName: displayName(row),
        orgId: row.org_id,
      }),
      factors: create(FactorsSchema, {
        user: row.user_checked_at
          ? create(UserFactorSchema, { verifiedAt: ts(row.user_checked_at) })
          : undefined,
        password: row.password_checked_at
          ? create(PasswordFactorSchema, {
              verifiedAt: ts(row.password_checked_at),
              changeRequired: row.password_change_required === true,
            })
          : undefined,
        idp: row.idp_checked_at
          ? create(IdpFactorSchema, { idpId: row.idp_id ?? "", verifiedAt: ts(row.idp_checked_at) })
          : undefined,
        totp: otpFactor(row.totp_checked_at),
        otpEmail: otpFactor(row.otp_email_checked_at),
        otpSms: otpFactor(row.otp_sms_checked_at),
        recoveryCode: otpFactor(row.recovery_code_checked_at),
        webauthn: row.webauthn_checked_at
          ? create(WebAuthnFactorSchema, {
              verifiedAt: ts(row.webauthn_checked_at),
              userVerified: row.webauthn_user_verified === true,
            })
          : undefined,
      }),
    }),
  });
}

function toUserCheck(check: CheckUser | undefined): UserCheck | undefined {
  switch (check?.search.case) {
    case "userId":
      return { userId: check.search.value };
    case "loginName":
      return { loginName: check.search.value };
    default:
      return undefined;
  }
}

/** Sessions live in an instance: the instance of the resolved context. */
function instanceOf(context: ResolvedContext): string {
  if (context.type === "system") throw new InvalidArgumentError("sessions live in an instance", "ctx");
  return context.instanceId;
}

const orgContext = (instanceId: string, orgId: string): ResolvedContext => ({
  type: "org",
  instanceId,
  orgId,
});

/**
 * PlatformSessions: sessions of users, created by checking a user (and its password), with second factors
 * checked and challenges made through ./factors.ts. The organization
 * of the session's user decides the permissions; a session is also readable by its user and by the
 * caller that created it.
 */
export function sessionsService(deps: ServiceDeps) {
  const policy = () => passwordPolicyOf(deps.config);
  const actor = (call: AuthorizedCall, instanceId: string) => ({ instanceId, creator: call.creator });

  async function mayRead(caller: Caller, instanceId: string, row: SessionRow): Promise<boolean> {
    if (caller.kind === "system") return true;
    if (caller.userId === row.user_id || caller.userId === row.creator) return true;
    return deps.authorizer.can(caller, "session.read", orgContext(instanceId, row.org_id));
  }

  /** The session `id` the caller may read: 404 when unknown or not readable. */
  async function readableSession(caller: Caller, instanceId: string, id: string): Promise<SessionRow> {
    const rows = await deps.db.query<SessionRow>(
      `SELECT ${SELECT} FROM ${FROM} WHERE s.instance_id = $1 AND s.id = $2`,
      [instanceId, id],
    );
    if (rows.length === 0 || !(await mayRead(caller, instanceId, rows[0])))
      throw new NotFoundError("session not found");
    return rows[0];
  }

  return apiService(PlatformSessions, {
    async createSession(req, ctx) {
      const call = await authorize(deps, ctx, "authenticated");
      const instanceId = instanceOf(call.context);
      // No user lookup for callers that may create sessions nowhere (no probing of login names).
      const orgs = await deps.authorizer.orgsWith(call.caller, "session.write", instanceId);
      if (orgs !== "all" && orgs.size === 0)
        throw new PermissionDeniedError("permission denied: session.write is required");
      const checks = req.session?.checks;
      const userCheck = toUserCheck(checks?.user);
      if (!userCheck) throw new InvalidArgumentError("is required", "session.checks.user");
      const user = await findUser(deps.db, instanceId, userCheck);
      // A user the caller may not even read is unknown to it (no probing of other organizations' users).
      const userOrg = orgContext(instanceId, user.orgId);
      if (!(await deps.authorizer.can(call.caller, "session.write", userOrg))) {
        if (!(await deps.authorizer.can(call.caller, "user.read", userOrg)))
          throw new NotFoundError("user not found");
        throw new PermissionDeniedError("permission denied: session.write is required");
      }
      await requireAllowedByLoginPolicy(
        deps.db,
        instanceId,
        { userId: user.id, orgId: user.orgId },
        req.session,
      );
      const created = await createSession(
        deps.eventStore,
        actor(call, instanceId),
        {
          user,
          password: checks?.password?.password,
          factors: factorChecksOf(deps, checks),
          challenges: [
            ...challengesOf(deps, req.session?.challenges),
            ...(await webAuthnChallengeOf(
              deps,
              call,
              instanceId,
              req.session?.challenges?.webauthn,
              "session.challenges.webauthn",
            )),
          ],
        },
        policy(),
      );
      return create(CreateSessionResponseSchema, {
        details: resourceDetails({
          id: created.sessionId,
          sequence: created.sequence,
          changeDate: created.changeDate,
          owner: { type: OwnerType.org, id: created.orgId },
        }),
        sessionToken: created.token,
        challenges: challengesAnswer(created.challenges),
      });
    },

    async patchSession(req, ctx) {
      const call = await authorize(deps, ctx, "authenticated");
      const instanceId = instanceOf(call.context);
      const session = await readableSession(call.caller, instanceId, req.id);
      await deps.authorizer.authorize(call.caller, "session.write", orgContext(instanceId, session.org_id));
      const checks = req.session?.checks;
      const userCheck = toUserCheck(checks?.user);
      let user: CheckedUser | undefined;
      if (userCheck) user = await findUser(deps.db, instanceId, userCheck);
      const policyUser = user
        ? { userId: user.id, orgId: user.orgId }
        : { userId: session.user_id, orgId: session.org_id };
      await requireAllowedByLoginPolicy(deps.db, instanceId, policyUser, req.session);
      const version = await checkSession(
        deps.eventStore,
        actor(call, instanceId),
        {
          sessionId: req.id,
          token: req.session?.sessionToken ?? "",
          user,
          password: checks?.password?.password,
          factors: factorChecksOf(deps, checks),
          challenges: [
            ...challengesOf(deps, req.session?.challenges),
            ...(await webAuthnChallengeOf(
              deps,
              call,
              instanceId,
              req.session?.challenges?.webauthn,
              "session.challenges.webauthn",
            )),
          ],
        },
        policy(),
      );
      return create(PatchSessionResponseSchema, {
        challenges: challengesAnswer(version.challenges),
        details: resourceDetails({
          id: version.sessionId,
          sequence: version.sequence,
          changeDate: version.changeDate,
          owner: { type: OwnerType.org, id: version.orgId },
        }),
      });
    },

    async getSession(req, ctx) {
      const call = await authorize(deps, ctx, "authenticated");
      const instanceId = instanceOf(call.context);
      const row = await readableSession(call.caller, instanceId, req.id);
      return create(GetSessionResponseSchema, { session: toGetSession(row) });
    },

    async searchSessions(req, ctx) {
      const call = await authorize(deps, ctx, "authenticated", { ctx: req.ctx });
      const instanceId = instanceOf(call.context);
      const page = toPage(req.query, deps.config.maxSearchLimit);
      const where = new Where().and((p) => `s.instance_id = ${p(instanceId)}`);
      if (call.context.type === "org" || call.context.type === "project") {
        const orgId = call.context.orgId;
        where.and((p) => `s.org_id = ${p(orgId)}`);
      }
      const orgs = await deps.authorizer.orgsWith(call.caller, "session.read", instanceId);
      if (orgs !== "all" && call.caller.kind === "user") {
        const userId = call.caller.userId;
        where.and(
          (p) => `(s.org_id = ANY(${p([...orgs])}) OR s.user_id = ${p(userId)} OR s.creator = ${p(userId)})`,
        );
      }
      req.filters.forEach((f, i) => {
        const filter = f.filter;
        switch (filter.case) {
          case "userId":
            where.and((p) => `s.user_id = ${p(filter.value.userId)}`);
            break;
          case "creationDate": {
            const op = timestampOperators[filter.value.method];
            const at = timestampDate(filter.value.creationDate as Timestamp);
            where.and((p) => `date_trunc('milliseconds', s.created_at) ${op} ${p(at)}`);
            break;
          }
          case "inIds":
            where.in("s.id", filter.value.ids);
            break;
          default:
            throw new InvalidArgumentError("a filter is required", `filters[${i}].filter`);
        }
      });
      const result = await search<SessionRow>(deps.db, {
        select: SELECT,
        from: FROM,
        where,
        orderBy: sortColumns[req.sortingColumn] ?? "s.created_at",
        tiebreak: "s.id",
        page,
        instanceId,
        aggregateTypes: [SESSION, USER],
      });
      return create(SearchSessionsResponseSchema, {
        details: listDetails(result),
        sortingColumn: req.sortingColumn,
        result: result.rows.map(toGetSession),
      });
    },

    async deleteSession(req, ctx) {
      const call = await authorize(deps, ctx, "authenticated");
      const instanceId = instanceOf(call.context);
      const token = req.sessionToken === "" ? undefined : req.sessionToken;
      if (token === undefined) {
        // Without the token: the caller must be allowed to (read and) delete the session.
        const session = await readableSession(call.caller, instanceId, req.id);
        await deps.authorizer.authorize(
          call.caller,
          "session.delete",
          orgContext(instanceId, session.org_id),
        );
      }
      const version = await terminateSession(deps.eventStore, actor(call, instanceId), {
        sessionId: req.id,
        token,
      });
      return create(DeleteSessionResponseSchema, {
        details: resourceDetails({
          id: version.sessionId,
          sequence: version.sequence,
          changeDate: version.changeDate,
          owner: { type: OwnerType.org, id: version.orgId },
        }),
      });
    },
  });
}
