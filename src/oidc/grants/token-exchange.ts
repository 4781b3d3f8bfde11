import { UnsupportedGrantType } from "../errors.ts";
import type { Grant } from "./types.ts";

/**
 * `urn:ietf:params:oauth:grant-type:token-exchange` (RFC 8693) gets its own issue; until then it is not
 * supported, whatever the instance's `token_exchange` flag says.
 */
export const tokenExchangeGrant: Grant = async () => {
  throw new UnsupportedGrantType("token exchange is not supported yet");
};
