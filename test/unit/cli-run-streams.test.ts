/**
 * `strata get --out/--range` and `strata put --file`, in-process against the real local server (memory + local
 * folder, a low inline limit so values go through the upload and download URLs) and real files.
 */
import { jest } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runCli, type CliContext } from '../../sdk/src/cli-run.js';
import { startTestApi, type TestApi } from '../helpers/api-server.js';

const MiB = 1024 * 1024;

describe('strata get --out / --range and put --file (local server, real files)', () => {
  let api: TestApi;
  let dir: string;

  beforeAll(async () => {
    api = await startTestApi('embedded', { STRATA_INLINE_LIMIT_BYTES: String(64 * 1024) });
    dir = mkdtempSync(join(tmpdir(), 'strata-cli-streams-'));
  });
  afterAll(async () => {
    await api?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  async function strata(args: string[], stdin?: Buffer): Promise<{ code: number; out: Buffer; err: string }> {
    const out: Buffer[] = [];
    let err = '';
    const ctx: CliContext = {
      stdout: { write: (c: string | Uint8Array) => void out.push(Buffer.from(c)) },
      stderr: { write: (t: string) => void (err += t) },
      env: { STRATA_ENDPOINT: api.url, STRATA_NAMESPACE: 'cli' },
      stdin: stdin === undefined ? undefined : [stdin],
    };
    const code = await runCli(args, ctx);
    return { code, out: Buffer.concat(out), err };
  }

  it('put --file streams a 12 MiB file up in parts; get -o streams it back byte for byte', async () => {
    const value = randomBytes(12 * MiB + 17);
    writeFileSync(join(dir, 'in.bin'), value);
    const put = await strata(['put', 'blob', '--file', join(dir, 'in.bin'), '--content-type', 'application/x-blob']);
    expect([put.code, put.err]).toEqual([0, '']);
    expect(JSON.parse(put.out.toString())).toMatchObject({ key: 'blob', size: value.length });
    // Read through a BYOB reader into one buffer: nothing allocated per read (a default reader gets a new chunk a
    // read, which V8 frees late).
    const getReader = jest.spyOn(ReadableStream.prototype, 'getReader');
    try {
      const get = await strata(['get', 'blob', '-o', join(dir, 'out.bin'), '-v']);
      expect(get.code).toBe(0);
      expect(get.err).toContain(`size     ${value.length} bytes`);
      expect(getReader).toHaveBeenCalledWith({ mode: 'byob' });
    } finally {
      getReader.mockRestore();
    }
    expect(readFileSync(join(dir, 'out.bin')).equals(value)).toBe(true);
  });

  it('--range writes those bytes (to stdout with -o - or by default); past the end is RANGE_NOT_SATISFIABLE, exit 2', async () => {
    const value = randomBytes(300_000);
    await strata(['put', 'ranged', '-f', '-'], value);
    const mid = await strata(['get', 'ranged', '--range', '1000-1999']);
    expect(mid.code).toBe(0);
    expect(mid.out.equals(value.subarray(1000, 2000))).toBe(true);
    const tail = await strata(['get', 'ranged', '--range', '299990-', '-o', '-']);
    expect(tail.out.equals(value.subarray(299_990))).toBe(true);
    const past = await strata(['get', 'ranged', '--range', '300000-']);
    expect(past.code).toBe(2);
    expect(past.err).toContain('RANGE_NOT_SATISFIABLE (HTTP 416)');
  });

  it('refuses mistakes with one line: a bad --range, a missing file, a value and --file, --if-none-match with --out', async () => {
    const bad = await strata(['get', 'x', '--range', '5-1']);
    expect([bad.code, bad.err]).toEqual([2, expect.stringContaining('--range takes first-last byte offsets')]);
    const missing = await strata(['put', 'x', '--file', join(dir, 'nope.bin')]);
    expect([missing.code, missing.err]).toEqual([2, expect.stringContaining('is not a readable file')]);
    const both = await strata(['put', 'x', 'v', '--file', join(dir, 'in.bin')]);
    expect(both.err).toContain('a value or --file, not both');
    const cond = await strata(['get', 'x', '-o', '-', '--if-none-match', '3']);
    expect(cond.err).toContain('--if-none-match does not go with --out');
    const absent = await strata(['get', 'absent', '-o', join(dir, 'absent.bin')]);
    expect([absent.code, absent.err]).toEqual([1, 'strata: absent not found\n']);
  });
});
