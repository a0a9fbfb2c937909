/** kvmq serve: the light etcd v3 API server. */
export { startServer, parseListen, SERVE_DEFAULTS, ETCD_API_VERSION } from './server.js';
export { ServeError } from '../model/errors.js';
export type { ServeOptions, RunningServer, HttpMount } from './server.js';
export type { ServeInstruments } from './rpc/instrumented.js';
