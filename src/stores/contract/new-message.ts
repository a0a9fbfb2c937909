/**
 * A NewMessage with every option at the value the client gives when none is set: for code that hands a store
 * messages without going through the client (schedule firings, benches, store tests).
 */
import { DEFAULT_PRIORITY } from '../../model/scheduling.js';
import type { NewMessage } from './contract.js';

export function plainMessage(id: string, payload: Uint8Array, options: Partial<NewMessage> = {}): NewMessage {
  return {
    id,
    payload,
    encoding: 'json',
    metadata: {},
    filters: {},
    filterClass: '',
    initialBackoffMs: 0,
    allowRequeue: false,
    replacePayload: false,
    policy: null,
    priority: DEFAULT_PRIORITY,
    lifo: false,
    group: null,
    debounceId: null,
    ...options,
  };
}
