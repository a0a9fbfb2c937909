/** gRPC status codes as HTTP statuses, the table etcd 3.4's gateway (grpc-gateway v1) uses. */
import { Code } from '../errors.js';

const HTTP_STATUS: Record<number, number> = {
  [Code.OK]: 200,
  [Code.CANCELLED]: 408,
  [Code.UNKNOWN]: 500,
  [Code.INVALID_ARGUMENT]: 400,
  4: 504, // DEADLINE_EXCEEDED
  [Code.NOT_FOUND]: 404,
  6: 409, // ALREADY_EXISTS
  [Code.PERMISSION_DENIED]: 403,
  [Code.RESOURCE_EXHAUSTED]: 429,
  [Code.FAILED_PRECONDITION]: 412,
  10: 409, // ABORTED
  [Code.OUT_OF_RANGE]: 400,
  [Code.UNIMPLEMENTED]: 501,
  [Code.INTERNAL]: 500,
  [Code.UNAVAILABLE]: 503,
  [Code.DATA_LOSS]: 500,
  [Code.UNAUTHENTICATED]: 401,
};

export function httpStatus(code: number): number {
  return HTTP_STATUS[code] ?? 500;
}

/** Go's http.StatusText for the statuses above, which stream errors carry. */
const STATUS_TEXT: Record<number, string> = {
  200: 'OK',
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  408: 'Request Timeout',
  409: 'Conflict',
  412: 'Precondition Failed',
  429: 'Too Many Requests',
  500: 'Internal Server Error',
  501: 'Not Implemented',
  503: 'Service Unavailable',
  504: 'Gateway Timeout',
};

export function statusText(status: number): string {
  return STATUS_TEXT[status] ?? '';
}

/** The names grpc-go prints in "rpc error: code = Unauthenticated desc = ...". */
const CODE_NAMES: Record<number, string> = {
  0: 'OK',
  1: 'Canceled',
  2: 'Unknown',
  3: 'InvalidArgument',
  4: 'DeadlineExceeded',
  5: 'NotFound',
  6: 'AlreadyExists',
  7: 'PermissionDenied',
  8: 'ResourceExhausted',
  9: 'FailedPrecondition',
  10: 'Aborted',
  11: 'OutOfRange',
  12: 'Unimplemented',
  13: 'Internal',
  14: 'Unavailable',
  15: 'DataLoss',
  16: 'Unauthenticated',
};

export function grpcCodeName(code: number): string {
  return CODE_NAMES[code] ?? `Code(${code})`;
}
