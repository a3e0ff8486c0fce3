/**
 * The SDK's socket HTTP client for presigned URLs (sdk/src/socket-http.ts) against real local servers: raw `net`
 * servers that write exact bytes (split where a test says), node:http, and https with a self-signed certificate.
 */
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import {
  createServer as createHttpServer,
  type IncomingMessage,
  type Server as HttpServer,
  type ServerResponse,
} from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { NetworkError, StrataClient, TimeoutError } from '../../sdk/src/index.js';
import { setSocketTestCa, socketFetch } from '../../sdk/src/socket-http.js';
import { selfSignedLocalhost } from '../helpers/self-signed-cert.js';
import type { FetchLike } from '../../sdk/src/types.js';

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));
const fetchOver = (): FetchLike => {
  const f = socketFetch();
  if (!f) throw new Error('no socket client on this runtime');
  return f;
};

/** Deterministic bytes: every value differs from its neighbours, so a misplaced or repeated byte shows. */
function pattern(n: number, seed = 1): Uint8Array {
  const out = new Uint8Array(n);
  for (let i = 0; i < n; i++) out[i] = (Math.imul(i + seed, 2654435761) >>> 24) & 0xff;
  return out;
}

async function readDefault(body: ReadableStream<Uint8Array>): Promise<Buffer> {
  const parts: Uint8Array[] = [];
  const reader = body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return Buffer.concat(parts);
    parts.push(value);
  }
}

/** BYOB reads into one reused buffer of `size` bytes (each chunk copied out before the buffer is reused). */
async function readByob(body: ReadableStream<Uint8Array>, size = 64 * 1024): Promise<Buffer> {
  const parts: Buffer[] = [];
  const reader = body.getReader({ mode: 'byob' });
  let buf = new Uint8Array(size);
  for (;;) {
    const { done, value } = await reader.read(buf);
    if (done) return Buffer.concat(parts);
    parts.push(Buffer.from(value));
    buf = new Uint8Array(value.buffer);
  }
}

interface Raw {
  url: string;
  /** The request heads received, as text. */
  heads: string[];
  sockets: Socket[];
  close(): Promise<void>;
}

