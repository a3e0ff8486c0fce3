/**
 * NodeClient (the cache nodes' HTTP client, node:http) against a scripted local HTTP server: headers, keep-alive
 * and the connection bound, timeouts in each phase, slow consumers, streamed export and import, aborts, error
 * mapping, close/forget, and that nothing leaks (sockets, listeners).
 */
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { getEventListeners } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { RING_MIN } from '../../core/ring/hash.js';
import { NodeClient, NodeRequestError, NodeUnavailableError, StaleRouteError } from '../../core/nodes/node-client.js';
import {
  encodeEntryHeader,
  encodeEntryRecord,
  encodeTrailerRecord,
  ENTRY_HEADER,
  RING_HEADER,
  SECRET_HEADER,
} from '../../core/nodes/wire.js';
import { entry } from '../helpers/tiers.js';

const SECRET = 'unit-secret-0123456789';
type Handler = (req: IncomingMessage, res: ServerResponse) => void;

let server: Server;
let url: string;
let handler: Handler = (_req, res) => res.end();
/** Sockets the server has accepted, and those still open. */
let accepted = 0;
const open = new Set<Socket>();
let maxOpen = 0;
/**
 * The client's own view: its sockets open at once. The server's count lags when the client replaces a socket it
 * destroyed (the new connection can be accepted before the old one's end is read), so bounds are checked here.
 */
const clientOpen = new Set<Socket>();
let maxClientOpen = 0;
const onClientSocket = (message: unknown) => {
  const s = (message as { socket: Socket }).socket;
  clientOpen.add(s);
  maxClientOpen = Math.max(maxClientOpen, clientOpen.size);
  s.once('close', () => clientOpen.delete(s));
};

beforeAll(async () => {
  server = createServer({ keepAliveTimeout: 65_000 }, (req, res) => handler(req, res));
  server.on('connection', (s: Socket) => {
    accepted++;
    open.add(s);
    maxOpen = Math.max(maxOpen, open.size);
    s.on('close', () => open.delete(s));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  subscribe('net.client.socket', onClientSocket);
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  unsubscribe('net.client.socket', onClientSocket);
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

let warnings: Error[] = [];
const onWarning = (w: Error) => warnings.push(w);
beforeEach(() => {
  warnings = [];
  process.on('warning', onWarning);
  server.closeAllConnections();
  accepted = 0;
  maxOpen = 0;
  maxClientOpen = clientOpen.size;
  handler = (_req, res) => res.end();
});
/** Every client a test makes is closed after it, so a test that fails early cannot leave requests to the next. */
const clients: NodeClient[] = [];
const track = (c: NodeClient) => (clients.push(c), c);
afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.close()));
  process.off('warning', onWarning);
  expect(warnings.filter((w) => w.name === 'MaxListenersExceededWarning')).toEqual([]);
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const json = (res: ServerResponse, status: number, body: unknown) => {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
};
async function readBody(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}
/** Blocks the event loop, as a long GC pause or a starved process does. */
function stallEventLoop(ms: number): void {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    // spin
  }
}
async function eventually(probe: () => boolean, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!probe()) {
    if (Date.now() > end) throw new Error('condition not reached');
    await sleep(10);
  }
}

