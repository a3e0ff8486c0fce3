/**
 * The structured logger (core/util/logger.ts): JSON lines with time, level, message and fields, child loggers
 * for request ids, levels, and redaction of API keys, the fleet secret and presigned query strings.
 */
import { createLogger, redactText, registerSecret, setLogLevel, type LogFields } from '../../core/util/logger.js';

function capture(level?: 'debug' | 'info' | 'warn' | 'error') {
  const lines: LogFields[] = [];
  const logger = createLogger({ level, write: (l) => lines.push(JSON.parse(l) as LogFields), now: () => Date.UTC(2026, 10, 26) });
  return { logger, lines };
}

describe('logger', () => {
  afterEach(() => setLogLevel('info'));

  it('writes one JSON line per event: time, level, message, then the fields', () => {
    const { logger, lines } = capture();
    logger.warn('ring refresh failed', { store: 's3://b/p', attempt: 2 });
    expect(lines).toEqual([
      { time: '2026-11-26T00:00:00.000Z', level: 'warn', msg: 'ring refresh failed', store: 's3://b/p', attempt: 2 },
    ]);
  });

  it("adds a child logger's fields (a request id) to every line, the line's own fields winning", () => {
    const { logger, lines } = capture();
    const req = logger.child({ requestId: 'r-1', component: 'api' });
    req.error('request failed', { code: 'INTERNAL', component: 'keys' });
    expect(lines[0]).toMatchObject({ requestId: 'r-1', component: 'keys', code: 'INTERNAL', level: 'error' });
  });

  it('drops lines below its level, and follows the process level when it has none', () => {
    const { logger, lines } = capture('warn');
    logger.info('not written');
    logger.error('written');
    expect(lines.map((l) => l.msg)).toEqual(['written']);
    const p = capture();
    p.logger.debug('hidden at info');
    setLogLevel('debug');
    p.logger.debug('shown at debug');
    expect(p.lines.map((l) => l.msg)).toEqual(['shown at debug']);
  });

  it('spells out errors: name, message, code, cause and stack', () => {
    const { logger, lines } = capture();
    const cause = Object.assign(new Error('connect ECONNREFUSED 10.0.0.1:6379'), { code: 'ECONNREFUSED' });
    logger.error('hot tier down', { error: new TypeError('no answer', { cause }) });
    expect(lines[0]!.error).toMatchObject({
      name: 'TypeError',
      message: 'no answer',
      stack: expect.stringContaining('TypeError: no answer'),
      cause: { name: 'Error', code: 'ECONNREFUSED', message: 'connect ECONNREFUSED 10.0.0.1:6379' },
    });
  });

  it('redacts API keys, secrets and tokens by field name, at any depth', () => {
    const { logger, lines } = capture();
    logger.info('request', {
      headers: {
        'x-api-key': 'tenant-key-123456',
        'X-Strata-Secret': 'fleet-secret-abcdef',
        authorization: 'AWS4-HMAC-SHA256 Credential=AKIA',
      },
      config: { STRATA_WARM_SECRET: 'fleet-secret-abcdef', apiKey: 'k-1234567890', password: 'hunter2hunter2', tokens: 3 },
    });
    const text = JSON.stringify(lines[0]);
    for (const secret of ['tenant-key-123456', 'fleet-secret-abcdef', 'AKIA', 'k-1234567890', 'hunter2hunter2'])
      expect(text).not.toContain(secret);
    expect(lines[0]).toMatchObject({
      headers: { 'x-api-key': '[redacted]', 'X-Strata-Secret': '[redacted]' },
      config: { tokens: 3 },
    });
  });

  it('redacts presigned query strings and local upload tokens inside any text, the message included', () => {
    const url =
      'https://b.s3.us-east-1.amazonaws.com/strata/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAEXAMPLE%2F20261126%2Fus-east-1' +
      '&X-Amz-Signature=abcdef0123&X-Amz-Security-Token=FwoGZX&X-Amz-Expires=300';
    expect(redactText(url)).toBe(
      'https://b.s3.us-east-1.amazonaws.com/strata/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=[redacted]' +
        '&X-Amz-Signature=[redacted]&X-Amz-Security-Token=[redacted]&X-Amz-Expires=300',
    );
    const { logger, lines } = capture();
    logger.info(`upload to http://localhost:8080/local-blobs/eyJvcCI6InB1dCJ9.c2ln failed`, { location: url });
    expect(lines[0]!.msg).toBe('upload to http://localhost:8080/local-blobs/[redacted] failed');
    expect(JSON.stringify(lines[0])).not.toMatch(/AKIAEXAMPLE|abcdef0123|FwoGZX|c2ln/);
  });

  it("redacts a URL's password and password=... pairs in error messages", () => {
    expect(redactText('connect to rediss://strata:s3cretPW@cache.example:6379 failed')).toBe(
      'connect to rediss://strata:[redacted]@cache.example:6379 failed',
    );
    expect(redactText('ECONNRESET at 10.0.3.7:6379 password=hunter2 token=abc;')).toBe(
      'ECONNRESET at 10.0.3.7:6379 password=[redacted] token=[redacted];',
    );
    expect(redactText('http://localhost:8080/v1/ns/a/keys/b')).toBe('http://localhost:8080/v1/ns/a/keys/b');
  });

  it('redacts a registered secret value wherever it appears (an error message, a nested field)', () => {
    registerSecret('s3cr3t-fleet-value-42');
    const { logger, lines } = capture();
    logger.error('node refused: s3cr3t-fleet-value-42 is wrong', {
      error: new Error('bad secret s3cr3t-fleet-value-42'),
      nested: ['s3cr3t-fleet-value-42'],
    });
    expect(JSON.stringify(lines[0])).not.toContain('s3cr3t-fleet-value-42');
  });

  it('never throws from a write, and survives values JSON cannot encode', () => {
    const logger = createLogger({
      write: () => {
        throw new Error('stream closed');
      },
    });
    expect(() => logger.error('x')).not.toThrow();
    const { logger: ok, lines } = capture();
    const cyclic: Record<string, unknown> = { n: 1n };
    cyclic.self = cyclic;
    ok.info('odd values', { cyclic, buf: Buffer.alloc(3), when: new Date(0), fn: () => 1 });
    expect(lines[0]).toMatchObject({
      cyclic: { n: '1', self: '[circular]' },
      buf: '<3 bytes>',
      when: '1970-01-01T00:00:00.000Z',
    });
  });
});
