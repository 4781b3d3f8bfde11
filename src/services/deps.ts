import type { Authenticator } from "../auth/authenticate.ts";
import type { Authorizer } from "../auth/authorize.ts";
import type { Config } from "../config.ts";
import type { EventStore } from "../eventstore/eventstore.ts";
import type { OutboundPolicy } from "../net/outbound.ts";
import type { NotificationDelivery } from "../notifications/delivery.ts";
import type { NotificationSender } from "../notifications/sender.ts";
import type { SigningKeys } from "../oidc/keys.ts";
import type { FeatureGate } from "../query/features.ts";
import type { InstanceDirectory } from "../query/instances.ts";
import type { Database } from "../storage/database.ts";
import type { DomainVerifier } from "./domains/verifier.ts";

/** What RPC implementations may use. */
export interface ServiceDeps {
  config: Config;
  db: Database;
  eventStore: EventStore;
  instances: InstanceDirectory;
  authenticator: Authenticator;
  authorizer: Authorizer;
  features: FeatureGate;
  /** PLATFORM_MASTERKEY: seals secrets kept at rest (e.g. identity providers' client secrets). */
  masterKey: Buffer;
  /** Where outbound connections may go (src/net/outbound.ts): take the guard of the configuring level. */
  outbound: OutboundPolicy;
  /** The instances' OIDC signing keys (the web keys API). */
  signingKeys: SigningKeys;
  /** Sends e-mail and SMS through the instances' notification providers. */
  notifications: NotificationSender;
  /** The notification outbox: messages queued with their event, sent by a worker (docs/notifications.md). */
  messages?: NotificationDelivery;
  /** Proves control of org domains (default: HTTP file or DNS TXT over the network). */
  domainVerifier?: DomainVerifier;
}
