/**
 * The cache-node protocol's version (core/nodes/protocol.ts) as the client handles it: every request names our
 * version, a node of before versioning (no answer header) reads as version 1, a node's PROTOCOL_UNSUPPORTED refusal
 * is a typed error, and a node older than the client accepts, or than a feature needs, is refused the same way.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { NodeClient, NodeRequestError, ProtocolUnsupportedError } from '../../core/nodes/node-client.js';
import {
  MIN_PEER_PROTOCOL,
  NODE_ERROR_STATUS,
  PROTOCOL_FEATURES,
  PROTOCOL_HEADER,
  PROTOCOL_VERSION,
  PROTOCOL_VERSIONS,
  buildLabel,
  protocolOf,
  protocolRefusal,
  supports,
} from '../../core/nodes/protocol.js';

const SECRET = 'unit-secret-0123456789';
let server: Server;
let url: string;
let handler: (req: IncomingMessage, res: ServerResponse) => void = (_req, res) => res.end();

beforeAll(async () => {
  server = createServer((req, res) => handler(req, res));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

function json(res: ServerResponse, status: number, body: unknown, protocol?: string): void {
  if (protocol) res.setHeader(PROTOCOL_HEADER, protocol);
  res.setHeader('content-type', 'application/json');
  res.statusCode = status;
  res.end(JSON.stringify(body));
}

describe('protocol versions', () => {
  it('reads a missing header as the pre-versioning protocol and refuses what it cannot read', () => {
    expect(protocolOf(undefined)).toBe(1);
    expect(protocolOf('2')).toBe(2);
    for (const bad of ['', '0', '-1', '2.5', 'two', ['2', '3']]) expect(protocolOf(bad)).toBeUndefined();
  });

  it('refuses peers below the minimum with a message naming both versions and what to do', () => {
    expect(protocolRefusal(1, 1, 'node')).toBeUndefined();
    expect(protocolRefusal(PROTOCOL_VERSION + 5, 1, 'node')).toBeUndefined(); // newer peers adapt to us
    const why = protocolRefusal(1, 2, 'node')!;
    expect(why).toMatch(/caller speaks protocol version 1/);
    expect(why).toMatch(new RegExp(`speaks version ${PROTOCOL_VERSION} and accepts versions 2 and newer: upgrade the caller`));
    expect(protocolRefusal(undefined, 1, 'client')).toMatch(/cache node speaks an unreadable protocol version/);
  });

  it('keeps the window at N-1, documents every version, and gives every feature a version of the window', () => {
    expect(MIN_PEER_PROTOCOL).toBe(PROTOCOL_VERSION - 1);
    expect(Object.keys(PROTOCOL_VERSIONS).map(Number)).toEqual(Array.from({ length: PROTOCOL_VERSION }, (_, i) => i + 1));
    for (const v of Object.values(PROTOCOL_FEATURES)) expect(v).toBeLessThanOrEqual(PROTOCOL_VERSION);
    expect(supports(1, 'healthIdentity')).toBe(false);
    expect(supports(2, 'healthIdentity')).toBe(true);
    expect(NODE_ERROR_STATUS.PROTOCOL_UNSUPPORTED).toBeGreaterThanOrEqual(400);
    expect(NODE_ERROR_STATUS.PROTOCOL_UNSUPPORTED).toBeLessThan(500);
    expect(NODE_ERROR_STATUS.VOLUME_LOST).toBe(503);
  });

  it('labels the build from STRATA_NODE_BUILD, else the package version', () => {
    expect(buildLabel({ STRATA_NODE_BUILD: ' abc123 ' }, '0.1.0')).toBe('abc123');
    expect(buildLabel({}, '0.1.0')).toBe('strata@0.1.0');
    expect(buildLabel({}, undefined)).toBe('unknown');
  });
});

describe('NodeClient and protocol versions', () => {
  let client: NodeClient;
  afterEach(async () => {
    await client.close();
  });

  it('names its version on every request and learns the node version from each answer', async () => {
    const seen: (string | string[] | undefined)[] = [];
    handler = (req, res) => {
      seen.push(req.headers[PROTOCOL_HEADER]);
      json(res, 200, { status: 'ok', nodeId: 'n1', ringVersion: 3, protocol: 2, minProtocol: 1, build: 'b7' }, '2');
    };
    client = new NodeClient({ secret: SECRET });
    expect(client.protocolOf(url)).toBeUndefined();
    expect(client.supports(url, 'healthIdentity')).toBe(false); // unknown is no
    expect(await client.health(url)).toEqual({
      status: 'ok',
      nodeId: 'n1',
      ringVersion: 3,
      protocol: 2,
      minProtocol: 1,
      build: 'b7',
    });
    expect(seen).toEqual([String(PROTOCOL_VERSION)]);
    expect(client.protocolOf(url)).toBe(2);
    expect(client.supports(url, 'healthIdentity')).toBe(true);
    await expect(client.requireFeature(url, 'healthIdentity')).resolves.toBeUndefined();
  });

  it('reads a node of before versioning as version 1 and degrades its health, or refuses a feature it lacks', async () => {
    handler = (_req, res) => json(res, 200, { status: 'ok', nodeId: 'old', ringVersion: 3 });
    client = new NodeClient({ secret: SECRET });
    expect(await client.health(url)).toEqual({
      status: 'ok',
      nodeId: 'old',
      ringVersion: 3,
      protocol: 1,
      minProtocol: 1,
      build: 'unknown',
    });
    expect(client.protocolOf(url)).toBe(1);
    const e = await client.requireFeature(url, 'volumeWatch').catch((x: unknown) => x);
    expect(e).toBeInstanceOf(ProtocolUnsupportedError);
    expect(e).toMatchObject({ code: 'PROTOCOL_UNSUPPORTED', status: 400, nodeProtocol: 1 });
    expect((e as Error).message).toMatch(/volumeWatch needs protocol version 2, and the cache node speaks version 1/);
  });

  it("turns a node's PROTOCOL_UNSUPPORTED refusal into the typed error, still a NodeRequestError", async () => {
    handler = (_req, res) =>
      json(
        res,
        400,
        { error: { code: 'PROTOCOL_UNSUPPORTED', message: 'upgrade the caller' }, protocol: 3, minProtocol: 3 },
        '3',
      );
    client = new NodeClient({ secret: SECRET });
    const e = await client.getRing(url).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(ProtocolUnsupportedError);
    expect(e).toBeInstanceOf(NodeRequestError);
    expect(e).toMatchObject({ code: 'PROTOCOL_UNSUPPORTED', nodeProtocol: 3, body: { minProtocol: 3 } });
  });

  it('refuses the answer of a node older than its own minimum, and keeps its connections usable', async () => {
    let calls = 0;
    handler = (_req, res) => {
      calls++;
      json(res, 200, { nodeId: 'old' });
    };
    client = new NodeClient({ secret: SECRET, minPeerProtocol: 2 });
    for (let i = 0; i < 3; i++) {
      const e = await client.ownership(url).catch((x: unknown) => x);
      expect(e).toBeInstanceOf(ProtocolUnsupportedError);
      expect((e as Error).message).toMatch(/the cache node speaks protocol version 1; this client .* accepts versions 2/);
    }
    expect(calls).toBe(3);
    handler = (_req, res) => json(res, 200, { nodeId: 'new' }, String(PROTOCOL_VERSION));
    expect(await client.ownership(url)).toEqual({ nodeId: 'new' });
  });
});
