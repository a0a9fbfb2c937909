/**
 * The method table with each call's end reported (method and gRPC status), for `kvmq serve --metrics`. Both
 * transports (gRPC and the JSON gateway) call the table's methods, so both are counted, under the method.
 */
import { Code, EtcdError } from '../errors.js';
import type { CallContext, Method, Sink, StreamHandler } from './method.js';
import type { ServedMethod } from './table.js';

/** What `kvmq serve` tells an attached observer (its metrics). */
export interface ServeInstruments {
  /** A call of `method` (e.g. `KV/Range`) ended with the gRPC status `code` (e.g. `OK`, `CANCELLED`). */
  called(method: string, code: string): void;
  /** An fdatasync of the write-ahead log (one group commit) took `seconds`. */
  synced(seconds: number): void;
}

const CODE_NAMES = new Map<number, string>(Object.entries(Code).map(([name, code]) => [code, name]));

function codeName(error: unknown): string {
  const code = error instanceof EtcdError ? error.code : Code.UNKNOWN;
  return CODE_NAMES.get(code) ?? String(code);
}

/** The table with every method reporting its calls' ends to `instruments`. */
export function instrumentTable(
  table: ReadonlyMap<string, ServedMethod>,
  instruments: ServeInstruments,
): Map<string, ServedMethod> {
  const counted = new Map<string, ServedMethod>();
  for (const [path, served] of table) {
    // '/etcdserverpb.KV/Range' → 'KV/Range'
    const name = path.slice(path.indexOf('.') + 1);
    counted.set(path, {
      info: served.info,
      method: instrument(served.method, (code) => instruments.called(name, code)),
    });
  }
  return counted;
}

function instrument(method: Method, report: (code: string) => void): Method {
  switch (method.kind) {
    case 'unary':
      return {
        kind: 'unary',
        handle(request, call) {
          let out: Buffer | Promise<Buffer>;
          try {
            out = method.handle(request, call);
          } catch (error) {
            report(codeName(error));
            throw error;
          }
          if (!(out instanceof Promise)) {
            report('OK');
            return out;
          }
          return out.then(
            (response) => {
              report('OK');
              return response;
            },
            (error: unknown) => {
              report(codeName(error));
              throw error;
            },
          );
        },
      };
    case 'server':
      return {
        kind: 'server',
        handle(request, call, sink) {
          const once = reportOnce(report);
          try {
            method.handle(request, call, endReported(sink, once));
          } catch (error) {
            once(codeName(error));
            throw error;
          }
        },
      };
    case 'bidi':
      return {
        kind: 'bidi',
        open(call: CallContext, sink: Sink): StreamHandler {
          const once = reportOnce(report);
          const handler = method.open(call, endReported(sink, once));
          return {
            message: (message) => handler.message(message),
            end: () => handler.end(),
            close: () => {
              // Closed without the server ending it: the client cancelled or went away.
              once('CANCELLED');
              handler.close();
            },
          };
        },
      };
  }
}

function reportOnce(report: (code: string) => void): (code: string) => void {
  let done = false;
  return (code) => {
    if (done) return;
    done = true;
    report(code);
  };
}

function endReported(sink: Sink, report: (code: string) => void): Sink {
  return {
    send: (message) => sink.send(message),
    end: (error) => {
      if (!sink.ended) report(error === undefined ? 'OK' : codeName(error));
      sink.end(error);
    },
    get ended() {
      return sink.ended;
    },
    backlog: () => sink.backlog(),
  };
}