describe('NodeClient (node:http)', () => {
  it('sends the secret and ring version, round trips binary values and keeps its connection alive', async () => {
    const stored = new Map<string, { header: string; value: Buffer }>();
    const seen: IncomingMessage['headers'][] = [];
    handler = (req, res) => {
      seen.push(req.headers);
      void readBody(req).then((body) => {
        if (req.method === 'PUT') {
          stored.set(req.url!, { header: req.headers[ENTRY_HEADER] as string, value: body });
          return json(res, 200, { applied: true, current: 1 });
        }
        const e = stored.get(req.url!);
        if (!e) return json(res, 404, { error: { code: 'NOT_FOUND', message: 'no' } });
        // As the node does: a HEAD answer names its length too (node:http keeps the connection only then).
        res.writeHead(200, {
          [ENTRY_HEADER]: e.header,
          'content-type': 'application/octet-stream',
          'content-length': e.value.length,
        });
        res.end(req.method === 'HEAD' ? undefined : e.value);
      });
    };
    const client = track(new NodeClient({ secret: SECRET }));
    const value = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
    await expect(client.put(url, 't', 'a/b c', entry(3, value), 7)).resolves.toEqual({ applied: true, current: 1 });
    const got = await client.get(url, 't', 'a/b c', 7);
    expect(got!.header.version).toBe(3);
    expect(got!.value.equals(value)).toBe(true);
    await expect(client.head(url, 't', 'a/b c', 7)).resolves.toMatchObject({ version: 3, size: 256 });
    await expect(client.get(url, 't', 'missing', 7)).resolves.toBeUndefined();
    await expect(client.head(url, 't', 'missing', 7)).resolves.toBeUndefined();
    for (const h of seen)
      expect(h).toMatchObject({ [SECRET_HEADER]: SECRET, [RING_HEADER]: '7', host: url.slice('http://'.length) });
    expect(seen[0]!['content-length']).toBe('256');
    // Every call went over one keep-alive connection.
    expect(accepted).toBe(1);
    await client.close();
  });

  it('reads large bodies whatever their chunking', async () => {
    const big = Buffer.alloc(5 * 1024 * 1024, 7);
    big.writeUInt32BE(0xdeadbeef, big.length - 4);
    handler = (_req, res) => {
      res.writeHead(200, { [ENTRY_HEADER]: encodeEntryHeader(entry(1, big).header) });
      for (let at = 0; at < big.length; at += 100_000) res.write(big.subarray(at, at + 100_000));
      res.end();
    };
    const client = track(new NodeClient({ secret: SECRET }));
    const got = await client.get(url, 't', 'big', 1);
    expect(got!.value.equals(big)).toBe(true);
    await client.close();
  });

  it('opens at most connectionsPerNode connections; further requests wait for one, untimed', async () => {
    handler = (_req, res) => void sleep(300).then(() => json(res, 200, { removed: true }));
    const client = track(new NodeClient({ secret: SECRET, connectionsPerNode: 3, timeoutMs: 1000 }));
    // 12 requests of 300 ms over 3 connections take ~1200 ms: longer than the timeout, yet none times out.
    const results = await Promise.all(Array.from({ length: 12 }, (_, i) => client.delete(url, 't', `k${i}`, undefined, 1)));
    expect(results).toEqual(Array(12).fill(true));
    expect(maxOpen).toBe(3);
    expect(accepted).toBe(3);
    await client.close();
  });

  it('times out a node that does not answer, closing the connection', async () => {
    handler = () => undefined; // never answers
    const client = track(new NodeClient({ secret: SECRET, timeoutMs: 150 }));
    const started = Date.now();
    const e = await client.get(url, 't', 'k', 1).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(NodeUnavailableError);
    expect((e as Error).message).toMatch(/timed out after 150 ms waiting for the response/);
    expect(Date.now() - started).toBeLessThan(10_000); // a hang, not a speed: the node never answers
    await eventually(() => open.size === 0);
    await client.close();
  });

  it('does not time out an answer that arrived while the event loop stalled past the timeout', async () => {
    handler = (_req, res) => {
      json(res, 200, { removed: true }); // on the wire before the stall; read only after it
      stallEventLoop(500);
    };
    const client = track(new NodeClient({ secret: SECRET, timeoutMs: 150 }));
    // After the stall the expired timer runs before the poll phase reads the answer already in the socket.
    await expect(client.delete(url, 't', 'k', undefined, 1)).resolves.toBe(true);
    await client.close();
  });

  it('times out a body that stalls, but not one that keeps coming', async () => {
    handler = (req, res) => {
      res.writeHead(200, { [ENTRY_HEADER]: encodeEntryHeader(entry(1, Buffer.alloc(500)).header), 'content-length': '500' });
      if (req.url!.includes('stall')) res.write(Buffer.alloc(100));
      else
        void (async () => {
          for (let i = 0; i < 5; i++) {
            res.write(Buffer.alloc(100));
            await sleep(100); // 500 ms in all, each gap shorter than the timeout
          }
          res.end();
        })();
    };
    const client = track(new NodeClient({ secret: SECRET, timeoutMs: 400 }));
    await expect(client.get(url, 't', 'slow', 1)).resolves.toMatchObject({ value: Buffer.alloc(500) });
    const e = await client.get(url, 't', 'stall', 1).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(NodeUnavailableError);
    expect((e as Error).message).toMatch(
      /reading the response failed: timed out after 400 ms waiting for the rest of the response/,
    );
    await eventually(() => open.size <= 1);
    await client.close();
  });

  it('fails fast when nothing listens', async () => {
    const probe = createServer();
    await new Promise<void>((r) => probe.listen(0, '127.0.0.1', r));
    const port = (probe.address() as AddressInfo).port;
    await new Promise((r) => probe.close(r));
    const client = track(new NodeClient({ secret: SECRET }));
    await expect(client.health(`http://127.0.0.1:${port}`)).rejects.toThrow(NodeUnavailableError);
    await expect(client.health(`http://127.0.0.1:${port}`)).rejects.toThrow(/ECONNREFUSED/);
    await client.close();
  });

  it('maps refusals: 409 to StaleRouteError (with the ring), 5xx to NodeUnavailableError, other 4xx to NodeRequestError', async () => {
    const ring = { version: 4, nodes: [], ranges: [] };
    handler = (req, res) => {
      const code = req.url!.split('/').pop()!;
      if (req.method === 'HEAD') {
        res.writeHead(409, { [RING_HEADER]: '9', 'content-length': 0 });
        return res.end();
      }
      if (code === 'stale') return json(res, 409, { error: { code: 'STALE_RING', message: 'older ring' }, ringVersion: 4, ring });
      if (code === 'down') return json(res, 503, { error: { code: 'DRAINING', message: 'going away' } });
      if (code === 'secret') return json(res, 401, { error: { code: 'UNAUTHORIZED', message: 'wrong secret' } });
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('not json');
    };
    const client = track(new NodeClient({ secret: SECRET }));
    await expect(client.get(url, 't', 'stale', 1)).rejects.toMatchObject({
      name: 'StaleRouteError',
      code: 'STALE_RING',
      ringVersion: 4,
      ring,
    });
    await expect(client.head(url, 't', 'x', 1)).rejects.toMatchObject({
      name: 'StaleRouteError',
      code: 'WRONG_NODE',
      ringVersion: 9,
    });
    await expect(client.get(url, 't', 'down', 1)).rejects.toThrow(new NodeUnavailableError(url, '503 DRAINING: going away'));
    const refused = await client.get(url, 't', 'secret', 1).catch((x: unknown) => x);
    expect(refused).toBeInstanceOf(NodeRequestError);
    expect(refused).toMatchObject({ status: 401, code: 'UNAUTHORIZED' });
    await expect(client.delete(url, 't', 'garbage', undefined, 1)).rejects.toThrow(/not JSON/);
    expect(new StaleRouteError(url, 'WRONG_NODE', 1, null, 'm')).toBeInstanceOf(Error);
    expect(accepted).toBe(1); // refusals keep the connection
    await client.close();
  });

  it('asks for an exclusive create, and refuses the answer of a node that ignored the condition', async () => {
    handler = (req, res) => {
      req.resume();
      const echo = req.url!.endsWith('?ifAbsent=1') && !req.url!.includes('/old-node');
      req.on('end', () => json(res, 200, { applied: true, current: 7, ...(echo ? { ifAbsent: true } : {}) }));
    };
    const client = track(new NodeClient({ secret: SECRET }));
    await expect(client.put(url, 't', 'k', entry(7, 'v'), 1, true)).resolves.toEqual({ applied: true, current: 7 });
    // A node from before exclusive creates applies the write over whatever it holds: not an answer to trust.
    await expect(client.put(url, 't', 'old-node', entry(7, 'v'), 1, true)).rejects.toMatchObject({
      name: 'NodeRequestError',
      code: 'IF_ABSENT_UNSUPPORTED',
    });
    await expect(client.put(url, 't', 'old-node', entry(7, 'v'), 1)).resolves.toEqual({ applied: true, current: 7 });
    await client.close();
  });

  describe('streamed ranges', () => {
    const records = (n: number) =>
      Array.from({ length: n }, (_, i) => encodeEntryRecord('t', `k${i}`, entry(i + 1, Buffer.alloc(1000, i))));

    it('exports records and the trailer; a consumer slower than the timeout is not a stall', async () => {
      handler = (req, res) => {
        expect(req.url).toMatch(/^\/v1\/range\/export\?start=0000000000000000&end=&values=0$/);
        res.writeHead(200);
        for (const r of records(20)) res.write(r);
        res.end(encodeTrailerRecord({ done: true, next: null, keys: 20, bytes: 20_000 }));
      };
      const client = track(new NodeClient({ secret: SECRET, bulkTimeoutMs: 100 }));
      const it = client.exportRange(url, { start: RING_MIN, end: null, headersOnly: true });
      const keys: string[] = [];
      let r = await it.next();
      while (!r.done) {
        keys.push(r.value.key);
        if (keys.length === 1) await sleep(350); // the rest waits, read, in the client's buffer
        r = await it.next();
      }
      expect(keys).toEqual(Array.from({ length: 20 }, (_, i) => `k${i}`));
      expect(r.value).toEqual({ done: true, next: null, keys: 20, bytes: 20_000 });
      await client.close();
    });

    it('fails an export that stalls, or ends without its trailer', async () => {
      handler = (req, res) => {
        res.writeHead(200);
        for (const r of records(3)) res.write(r);
        if (req.url!.includes('after=')) res.end(); // no trailer
      };
      const client = track(new NodeClient({ secret: SECRET, bulkTimeoutMs: 150 }));
      const drain = async (it: AsyncGenerator<unknown, unknown>) => {
        for (let r = await it.next(); !r.done; r = await it.next());
      };
      await expect(drain(client.exportRange(url, { start: RING_MIN, end: null }))).rejects.toThrow(
        /export stream broke: timed out after 150 ms waiting for the rest of the response/,
      );
      await expect(drain(client.exportRange(url, { start: RING_MIN, end: null, after: 'ff' }))).rejects.toThrow(
        /ended without its trailer/,
      );
      await client.close();
    });

    it('closes the export when the consumer stops early or aborts, and leaves no listener on the signal', async () => {
      handler = (_req, res) => {
        res.writeHead(200);
        const timer = setInterval(() => res.write(records(1)[0]!), 10); // endless
        res.on('close', () => clearInterval(timer));
      };
      const client = track(new NodeClient({ secret: SECRET, bulkTimeoutMs: 1000 }));
      const ac = new AbortController();
      const it = client.exportRangeRaw(url, { start: RING_MIN, end: null, signal: ac.signal });
      await it.next();
      await it.return(undefined as never);
      await eventually(() => open.size === 0);

      const it2 = client.exportRangeRaw(url, { start: RING_MIN, end: null, signal: ac.signal });
      await it2.next();
      setTimeout(() => ac.abort(new Error('operator stop')), 50);
      const e = await (async () => {
        for (let r = await it2.next(); !r.done; r = await it2.next());
      })().catch((x: unknown) => x);
      expect(e).toBeInstanceOf(NodeUnavailableError);
      expect((e as Error).message).toMatch(/operator stop/);
      await eventually(() => open.size === 0);
      expect(getEventListeners(ac.signal, 'abort')).toHaveLength(0);
      // An aborted signal fails at once, without a request.
      await expect(client.exportRange(url, { start: RING_MIN, end: null, signal: ac.signal }).next()).rejects.toThrow(
        /operator stop/,
      );
      await client.close();
    });

    it('streams an import body with backpressure, and fails it when the source fails', async () => {
      let received = 0;
      handler = (req, res) => {
        void (async () => {
          for await (const c of req) {
            received += (c as Buffer).length;
            await sleep(1); // a slow reader
          }
          json(res, 200, { applied: 50, stale: 0, full: 0, bytes: received });
        })().catch(() => res.destroy());
      };
      const client = track(new NodeClient({ secret: SECRET }));
      async function* source(fail: boolean) {
        for (const r of records(50)) {
          yield Buffer.concat([r, Buffer.alloc(64 * 1024)]);
          if (fail && received > 0) throw new Error('source broke');
        }
      }
      const result = await client.importRecords(url, source(false));
      expect(result).toEqual({
        applied: 50,
        stale: 0,
        full: 0,
        bytes: records(50).reduce((n, r) => n + r.length + 64 * 1024, 0),
      });
      const e = await client.importRecords(url, source(true)).catch((x: unknown) => x);
      expect(e).toBeInstanceOf(NodeUnavailableError);
      expect((e as Error).message).toMatch(/source broke/);
      await eventually(() => open.size <= 1);
      await client.close();
    });
  });

  describe('lifetime', () => {
    it('survives the node closing idle connections between requests', async () => {
      handler = (_req, res) => json(res, 200, { status: 'ok', nodeId: 'n', ringVersion: 1 });
      const client = track(new NodeClient({ secret: SECRET }));
      await client.health(url);
      server.closeIdleConnections();
      await eventually(() => open.size === 0);
      await expect(client.health(url)).resolves.toMatchObject({ status: 'ok' });
      await client.close();
    });

    it('close() lets requests in flight finish, then refuses new ones and closes its connections', async () => {
      handler = (_req, res) => void sleep(100).then(() => json(res, 200, { status: 'ok', nodeId: 'n', ringVersion: 1 }));
      const client = track(new NodeClient({ secret: SECRET }));
      const inFlight = client.health(url);
      await sleep(20);
      await client.close();
      await expect(inFlight).resolves.toMatchObject({ status: 'ok' });
      await expect(client.health(url)).rejects.toThrow(/client is closed/);
      await eventually(() => open.size === 0);
    });

    it("forget() fails the node's requests in flight and drops its connections", async () => {
      handler = () => undefined;
      const client = track(new NodeClient({ secret: SECRET, timeoutMs: 5000 }));
      const inFlight = client.health(url).catch((x: unknown) => x);
      await eventually(() => open.size === 1);
      await client.forget(url);
      expect(await inFlight).toBeInstanceOf(NodeUnavailableError);
      await eventually(() => open.size === 0);
      await client.close();
    });

    it('leaks no listeners or sockets over many calls, successes and failures mixed', async () => {
      handler = (req, res) => {
        if (req.url!.endsWith('/fail')) return json(res, 500, { error: { code: 'BOOM', message: 'x' } });
        if (req.url!.endsWith('/hang')) return; // times out
        json(res, 200, { removed: [true] });
      };
      // A timeout long enough that no quick call meets it on a loaded machine (100 ms did, once, while a CI run
      // loaded it: this process's own server answers all 300); the hanging calls still end by it.
      const client = track(new NodeClient({ secret: SECRET, connectionsPerNode: 4, timeoutMs: 1000 }));
      const ac = new AbortController();
      const kinds = Array.from({ length: 300 }, (_, i) => (i % 50 === 0 ? 'hang' : i % 7 === 0 ? 'fail' : 'ok'));
      const settled = await Promise.allSettled(
        kinds.map((kind) => (kind === 'ok' ? client.deleteMany(url, 't', ['k'], 1) : client.get(url, 't', kind, 1))),
      );
      settled.forEach((s, i) => {
        if (kinds[i] === 'ok') expect(s).toEqual({ status: 'fulfilled', value: [true] });
        else
          expect(s).toMatchObject({
            status: 'rejected',
            reason: {
              name: 'NodeUnavailableError',
              message: kinds[i] === 'hang' ? expect.stringMatching(/timed out/) : expect.stringMatching(/500 BOOM/),
            },
          });
      });
      // The export path with a shared signal, too.
      for (let i = 0; i < 20; i++) {
        handler = (_req, res) => {
          res.writeHead(200);
          res.end(encodeTrailerRecord({ done: true, next: null, keys: 0, bytes: 0 }));
        };
        const it = client.exportRange(url, { start: RING_MIN, end: null, signal: ac.signal });
        expect((await it.next()).done).toBe(true);
      }
      expect(getEventListeners(ac.signal, 'abort')).toHaveLength(0);
      expect(maxClientOpen).toBeGreaterThan(0); // the probe sees the client's sockets
      expect(maxClientOpen).toBeLessThanOrEqual(4);
      await client.close();
      await eventually(() => open.size === 0);
    });
  });
});
