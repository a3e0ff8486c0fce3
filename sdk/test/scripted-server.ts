/**
 * A real `node:http` server on a free port whose responses a test scripts, recording every request as it arrived on
 * the wire (raw request-target, headers, body). Used by the SDK unit tests (test/unit/sdk-*.test.ts).
 */
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface RecordedRequest {
  method: string;
  /** The raw request-target, exactly as sent (percent-encoding preserved). */
  url: string;
  /** `url` without its query string. */
  path: string;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

export type Handler = (req: RecordedRequest, res: ServerResponse, raw: IncomingMessage) => void | Promise<void>;

export class ScriptedServer {
  readonly requests: RecordedRequest[] = [];
  /** Bumped by `script()`: a request that began under an earlier script belongs to an earlier test. */
  private generation = 0;
  private readonly unanswered = new Set<ServerResponse>();
  private handler: Handler = (_req, res) => sendError(res, 500, 'INTERNAL', 'no handler scripted');

  private constructor(
    private readonly server: Server,
    readonly url: string,
  ) {}

  static async start(): Promise<ScriptedServer> {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    const scripted = new ScriptedServer(server, `http://127.0.0.1:${port}`);
    server.on('request', (raw: IncomingMessage, res: ServerResponse) => void scripted.dispatch(raw, res));
    return scripted;
  }

  /** Replaces the handler and forgets recorded requests. */
  script(handler: Handler): void {
    this.handler = handler;
    this.generation++;
    this.requests.length = 0;
  }

  /**
   * Drops the connections of requests still unanswered. Run between tests, so that a request a test left hanging
   * cannot be answered inside the next test. Idle keep-alive connections stay: the client pools them across tests.
   */
  dropUnanswered(): void {
    for (const res of this.unanswered) res.socket?.destroy();
    this.unanswered.clear();
  }

  /** Recorded requests for one method (and path prefix). */
  count(method: string, pathPrefix = ''): number {
    return this.requests.filter((r) => r.method === method && r.path.startsWith(pathPrefix)).length;
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private async dispatch(raw: IncomingMessage, res: ServerResponse): Promise<void> {
    // Taken when the headers arrive, before the body is read: a slow machine can finish reading a request after the
    // test that sent it has ended and the next one has scripted the server.
    const { generation, handler } = this;
    this.unanswered.add(res);
    res.on('close', () => this.unanswered.delete(res));
    const chunks: Buffer[] = [];
    try {
      for await (const c of raw) chunks.push(c as Buffer);
    } catch {
      return; // client went away
    }
    const url = raw.url ?? '/';
    const rec: RecordedRequest = {
      method: raw.method ?? 'GET',
      url,
      path: url.split('?')[0]!,
      headers: raw.headers,
      body: Buffer.concat(chunks),
    };
    if (generation === this.generation) this.requests.push(rec);
    try {
      await handler(rec, res, raw);
    } catch (err) {
      if (!res.headersSent) sendError(res, 500, 'INTERNAL', `handler threw: ${String(err)}`);
    }
  }
}

export function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers });
  res.end(text);
}

export function sendError(
  res: ServerResponse,
  status: number,
  code: string,
  message: string,
  details?: Record<string, unknown>,
  headers: Record<string, string> = {},
): void {
  sendJson(res, status, { error: { code, message, ...(details ? { details } : {}) } }, headers);
}

export function sendRaw(res: ServerResponse, status: number, body: string | Buffer, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-length': Buffer.byteLength(body), ...headers });
  res.end(body);
}

/**
 * One scripted server for a whole test file: started before its tests, closed after them. Read `.server` inside
 * tests (it is set once `beforeAll` has run).
 */
export function scriptedServerForSuite(): { readonly server: ScriptedServer } {
  const holder: { server: ScriptedServer } = { server: undefined as unknown as ScriptedServer };
  beforeAll(async () => {
    holder.server = await ScriptedServer.start();
  });
  afterEach(() => {
    holder.server?.dropUnanswered();
  });
  afterAll(async () => {
    await holder.server?.close();
  });
  return holder;
}
