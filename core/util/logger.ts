// One structured logger for the API, the workflows and the cache nodes: one JSON line per event (time, level,
// message, fields), a request id through child loggers, and secrets redacted before anything is written.
import { inspect } from 'node:util';

export const LOG_LEVELS = ['debug', 'info', 'warn', 'error'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];
export type LogFields = Record<string, unknown>;
const RANK: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };

export interface Logger {
  debug(msg: string, fields?: LogFields): void;
  info(msg: string, fields?: LogFields): void;
  warn(msg: string, fields?: LogFields): void;
  error(msg: string, fields?: LogFields): void;
  /** A logger that adds `fields` to every line (a request id, a node id, a workflow execution). */
  child(fields: LogFields): Logger;
}

export interface LoggerOptions {
  /** Lines below this level are dropped. @default the process level ({@link setLogLevel}; `info`) */
  level?: LogLevel;
  /** Where a line goes (without its newline). @default stderr */
  write?: (line: string) => void;
  /** Fields on every line. */
  fields?: LogFields;
  /** @default Date.now */
  now?: () => number;
}

const REDACTED = '[redacted]';

/**
 * Field names whose values are secrets wherever they appear: API keys, the fleet secret, credentials, tokens,
 * anything named `...secret` or `...password`. Matched case-insensitively with `-` and `_` removed, so
 * `x-api-key`, `apiKey` and `STRATA_WARM_SECRET` all match.
 */
const SECRET_NAME =
  /^(?:x?apikey|authorization|(?:set)?cookie|(?:session|xamzsecurity)?token|secretaccesskey|passwd)$|(?:secret|password)$/;
const isSecretName = (k: string): boolean => SECRET_NAME.test(k.replace(/[-_]/g, '').toLowerCase());

/**
 * Secrets inside text: presigned S3 query parameters (the signature, the credential naming the access key, the
 * session token), the signed token of a local-folder tier URL (`/local-blobs/<token>`), the password of a URL
 * (`rediss://user:password@host`), and `password=...`-style pairs in error messages.
 */
const SECRET_TEXT: readonly [RegExp, string][] = [
  [/([?&](?:X-Amz-Signature|X-Amz-Credential|X-Amz-Security-Token|Signature|AWSAccessKeyId)=)[^&\s"'<>]*/gi, `$1${REDACTED}`],
  [/(\/local-blobs\/)[^\s"'?<>]+/g, `$1${REDACTED}`],
  [/(\b[a-z][a-z0-9+.-]*:\/\/[^:/\s@]*:)[^@\s/]+@/gi, `$1${REDACTED}@`],
  [/(\b(?:password|passwd|secret|token|api[-_]?key)=)[^\s&"',;]+/gi, `$1${REDACTED}`],
];

/** Values known to be secret at run time (the fleet secret once read), replaced wherever they appear in text. */
const knownSecrets = new Set<string>();

/**
 * Registers a secret value (the fleet secret, an API key) so that no line ever carries it, whatever field or
 * message it ends up in. Values shorter than 8 characters are ignored: redacting them would garble ordinary text.
 */
export function registerSecret(value: string | undefined): void {
  if (value && value.length >= 8) knownSecrets.add(value);
}

/** `text` with every registered secret and secret-looking URL part replaced by `[redacted]`. */
export function redactText(text: string): string {
  let out = text;
  for (const s of knownSecrets) if (out.includes(s)) out = out.split(s).join(REDACTED);
  for (const [re, to] of SECRET_TEXT) out = out.replace(re, to);
  return out;
}

const MAX_DEPTH = 6;

/** A value ready for JSON: secrets redacted, errors spelled out (name, message, code, cause, stack), cycles cut. */
export function redactValue(value: unknown, depth = 0, seen = new WeakSet<object>()): unknown {
  if (typeof value === 'string') return redactText(value);
  if (typeof value === 'bigint') return value.toString();
  if (value === null || typeof value !== 'object') return typeof value === 'function' ? undefined : value;
  if (seen.has(value)) return '[circular]';
  if (depth >= MAX_DEPTH) return redactText(inspect(value, { depth: 0, breakLength: Number.POSITIVE_INFINITY }));
  seen.add(value);
  if (value instanceof Error) {
    const e = value as Error & { code?: unknown };
    const out: LogFields = { name: e.name, message: redactText(e.message) };
    if (e.code !== undefined) out.code = e.code;
    if (e.cause !== undefined) out.cause = redactValue(e.cause, depth + 1, seen);
    if (e.stack) out.stack = redactText(e.stack);
    return out;
  }
  if (Buffer.isBuffer(value)) return `<${value.length} bytes>`;
  if (value instanceof Date) return value.toISOString();
  if (Array.isArray(value)) return value.map((v) => redactValue(v, depth + 1, seen));
  if (value instanceof Map) return redactValue(Object.fromEntries(value), depth + 1, seen);
  if (value instanceof Set) return redactValue([...value], depth + 1, seen);
  const out: LogFields = {};
  for (const [k, v] of Object.entries(value)) out[k] = isSecretName(k) && v != null ? REDACTED : redactValue(v, depth + 1, seen);
  return out;
}

let processLevel: LogLevel = 'info';

/** The level of loggers made without one (the composition root sets it from STRATA_LOG_LEVEL). */
export function setLogLevel(level: LogLevel): void {
  processLevel = level;
}

const stderrWrite = (line: string): void => {
  process.stderr.write(`${line}\n`);
};

/** A logger writing JSON lines: `{"time","level","msg",...fields}`, fields of the line last (they win). */
export function createLogger(o: LoggerOptions = {}): Logger {
  const write = o.write ?? stderrWrite;
  const now = o.now ?? Date.now;
  const base = o.fields ?? {};
  const emit = (level: LogLevel, msg: string, fields?: LogFields): void => {
    if (RANK[level] < RANK[o.level ?? processLevel]) return;
    const line = redactValue({ ...base, ...fields }) as LogFields;
    try {
      write(JSON.stringify({ time: new Date(now()).toISOString(), level, msg: redactText(msg), ...line }));
    } catch {
      // A log line must never fail the work that wrote it (a closed stream, a value JSON cannot encode).
    }
  };
  return {
    debug: (msg, fields) => emit('debug', msg, fields),
    info: (msg, fields) => emit('info', msg, fields),
    warn: (msg, fields) => emit('warn', msg, fields),
    error: (msg, fields) => emit('error', msg, fields),
    child: (fields) => createLogger({ ...o, fields: { ...base, ...fields } }),
  };
}

/** The process's logger: stderr, at the process level. */
export const log: Logger = createLogger();

/**
 * Writes a line given as an object (`{ level, msg, ...fields }`, the shape of the callbacks tests inject) through
 * a logger; an unknown level counts as `info`.
 */
export function logLine(line: Readonly<Record<string, unknown>>, logger: Logger = log): void {
  const { level, msg, ...fields } = line;
  const at = LOG_LEVELS.includes(level as LogLevel) ? (level as LogLevel) : 'info';
  logger[at](String(msg ?? ''), fields);
}
