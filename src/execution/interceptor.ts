/**
 * Request and response conditions in the one interceptor chain every protocol runs (REST, gRPC,
 * gRPC-web, Connect; src/api/interceptors.ts):
 *
 *   errors → authentication → validation → idempotency → executions → implementation
 *
 * - After authentication and validation: targets see a caller and a valid request.
 * - Inside idempotency: a call replayed from its Idempotency-Key (`cannedResponseKey` set) calls no target
 *   again; a target that interrupts fails the call before anything is written, so no key is bound and
 *   nothing is stored.
 * - The request targets run before the implementation (their rewritten request is what it gets), the
 *   response targets after it (their rewritten response is what the client gets). Neither runs inside a
 *   database transaction.
 *
 * The lookup is cached per instance (./lookup.ts): without executions a call costs no query.
 */
import { create, type DescMessage, isMessage } from "@bufbuild/protobuf";
import type { ContextValues, Interceptor, UnaryResponse } from "@connectrpc/connect";
import { cannedResponseKey, loggerKey } from "../api/context.ts";
import { scopeKey } from "../api/scope.ts";
import type { CallInfo, ExecutionEngine } from "./engine.ts";

/** The caller of a call as the payload names it (empty strings when unknown). */
export type IdentifyCaller = (values: ContextValues) => { orgId: string; projectId: string; userId: string };

export function executionInterceptor(engine: ExecutionEngine, identify: IdentifyCaller): Interceptor {
  return (next) => async (req) => {
    if (req.stream || req.contextValues.get(cannedResponseKey) !== undefined) return next(req);
    const instanceId = req.contextValues.get(scopeKey)?.instanceId;
    if (!instanceId) return next(req);
    const fullMethod = `/${req.service.typeName}/${req.method.name}`;
    const [requestTargets, responseTargets] = await Promise.all([
      engine.targetsOf(instanceId, "request", fullMethod),
      engine.targetsOf(instanceId, "response", fullMethod),
    ]);
    if (requestTargets.length === 0 && responseTargets.length === 0) return next(req);
    if (!(await engine.enabled(instanceId))) return next(req);

    const caller = identify(req.contextValues);
    const info: CallInfo = {
      fullMethod,
      instanceID: instanceId,
      orgID: caller.orgId,
      projectID: caller.projectId,
      userID: caller.userId,
    };
    // the request's logger carries the request ID
    const options = { signal: req.signal, log: req.contextValues.get(loggerKey) };
    const input = req.method.input as DescMessage;
    const message = requestTargets.length
      ? await engine.callRequestTargets(requestTargets, info, input, req.message as never, options)
      : req.message;
    const res = (await next({ ...req, message })) as UnaryResponse;
    if (responseTargets.length === 0) return res;
    const output = req.method.output as DescMessage;
    const current = isMessage(res.message, output) ? res.message : create(output, res.message as never);
    const response = await engine.callResponseTargets(
      responseTargets,
      info,
      { schema: input, message },
      output,
      current as never,
      options,
    );
    return { ...res, message: response };
  };
}
