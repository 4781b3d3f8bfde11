/**
 * TEST SUPPORT ONLY — never used by the server. An AuthRequestCompleter standing in for the OIDC
 * protocol side in the login UI's tests: it records which session completed which auth request and
 * sends the browser to the redirect URI with a marker instead of a real code (`code=test-code.<id>`),
 * or posts it there with `response_mode=form_post`. Tests assert that the UI reached completion with the
 * right session, not tokens.
 */
import type { AuthRequest } from "./auth-requests.ts";
import { type AuthRequestCompleter, type ClientResponse, redirectWith } from "./completer.ts";
import type { LoginSession } from "./sessions.ts";

export interface RecordedCompletion {
  authRequest: AuthRequest;
  session: LoginSession;
}

export interface RecordedFailure {
  authRequest: AuthRequest;
  error: string;
}

export class TestCompleter implements AuthRequestCompleter {
  readonly completions: RecordedCompletion[] = [];
  readonly failures: RecordedFailure[] = [];

  /** The marker standing in for the code of an auth request. */
  static codeFor(authRequestId: string): string {
    return `test-code.${authRequestId}`;
  }

  async complete({
    authRequest,
    session,
  }: {
    authRequest: AuthRequest;
    session: LoginSession;
  }): Promise<ClientResponse> {
    this.completions.push({ authRequest, session });
    const params = { code: TestCompleter.codeFor(authRequest.id), state: authRequest.state };
    if (authRequest.responseMode === "form_post")
      return {
        kind: "form_post",
        action: authRequest.redirectUri,
        fields: Object.fromEntries(Object.entries(params).filter(([, v]) => v !== undefined)) as Record<
          string,
          string
        >,
      };
    return { kind: "redirect", url: redirectWith(authRequest, params) };
  }

  async fail({ authRequest, error }: { authRequest: AuthRequest; error: string }): Promise<ClientResponse> {
    this.failures.push({ authRequest, error });
    return { kind: "redirect", url: redirectWith(authRequest, { error, state: authRequest.state }) };
  }

  /** The completion of an auth request, if any. */
  completionOf(authRequestId: string): RecordedCompletion | undefined {
    return this.completions.find((c) => c.authRequest.id === authRequestId);
  }
}
