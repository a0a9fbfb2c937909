/**
 * The end-of-queue backoffs after 1 to 5 dry runs in a row, for a store that counts dry runs on the server and
 * sends them with each claim (Carmine's client precomputes them so). The worker's backoff grows no further
 * after the fifth (claim-loop.ts), so the fifth serves every later run.
 */
import type { ClaimRequest } from './contract.js';

const STEPS = [1, 2, 3, 4, 5];

export function eoqSteps(request: ClaimRequest): number[] {
  return STEPS.map((n) => request.eoqBackoffMs(n));
}
