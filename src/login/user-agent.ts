/**
 * The browser (user agent) cookie and the CSRF tokens bound to it.
 *
 * `platform_ua` holds a random 256-bit ID (HttpOnly, SameSite=Lax, Path=/, Secure on https). The server
 * keeps only its SHA-256 (on the sessions the browser signed in with, and on the auth requests it
 * continues), so a database dump reveals no cookie. The cookie is per host, hence per instance.
 *
 * CSRF: every form carries `HMAC-SHA256(key = the cookie's ID, "platform-login-csrf")`. Another site can
 * neither read the HttpOnly cookie nor the pages that carry the token, so it cannot forge a form post; the
 * token is not the stored hash (a leaked database gives no token) and it needs no server-side key, so
 * every process behind a load balancer accepts it.
 *
 * Every sign-in gives the browser a new ID (`Login.adoptUserAgent`): a value planted in the browser, or
 * learned, before the sign-in names none of the sessions it makes (no session fixation).
 */
import { createHmac, randomBytes } from "node:crypto";
import type { FastifyReply, FastifyRequest } from "fastify";
import { constantTimeEqual, sha256 } from "../crypto/tokens.ts";

export const USER_AGENT_COOKIE = "platform_ua";
/** Browsers cap cookie lifetimes at 400 days; the sessions themselves end on sign-out. */
const COOKIE_MAX_AGE_SECONDS = 400 * 24 * 60 * 60;
const COOKIE_VALUE = /^[A-Za-z0-9_-]{43}$/;

export interface UserAgent {
  /** The cookie's value (never stored or logged). */
  id: string;
  /** SHA-256 of the ID, base64url: what the server stores. */
  hash: string;
}

function fromId(id: string): UserAgent {
  return { id, hash: sha256(id) };
}

/** The user agent of the request's cookie, if it has a well-formed one. */
export function readUserAgent(request: FastifyRequest): UserAgent | undefined {
  const value = request.cookies?.[USER_AGENT_COOKIE];
  return value && COOKIE_VALUE.test(value) ? fromId(value) : undefined;
}

/** Cookie attributes: Secure whenever the browser talks https to us (directly or through the proxy). */
function cookieOptions(request: FastifyRequest, externalSecure: boolean) {
  return {
    path: "/",
    httpOnly: true,
    sameSite: "lax" as const,
    secure: externalSecure || request.protocol === "https",
  };
}

/** Requests whose user agent `ensureUserAgent` made: a browser that cannot have signed in yet. */
const newAgents = new WeakSet<FastifyRequest>();

/** Whether the request's user agent was made by this request (a random ID no session can carry yet). */
export function isNewUserAgent(request: FastifyRequest): boolean {
  return newAgents.has(request);
}

/** A new user agent (a random 256-bit ID), not yet the browser's: `setUserAgent` gives it to the browser. */
export function newUserAgent(): UserAgent {
  return fromId(randomBytes(32).toString("base64url"));
}

/** Gives the browser `agent` as its cookie, for the rest of this request too. */
export function setUserAgent(
  request: FastifyRequest,
  reply: FastifyReply,
  agent: UserAgent,
  externalSecure: boolean,
): void {
  reply.setCookie(USER_AGENT_COOKIE, agent.id, {
    ...cookieOptions(request, externalSecure),
    maxAge: COOKIE_MAX_AGE_SECONDS,
  });
  request.cookies[USER_AGENT_COOKIE] = agent.id;
  newAgents.delete(request);
}

/** The request's user agent, or a new one whose cookie the reply sets. */
export function ensureUserAgent(
  request: FastifyRequest,
  reply: FastifyReply,
  externalSecure: boolean,
): UserAgent {
  const existing = readUserAgent(request);
  if (existing) return existing;
  const agent = newUserAgent();
  // the same request may need it again (e.g. a page rendered after creating it)
  setUserAgent(request, reply, agent, externalSecure);
  newAgents.add(request);
  return agent;
}

/** Removes the cookie (sign-out): the next visit starts as a new browser. */
export function clearUserAgent(request: FastifyRequest, reply: FastifyReply, externalSecure: boolean): void {
  reply.clearCookie(USER_AGENT_COOKIE, cookieOptions(request, externalSecure));
}

/** The CSRF token of forms shown to this user agent. */
export function csrfToken(agent: UserAgent): string {
  return createHmac("sha256", agent.id).update("platform-login-csrf").digest("base64url");
}

/** Whether a posted token is this user agent's (constant time). */
export function csrfValid(agent: UserAgent | undefined, token: unknown): boolean {
  return agent !== undefined && typeof token === "string" && constantTimeEqual(token, csrfToken(agent));
}
