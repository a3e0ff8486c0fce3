// The cache node's logger: the shared structured logger (JSON lines on stderr, secrets redacted), marked as the
// node's. stdout stays for the `{"event":...}` lines the fleet managers read.
import { log } from '../../core/util/logger.js';

export const nodeLog = log.child({ component: 'cachenode' });
