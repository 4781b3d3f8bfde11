/** Who makes a call, once the bearer token is verified. */
export type Caller =
  | {
      kind: "user";
      userId: string;
      /** The instance the user (and the token) belongs to. */
      instanceId: string;
      orgId: string;
      /** How the caller authenticated. */
      via: "pat" | "access_token";
      /**
       * The browser session the access token was issued from (its `sid`); what a user changing how its own
       * account signs in is checked against (src/domain/session/sign-in-changes.ts), and the session its
       * own password change keeps.
       */
      sessionId?: string;
    }
  | {
      /** A system API user (PLATFORM_SYSTEM_API_USERS): the IAM_OWNER permissions in every context. */
      kind: "system";
      userId: string;
    };

/** Where a request acts: the system, an instance, or an organization of an instance. */
export type ResolvedContext =
  | { type: "system" }
  | { type: "instance"; instanceId: string }
  | { type: "org"; instanceId: string; orgId: string }
  | { type: "project"; instanceId: string; orgId: string; projectId: string };