/** A server that answers each connection with `answer(socket)` once the request's head has arrived. */
async function rawServer(answer: (socket: Socket, head: string) => void | Promise<void>): Promise<Raw> {
  const heads: string[] = [];
  const sockets: Socket[] = [];
  const server: Server = createServer((socket) => {
    sockets.push(socket);
    socket.on('error', () => {});
    let got = '';
    const onData = (d: Buffer): void => {
      got += d.toString('latin1');
      const end = got.indexOf('\r\n\r\n');
      if (end < 0) return;
      socket.off('data', onData);
      heads.push(got.slice(0, end));
      void answer(socket, got.slice(0, end));
    };
    socket.on('data', onData);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/obj?X-Sig=abc`,
    heads,
    sockets,
    close: () => {
      for (const s of sockets) s.destroy();
      return new Promise((r) => server.close(() => r()));
    },
  };
}

/** Writes `bytes` in pieces cut at `cuts`, pausing between them so each piece arrives as a read of its own. */
async function writeSplit(socket: Socket, bytes: Buffer, cuts: number[]): Promise<void> {
  socket.setNoDelay(true);
  let at = 0;
  for (const cut of [...cuts, bytes.length]) {
    if (cut <= at) continue;
    await new Promise<void>((r, j) => socket.write(bytes.subarray(at, cut), (e) => (e ? j(e) : r())));
    at = cut;
    await pause(2);
  }
}

function chunked(body: Uint8Array, sizes: number[], trailer = ''): Buffer {
  const out: Buffer[] = [];
  let at = 0;
  for (let i = 0; at < body.length; i++) {
    const n = Math.min(body.length - at, Math.max(1, sizes[i % sizes.length]!));
    // Upper-case hex and an extension on odd chunks: both are legal.
    out.push(Buffer.from(`${i % 2 ? n.toString(16).toUpperCase() + ';ext=1' : n.toString(16)}\r\n`, 'latin1'));
    out.push(Buffer.from(body.subarray(at, at + n)), Buffer.from('\r\n'));
    at += n;
  }
  out.push(Buffer.from(`0\r\n${trailer}\r\n`, 'latin1'));
  return Buffer.concat(out);
}

describe('socket HTTP client (presigned URLs)', () => {
  let servers: { close(): Promise<void> }[] = [];
  const track = <T extends { close(): Promise<void> }>(s: T): T => (servers.push(s), s);
  /** A node:http server on a free local port, closed after the test; resolves to a URL of it. */
  const httpServer = async (handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<string> => {
    const server: HttpServer = createHttpServer(handler);
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    track({ close: () => new Promise<void>((r) => server.close(() => r())) });
    return `http://127.0.0.1:${(server.address() as AddressInfo).port}/x`;
  };
  afterEach(async () => {
    await Promise.all(servers.map((s) => s.close()));
    servers = [];
  });

  it('sends GET with the given headers and connection: close; a content-length body reads the same by BYOB and default', async () => {
    const body = pattern(300_000);
    const raw = track(
      await rawServer((s) => {
        s.write(`HTTP/1.1 200 OK\r\ncontent-length: ${body.length}\r\netag: "e1"\r\nx-multi: a\r\nx-multi: b\r\n\r\n`);
        s.end(body);
      }),
    );
    const f = fetchOver();
    const a = await f(raw.url, { headers: { range: 'bytes=0-', 'if-match': '"e1"' } });
    expect([a.status, a.headers.get('etag'), a.headers.get('x-multi'), a.headers.get('content-length')]).toEqual([
      200,
      '"e1"',
      'a, b',
      String(body.length),
    ]);
    expect((await readByob(a.body!, 1000)).equals(body)).toBe(true);
    const b = await f(raw.url, {});
    expect((await readDefault(b.body!)).equals(body)).toBe(true);
    const head = raw.heads[0]!.split('\r\n');
    expect(head[0]).toBe('GET /obj?X-Sig=abc HTTP/1.1');
    expect(head).toEqual(expect.arrayContaining(['range: bytes=0-', 'if-match: "e1"', 'connection: close']));
    expect(head.some((l) => /^host: 127\.0\.0\.1:\d+$/.test(l))).toBe(true);
  });

  it('reads a chunked body (node:http without content-length), BYOB and default alike', async () => {
    const body = pattern(1_000_003, 7);
    const url = await httpServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      for (let at = 0; at < body.length; at += 70_001) res.write(body.subarray(at, at + 70_001));
      res.end();
    });
    const f = fetchOver();
    const one = await f(url, {});
    expect(one.headers.get('transfer-encoding')).toBe('chunked');
    expect((await readByob(one.body!, 4096)).equals(body)).toBe(true);
    expect((await readDefault((await f(url, {})).body!)).equals(body)).toBe(true);
  });

  it('a default reader gets chunks of at most 8 KiB (each a new buffer); a BYOB read fills its whole view', async () => {
    // A default read's chunk is a new allocation V8 reclaims only at a later collection: small ones bound the spent
    // bytes outstanding (a 1 GiB round trip through a default reader peaked at ~141 MiB with 64 KiB chunks, ~113
    // with 8 KiB: bench stream).
    const body = pattern(1_000_000, 3);
    const url = await httpServer((_req, res) => {
      res.writeHead(200, { 'content-length': String(body.length) });
      res.end(body);
    });
    const f = fetchOver();
    const sizes: number[] = [];
    const parts: Uint8Array[] = [];
    const reader = (await f(url, {})).body!.getReader();
    for (let r = await reader.read(); !r.done; r = await reader.read()) {
      sizes.push(r.value.byteLength);
      parts.push(r.value);
    }
    expect(Buffer.concat(parts).equals(body)).toBe(true);
    expect(Math.max(...sizes)).toBe(8 * 1024);
    // No chunk shares its memory with another: each is the reader's to keep.
    expect(new Set(parts.map((p) => p.buffer)).size).toBe(parts.length);
    const byob = (await f(url, {})).body!.getReader({ mode: 'byob' });
    let most = 0;
    for (let r = await byob.read(new Uint8Array(48 * 1024)); !r.done; r = await byob.read(new Uint8Array(r.value.buffer)))
      most = Math.max(most, r.value.byteLength);
    expect(most).toBe(48 * 1024);
  });

  it('a response split across reads at every offset of its head, and anywhere in a chunked body, reads intact', async () => {
    const body = pattern(5_000, 3);
    const headOnly = Buffer.from(
      `HTTP/1.1 206 Partial Content\r\ncontent-range: bytes 0-4999/9000\r\ncontent-length: 5000\r\n\r\n`,
    );
    let next: { bytes: Buffer; cuts: number[] } = { bytes: Buffer.alloc(0), cuts: [] };
    const raw = track(await rawServer((s) => writeSplit(s, next.bytes, next.cuts).then(() => void s.end())));
    const f = fetchOver();
    const check = async (bytes: Buffer, cuts: number[], byob: boolean) => {
      next = { bytes, cuts };
      const res = await f(raw.url, {});
      expect(res.status).toBe(206);
      expect(res.headers.get('content-range')).toBe('bytes 0-4999/9000');
      const got = byob ? await readByob(res.body!, 777) : await readDefault(res.body!);
      expect(got.equals(body)).toBe(true);
    };
    // Every single cut in the head (and the first body bytes), the blank line included.
    const whole = Buffer.concat([headOnly, body]);
    for (let cut = 1; cut <= headOnly.length + 2; cut++) await check(whole, [cut], cut % 2 === 0);
    // Several cuts anywhere, in a chunked body with trailers: size lines, CRLFs and trailers split too.
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.integer({ min: 1, max: 3000 }), { minLength: 1, maxLength: 4 }),
        fc.array(fc.integer({ min: 1, max: 6000 }), { maxLength: 6 }),
        fc.boolean(),
        async (sizes, cuts, byob) => {
          const head = 'HTTP/1.1 206 Partial Content\r\ncontent-range: bytes 0-4999/9000\r\ntransfer-encoding: chunked\r\n\r\n';
          const bytes = Buffer.concat([Buffer.from(head), chunked(body, sizes, 'x-checksum: 1\r\n')]);
          await check(
            bytes,
            [...new Set(cuts.map((c) => c % bytes.length))].sort((x, y) => x - y),
            byob,
          );
        },
      ),
      { numRuns: 40 },
    );
  });

  it('a body cut short errors the stream (content-length, chunked, reset): never a short value that ends', async () => {
    const body = pattern(50_000);
    const answers: ((s: Socket) => void)[] = [
      (s) =>
        s.end(
          Buffer.concat([Buffer.from(`HTTP/1.1 200 OK\r\ncontent-length: ${body.length}\r\n\r\n`), body.subarray(0, 20_000)]),
        ),
      (s) =>
        s.end(
          Buffer.concat([
            Buffer.from('HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n'),
            chunked(body, [9000]).subarray(0, 30_000),
          ]),
        ),
      // The final chunk without its closing blank line.
      (s) =>
        s.end(
          Buffer.concat([Buffer.from('HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n'), Buffer.from('3\r\nabc\r\n0\r\n')]),
        ),
      (s) => {
        s.write(
          Buffer.concat([Buffer.from(`HTTP/1.1 200 OK\r\ncontent-length: ${body.length}\r\n\r\n`), body.subarray(0, 10_000)]),
        );
        setTimeout(() => s.resetAndDestroy(), 20);
      },
      (s) => s.end('HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n'),
    ];
    let i = 0;
    const raw = track(await rawServer((s) => answers[i++]!(s)));
    const f = fetchOver();
    for (let n = 0; n < answers.length; n++) {
      const res = await f(raw.url, {});
      const err = await (n % 2 ? readDefault(res.body!) : readByob(res.body!)).then(
        (b) => new Error(`answer ${n}: read ${b.length} bytes and ended`),
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(NetworkError);
    }
  });

  it('a reset or a close before the head rejects the request; a bad content-length or status line too', async () => {
    const answers: ((s: Socket) => void)[] = [
      (s) => s.end('HTTP/1.1 200 OK\r\ncontent-len'),
      (s) => s.end('HTTP/1.1 200 OK\r\ncontent-length: 5, 6\r\n\r\nhello'),
      (s) => s.end('SPDY/9 200 OK\r\n\r\n'),
    ];
    let i = 0;
    const raw = track(await rawServer((s) => answers[i++]!(s)));
    const f = fetchOver();
    for (let n = 0; n < answers.length; n++) await expect(f(raw.url, {})).rejects.toThrow();
  });

  it('abort mid-body errors the reader with the reason and closes the connection', async () => {
    let closed: Promise<void> | undefined;
    const raw = track(
      await rawServer((s) => {
        closed = new Promise((r) => s.on('close', () => r()));
        s.write(`HTTP/1.1 200 OK\r\ncontent-length: 10000000\r\n\r\n`);
        s.write(pattern(100_000));
      }),
    );
    const ctl = new AbortController();
    const res = await fetchOver()(raw.url, { signal: ctl.signal });
    const reader = res.body!.getReader({ mode: 'byob' });
    const first = await reader.read(new Uint8Array(1000));
    expect(first.value!.byteLength).toBeGreaterThan(0);
    const reason = new Error('stop');
    ctl.abort(reason);
    await expect(reader.read(new Uint8Array(1000))).rejects.toBe(reason);
    await closed;
  });

  it('small BYOB views get the whole body in order: what a view cannot take is held back for the next read', async () => {
    const body = pattern(200_000, 11);
    const raw = track(
      await rawServer((s) => {
        s.write(`HTTP/1.1 200 OK\r\ncontent-length: ${body.length}\r\n\r\n`);
        s.end(body);
      }),
    );
    const res = await fetchOver()(raw.url, {});
    // Nothing is read for a while: the body waits (in the carry and the kernel), then arrives whole in 1-byte to
    // 9-byte reads.
    await pause(20);
    const reader = res.body!.getReader({ mode: 'byob' });
    const parts: Buffer[] = [];
    let total = 0;
    for (let k = 0; ; k++) {
      const { done, value } = await reader.read(new Uint8Array(k < 2000 ? 1 + (k % 9) : 65536));
      if (done) break;
      parts.push(Buffer.from(value));
      total += value.byteLength;
    }
    expect(total).toBe(body.length);
    expect(Buffer.concat(parts).equals(body)).toBe(true);
  });

  describe('TLS', () => {
    let dir: string;
    let cert: string;
    let url: string;
    let servernames: (string | false)[];
    let server: ReturnType<typeof createHttpsServer>;
    const body = pattern(400_000, 5);

    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), 'strata-socket-tls-'));
      await selfSignedLocalhost(dir, 'ec', ['ec_paramgen_curve:prime256v1']);
      cert = readFileSync(join(dir, 'cert.pem'), 'utf8');
      servernames = [];
      server = createHttpsServer({ key: readFileSync(join(dir, 'key.pem')), cert }, (req, res) => {
        servernames.push((req.socket as unknown as { servername: string | false }).servername);
        res.writeHead(200, { 'content-length': body.length }).end(body);
      });
      // Every address (IPv6 too where there is one): localhost may resolve to ::1 or 127.0.0.1.
      await new Promise<void>((r) => server.listen(0, r));
      url = `https://localhost:${(server.address() as AddressInfo).port}/tls-obj`;
    });
    afterAll(async () => {
      setSocketTestCa(undefined);
      await new Promise<void>((r) => server.close(() => r()));
      rmSync(dir, { recursive: true, force: true });
    });

    it('refuses a certificate no trusted CA signed, and reads over TLS (with SNI) once the test CA is trusted', async () => {
      const err = await fetchOver()(url, {}).catch((e: unknown) => e);
      expect((err as { code?: string }).code).toBe('DEPTH_ZERO_SELF_SIGNED_CERT');
      expect(servernames).toEqual([]);
      setSocketTestCa(cert);
      try {
        const res = await fetchOver()(url, {});
        expect(
          createHash('sha256')
            .update(await readByob(res.body!))
            .digest('hex'),
        ).toBe(createHash('sha256').update(body).digest('hex'));
        expect(servernames).toEqual(['localhost']);
      } finally {
        setSocketTestCa(undefined);
      }
    });
  });

  describe('StrataClient uses it for the presigned download only on Node, without a fetch of its own or a proxy', () => {
    let api: HttpServer;
    let base: string;
    const value = pattern(70_000, 9);
    let blobHeads: string[];
    let stuckClosed: Promise<void> | undefined;
    let versions = 0;
    beforeAll(async () => {
      blobHeads = [];
      api = createHttpServer((req, res) => {
        if (req.url?.startsWith('/v1/ns/app/keys/big')) {
          res.writeHead(303, {
            location: `/blob/big?sig=1`,
            etag: '"v7"',
            'x-strata-version': '7',
            'content-type': 'text/plain',
            'content-length': 0,
          });
          return res.end();
        }
        const redirect = /^\/v1\/ns\/app\/keys\/(replaced|gone)$/.exec(req.url ?? '');
        if (redirect) {
          res.writeHead(303, { location: `/blob/${redirect[1]}`, 'x-strata-version': String(++versions), 'content-length': 0 });
          return res.end();
        }
        // The first download of 'replaced' finds it replaced (412); the redirect is asked again and then read.
        if (req.url === '/blob/replaced') {
          if (versions < 2) return res.writeHead(412, { 'content-length': 3 }).end('old');
          return res.writeHead(200, { 'content-length': value.length }).end(value);
        }
        if (req.url === '/blob/gone') return res.writeHead(404, { 'content-length': 4 }).end('gone');
        if (req.url?.startsWith('/v1/ns/app/keys/stuck')) {
          res.writeHead(303, { location: '/blob/stuck', 'x-strata-version': '1', 'content-length': 0 });
          return res.end();
        }
        // Never answers: only the transfer timeout ends the wait for the download's head.
        if (req.url?.startsWith('/blob/stuck')) {
          stuckClosed = new Promise((r) => req.socket.on('close', () => r()));
          return;
        }
        if (req.url?.startsWith('/blob/big')) {
          blobHeads.push(JSON.stringify(req.headers));
          return res.writeHead(200, { 'content-length': value.length }).end(value);
        }
        res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":{"code":"ROUTE_NOT_FOUND","message":"no"}}');
      });
      await new Promise<void>((r) => api.listen(0, '127.0.0.1', r));
      base = `http://127.0.0.1:${(api.address() as AddressInfo).port}`;
    });
    afterAll(() => {
      api.closeAllConnections();
      return new Promise<void>((r) => api.close(() => r()));
    });

    const viaFetch = async (env: Record<string, string>): Promise<string[]> => {
      const seen: string[] = [];
      const original = globalThis.fetch;
      const saved = Object.fromEntries(Object.keys(env).map((k) => [k, process.env[k]]));
      Object.assign(process.env, env);
      globalThis.fetch = ((input: string | URL, init?: RequestInit) => {
        seen.push(new URL(String(input)).pathname);
        return original(input, init);
      }) as typeof fetch;
      try {
        const strata = new StrataClient({ endpoint: base, namespace: 'app', retries: 0 });
        const item = await strata.getStream('big');
        expect((await readByob(item!.body)).equals(value)).toBe(true);
      } finally {
        globalThis.fetch = original;
        for (const [k, v] of Object.entries(saved))
          if (v === undefined) delete process.env[k];
          else process.env[k] = v;
      }
      return seen;
    };

    it('the 303 goes through fetch, the presigned GET over the socket client', async () => {
      expect(await viaFetch({})).toEqual(['/v1/ns/app/keys/big']);
      expect(blobHeads.length).toBeGreaterThan(0);
    });

    it('a download answering 412 is asked again through the redirect; one answering 404 is a missing key', async () => {
      versions = 0;
      const strata = new StrataClient({ endpoint: base, namespace: 'app', retries: 0 });
      const item = await strata.getStream('replaced');
      expect(item!.version).toBe(2);
      expect((await readByob(item!.body)).equals(value)).toBe(true);
      expect(await strata.getStream('gone')).toBeUndefined();
    });

    it('transferTimeoutMs bounds the wait for the download to answer (TimeoutError, the connection dropped)', async () => {
      const strata = new StrataClient({ endpoint: base, namespace: 'app', retries: 0, transferTimeoutMs: 300 });
      await expect(strata.getStream('stuck')).rejects.toBeInstanceOf(TimeoutError);
      await stuckClosed;
    });

    it('with an HTTP(S) proxy in the environment, the presigned GET stays on fetch', async () => {
      expect(await viaFetch({ HTTPS_PROXY: 'http://127.0.0.1:9', NO_PROXY: '*' })).toEqual(['/v1/ns/app/keys/big', '/blob/big']);
    });
  });
});
