/**
 * The one error registry. Domain, storage and transport code throw these; the API layer maps the
 * gRPC code to connect/gRPC status and to the HTTP status grpc-gateway would use (docs/api.md "Errors").
 */
export const Code = {
  OK: 0,
  CANCELLED: 1,
  UNKNOWN: 2,
  INVALID_ARGUMENT: 3,
  DEADLINE_EXCEEDED: 4,
  NOT_FOUND: 5,
  ALREADY_EXISTS: 6,
  PERMISSION_DENIED: 7,
  RESOURCE_EXHAUSTED: 8,
  FAILED_PRECONDITION: 9,
  ABORTED: 10,
  OUT_OF_RANGE: 11,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
  DATA_LOSS: 15,
  UNAUTHENTICATED: 16,
} as const;
export type Code = (typeof Code)[keyof typeof Code];

const httpStatusByCode: Record<number, number> = {
  [Code.OK]: 200,
  [Code.CANCELLED]: 499,
  [Code.UNKNOWN]: 500,
  [Code.INVALID_ARGUMENT]: 400,
  [Code.DEADLINE_EXCEEDED]: 504,
  [Code.NOT_FOUND]: 404,
  [Code.ALREADY_EXISTS]: 409,
  [Code.PERMISSION_DENIED]: 403,
  [Code.RESOURCE_EXHAUSTED]: 429,
  [Code.FAILED_PRECONDITION]: 400,
  [Code.ABORTED]: 409,
  [Code.OUT_OF_RANGE]: 400,
  [Code.UNIMPLEMENTED]: 501,
  [Code.INTERNAL]: 500,
  [Code.UNAVAILABLE]: 503,
  [Code.DATA_LOSS]: 500,
  [Code.UNAUTHENTICATED]: 401,
};

/** HTTP status for a gRPC code, as grpc-gateway maps it. */
export function httpStatusFor(code: number): number {
  return httpStatusByCode[code] ?? 500;
}

export class PlatformError extends Error {
  readonly code: Code;
  /** The request field the error is about (dotted proto path), when there is one. */
  readonly field?: string;
  /** REST status instead of the code's (only the few errors of this registry that need one set it). */
  private readonly httpStatusOverride?: number;

  constructor(
    code: Code,
    message: string,
    options?: { field?: string; cause?: unknown; httpStatus?: number },
  ) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.field = options?.field;
    this.httpStatusOverride = options?.httpStatus;
    this.name = new.target.name;
  }

  get httpStatus(): number {
    return this.httpStatusOverride ?? httpStatusFor(this.code);
  }
}

export class InvalidArgumentError extends PlatformError {
  constructor(message: string, field?: string) {
    super(Code.INVALID_ARGUMENT, field ? `${field}: ${message}` : message, { field });
  }
}
export class NotFoundError extends PlatformError {
  constructor(message: string) {
    super(Code.NOT_FOUND, message);
  }
}
export class AlreadyExistsError extends PlatformError {
  constructor(message: string) {
    super(Code.ALREADY_EXISTS, message);
  }
}
export class FailedPreconditionError extends PlatformError {
  constructor(message: string) {
    super(Code.FAILED_PRECONDITION, message);
  }
}
export class PermissionDeniedError extends PlatformError {
  constructor(message = "permission denied") {
    super(Code.PERMISSION_DENIED, message);
  }
}
export class UnauthenticatedError extends PlatformError {
  constructor(message = "authentication required") {
    super(Code.UNAUTHENTICATED, message);
  }
}
export class AbortedError extends PlatformError {
  constructor(message: string) {
    super(Code.ABORTED, message);
  }
}
export class ResourceExhaustedError extends PlatformError {
  constructor(
    message: string,
    /** Seconds after which the same request may succeed: the answer's `Retry-After`. */
    readonly retryAfterSeconds?: number,
  ) {
    super(Code.RESOURCE_EXHAUSTED, message);
  }
}
export class UnavailableError extends PlatformError {
  constructor(message: string) {
    super(Code.UNAVAILABLE, message);
  }
}
/** A call the server made on the client's behalf (e.g. to an action target) did not answer in time. */
export class DeadlineExceededError extends PlatformError {
  constructor(message: string) {
    super(Code.DEADLINE_EXCEEDED, message);
  }
}
export class InternalError extends PlatformError {
  constructor(message = "internal error", cause?: unknown) {
    super(Code.INTERNAL, message, { cause });
  }
}

/**
 * The errors of `Idempotency-Key` (src/api/idempotency.ts, docs/api.md "Safe retries"). Over REST they
 * answer the statuses clients of idempotency keys expect (IETF draft-ietf-httpapi-idempotency-key-header):
 * 422 for a key reused with another request, 409 for a key whose request is running or was applied without
 * a stored answer. The connect protocols answer the gRPC codes.
 */
export class IdempotencyKeyReusedError extends PlatformError {
  constructor(message: string) {
    super(Code.FAILED_PRECONDITION, message, { httpStatus: 422 });
  }
}
export class IdempotencyKeyInProgressError extends PlatformError {
  constructor(message: string) {
    super(Code.ABORTED, message);
  }
}
export class IdempotencyAnswerLostError extends PlatformError {
  constructor(message: string) {
    super(Code.FAILED_PRECONDITION, message, { httpStatus: 409 });
  }
}

/**
 * A change the database could not save because its disk is full (the embedded database's free-space
 * reserve, or SQLSTATE 53100 disk_full from either database). REST answers 507 Insufficient Storage; the
 * connect protocols RESOURCE_EXHAUSTED, whose gRPC definition names a full file system. `detail` (how
 * much is free, what failed) is for the log only.
 */
export class DatabaseFullError extends PlatformError {
  constructor(
    readonly detail: string,
    cause?: unknown,
  ) {
    super(
      Code.RESOURCE_EXHAUSTED,
      "insufficient storage: the database's disk is full, so the change was not saved; retry later",
      { httpStatus: 507, cause },
    );
  }
}
