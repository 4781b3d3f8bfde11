/**
 * The console's API client: the public APIs over the Connect protocol (`@connectrpc/connect-web`), typed by
 * the same generated protobuf-es descriptors the server implements (src/gen). Every call carries the
 * signed-in administrator's access token; an UNAUTHENTICATED answer (a bad or expired token) sends the
 * administrator back through sign-in, to the same screen.
 */
import type { DescService } from "@bufbuild/protobuf";
import { type Client, Code, ConnectError, createClient, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";
import type { Auth } from "./auth.ts";

export type Api = <S extends DescService>(service: S) => Client<S>;

export function createApi(auth: Auth): Api {
  const bearer: Interceptor = (next) => async (request) => {
    request.header.set("authorization", `Bearer ${await auth.accessToken()}`);
    try {
      return await next(request);
    } catch (error) {
      if (ConnectError.from(error).code === Code.Unauthenticated) await auth.signIn();
      throw error;
    }
  };
  const transport = createConnectTransport({
    baseUrl: location.origin,
    interceptors: [bearer],
    fetch: (input, init) => fetch(input, { ...init, credentials: "omit" }),
  });
  const clients = new Map<DescService, unknown>();
  return <S extends DescService>(service: S) => {
    let client = clients.get(service) as Client<S> | undefined;
    if (!client) {
      client = createClient(service, transport);
      clients.set(service, client);
    }
    return client;
  };
}
