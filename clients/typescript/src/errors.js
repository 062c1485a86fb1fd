// Typed errors: every answer of the gateway that is not a success carries
// a JSON body {code, message, keel_code?, retryable?} (docs/gateway.md);
// KeelError keeps it, and a subclass per HTTP status lets callers branch
// with instanceof while `code` says exactly what happened.

/** An error answer of the keel gateway, or a failure to reach it. */
export class KeelError extends Error {
  /**
   * @param {number} status HTTP status; 0 when no answer arrived.
   * @param {{code?: string, message?: string, keel_code?: string, retryable?: boolean}} body
   * @param {{retryAfter?: number, cause?: unknown}} [extra]
   */
  constructor(status, body, extra = {}) {
    super(body.message || `keel gateway: HTTP ${status}`, extra.cause === undefined ? undefined : { cause: extra.cause });
    this.name = new.target.name;
    this.status = status;
    this.code = body.code || "unknown";
    this.keelCode = body.keel_code;
    this.retryable = body.retryable ?? (status === 429 || status === 503 || status === 0);
    this.retryAfter = extra.retryAfter;
  }
}

/** 400: invalid input (invalid_input, invalid_answer, duplicate_request). */
export class BadRequestError extends KeelError {}
/** 401: a missing or wrong API key (unauthorized). */
export class UnauthorizedError extends KeelError {}
/** 403: the key, origin or host may not do this (forbidden, origin_not_allowed, host_not_allowed). */
export class ForbiddenError extends KeelError {}
/** 404: unknown session, run or host-input request (not_found, unknown_request). */
export class NotFoundError extends KeelError {}
/** 409: the session refuses the call in its state (run_active, not_accepting, cursor_ahead, ...). */
export class ConflictError extends KeelError {}
/** 413: the request body is over the gateway's limit (body_too_large). */
export class TooLargeError extends KeelError {}
/** 429: the client holds its maximum of streams (too_many_streams); see retryAfter. */
export class TooManyRequestsError extends KeelError {}
/** 503: Temporal, the store or the gateway is unavailable or at a limit; see retryAfter. */
export class UnavailableError extends KeelError {}
/** No answer: the connection failed or broke (status 0, code "connection"). */
export class ConnectionError extends KeelError {}

const byStatus = new Map([
  [400, BadRequestError], [401, UnauthorizedError], [403, ForbiddenError], [404, NotFoundError],
  [409, ConflictError], [413, TooLargeError], [429, TooManyRequestsError], [503, UnavailableError],
]);

// A stream_error event has no status of its own: its code names the class.
const byCode = new Map([
  ["invalid_input", BadRequestError], ["unauthorized", UnauthorizedError], ["forbidden", ForbiddenError],
  ["not_found", NotFoundError], ["not_accepting", ConflictError], ["cursor_ahead", ConflictError],
  ["too_many_streams", TooManyRequestsError], ["unavailable", UnavailableError], ["overloaded", UnavailableError],
]);

/**
 * errorFrom builds the typed error of a gateway answer's status, body and
 * Retry-After header (seconds); status 0 is a stream_error event's body.
 * @param {number} status
 * @param {unknown} body
 * @param {string | null} [retryAfter]
 * @returns {KeelError}
 */
export function errorFrom(status, body, retryAfter) {
  const b = body && typeof body === "object" ? /** @type {any} */ (body) : {};
  const seconds = retryAfter != null && /^\d+$/.test(retryAfter) ? Number(retryAfter) : undefined;
  const Class = byStatus.get(status) || (status === 0 && byCode.get(b.code)) || KeelError;
  return new Class(status, { code: typeof b.code === "string" ? b.code : undefined,
    message: typeof b.message === "string" ? b.message : undefined,
    keel_code: typeof b.keel_code === "string" ? b.keel_code : undefined,
    retryable: typeof b.retryable === "boolean" ? b.retryable : undefined }, { retryAfter: seconds });
}
