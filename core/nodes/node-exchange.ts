// HTTP exchange with cache nodes over node:http: keep-alive agents per node, one request and its response, timeouts.
import * as http from 'node:http';
import * as https from 'node:https';
import type { Socket } from 'node:net';
import { NodeUnavailableError, ProtocolUnsupportedError } from './node-client-errors.js';
import { PROTOCOL_HEADER, PROTOCOL_VERSION, protocolOf, protocolRefusal } from './protocol.js';
import { SECRET_HEADER } from './wire.js';

export type Method = 'GET' | 'HEAD' | 'PUT' | 'POST' | 'DELETE';
/** A body: one buffer or string, parts sent back to back (one writev), or a stream. */
export type RequestBody = Buffer | readonly Buffer[] | string | AsyncIterable<Buffer> | null;

function isParts(b: RequestBody): b is readonly Buffer[] {
  return Array.isArray(b);
}

export interface RequestSpec {
  path: string;
  method: Method;
  headers?: Record<string, string>;
  body?: RequestBody;
  bulk?: boolean;
  signal?: AbortSignal;
}

/** One node's connections: a keep-alive agent, and the exchanges in flight on it (for close and forget). */
interface NodeTarget {
  readonly agent: http.Agent;
  readonly request: typeof http.request;
  readonly host: string;
  readonly port: number;
  /** host, the secret, then our protocol version: the first headers of every request. */
  readonly headers: readonly string[];
  readonly inflight: Set<Exchange>;
  /** The node's protocol version, from its last answer (undefined before the first, or when unreadable). */
  protocol: number | undefined;
  /** Set by close(): called when the last exchange in flight ends. */
  drained?: () => void;
}

/** Our protocol version, as every request carries it. */
const PROTOCOL_REQUEST = String(PROTOCOL_VERSION);

/** Idle keep-alive connections are closed after this long (the node keeps them 65 s and announces it). */
const KEEP_ALIVE_MS = 30_000;
/** An unwanted body (a miss's) larger than this is not read to its end: its connection is closed instead. */
const DISCARD_LIMIT = 64 * 1024;
/**
 * Bodies above this (one socket read) are assembled in one buffer of their announced length as they arrive, not
 * concatenated at the end (the parts die young); up to MAX_PREALLOCATED, whatever a corrupt header announces.
 */
const BIG_BODY = 64 * 1024;
const MAX_PREALLOCATED = 256 * 1024 * 1024;

/**
 * The connections of a NodeClient: one keep-alive node:http Agent per node (at most `connectionsPerNode`
 * sockets), the shared secret on every request, every exchange bounded by its timeout.
 */
export class NodeConnections {
  private readonly targets = new Map<string, NodeTarget>();
  private closed = false;

  constructor(
    private readonly secret: string,
    private readonly timeoutMs: number,
    private readonly bulkTimeoutMs: number,
    private readonly connections: number,
    /** The oldest protocol version of a node this client talks to (core/nodes/protocol.ts). */
    readonly minPeerProtocol: number,
  ) {}

  /** The protocol version `url` answered with last, or undefined before its first answer. */
  protocolOf(url: string): number | undefined {
    return this.targets.get(url)?.protocol;
  }

  private target(url: string): NodeTarget {
    let t = this.targets.get(url);
    if (!t) {
      if (this.closed) throw new NodeUnavailableError(url, 'client is closed');
      let u: URL;
      try {
        u = new URL(url);
      } catch (e) {
        throw new NodeUnavailableError(url, 'invalid node URL', { cause: e });
      }
      const secure = u.protocol === 'https:';
      if (!secure && u.protocol !== 'http:') throw new NodeUnavailableError(url, `unsupported protocol ${u.protocol}`);
      const agentOptions: http.AgentOptions = {
        keepAlive: true,
        maxSockets: this.connections,
        maxFreeSockets: this.connections,
        timeout: KEEP_ALIVE_MS,
        scheduling: 'lifo',
      };
      t = {
        agent: secure ? new https.Agent(agentOptions) : new http.Agent(agentOptions),
        request: secure ? https.request : http.request,
        host: u.hostname.startsWith('[') ? u.hostname.slice(1, -1) : u.hostname,
        port: u.port ? Number(u.port) : secure ? 443 : 80,
        headers: ['host', u.host, SECRET_HEADER, this.secret, PROTOCOL_HEADER, PROTOCOL_REQUEST],
        inflight: new Set(),
        protocol: undefined,
      };
      this.targets.set(url, t);
    }
    return t;
  }

  /**
   * Sends one request and resolves with its exchange once the response headers are in; the caller then reads or
   * discards the body (always). Network errors, timeouts and aborts become NodeUnavailableError.
   */
  request(url: string, spec: RequestSpec): Promise<Exchange> {
    let t: NodeTarget;
    try {
      t = this.target(url);
    } catch (e) {
      return Promise.reject(e);
    }
    if (spec.signal?.aborted) {
      return Promise.reject(new NodeUnavailableError(url, abortReason(spec.signal).message, { cause: spec.signal.reason }));
    }
    try {
      return new Exchange(url, t, spec, spec.bulk ? this.bulkTimeoutMs : this.timeoutMs, this.minPeerProtocol).head;
    } catch (e) {
      // node:http refused the request itself (e.g. a header value it cannot send).
      return Promise.reject(new NodeUnavailableError(url, e instanceof Error ? e.message : String(e), { cause: e }));
    }
  }

  /** Closes (and forgets) the connections of one node: requests in flight fail. */
  forget(url: string): void {
    const t = this.targets.get(url);
    if (!t) return;
    this.targets.delete(url);
    for (const x of [...t.inflight]) x.abort(new Error('the client forgot this node'));
    t.agent.destroy();
  }

  /** Takes no more requests, lets those in flight finish, then closes every connection. */
  async close(): Promise<void> {
    this.closed = true;
    const targets = [...this.targets.values()];
    this.targets.clear();
    await Promise.all(
      targets.map(async (t) => {
        if (t.inflight.size > 0) await new Promise<void>((resolve) => (t.drained = resolve));
        t.agent.destroy();
      }),
    );
  }
}

function noop(): void {}

function abortReason(signal: AbortSignal): Error {
  return signal.reason instanceof Error
    ? signal.reason
    : new Error(signal.reason === undefined ? 'request aborted' : `request aborted: ${String(signal.reason)}`);
}

const kExchange = Symbol('strata.exchange');
type Req = http.ClientRequest & { [kExchange]?: Exchange };
type Res = http.IncomingMessage & { [kExchange]?: Exchange };

/** A body being read to its end. */
interface BodyRead {
  chunks: Buffer[];
  size: number;
  /** A body of announced length above one socket read: copied here as it arrives (chunks are not kept). */
  out: Buffer | undefined;
  resolve(b: Buffer): void;
  reject(e: unknown): void;
}

/**
 * One request and its response on a pooled connection. Bounded by an idle timeout of `timeoutMs` (the bound
 * undici applied: connecting, then waiting for the headers, then each gap in the body, each in turn), counted
 * from when a connection is assigned (a request waiting for a free connection is not timed, as with undici). A
 * body the caller has not read yet does not count as a stall: the node is not the slow side. The socket goes
 * back to the agent once the body has been read to its end; any failure, timeout or abort destroys it.
 *
 * Event handlers are shared functions that find their exchange on the request or response (no closures per
 * request on the hot path).
 */
export class Exchange {
  readonly head: Promise<Exchange>;
  private readonly req: Req;
  private res: Res | undefined;
  private resolveHead!: (x: Exchange) => void;
  private rejectHead!: (e: unknown) => void;
  private timer: NodeJS.Timeout | undefined = undefined;
  /** Set while a timeout waits for the I/O already in hand to be read (see tick). */
  private recheck: NodeJS.Immediate | undefined = undefined;
  /** When the exchange last made progress (Date.now()). */
  last = 0;
  private connected = false;
  private finished = false;
  /** The first error of the exchange (ours: timeout, abort; or the connection's). */
  private error: Error | undefined = undefined;
  private body: BodyRead | undefined = undefined;
  private readonly method: Method;
  private readonly signal: AbortSignal | undefined;
  private readonly onAbort: (() => void) | undefined;

  constructor(
    private readonly url: string,
    private readonly target: NodeTarget,
    spec: RequestSpec,
    private readonly timeoutMs: number,
    /** The oldest protocol version of a node this exchange accepts an answer from. */
    private readonly minPeerProtocol: number,
  ) {
    this.head = new Promise<Exchange>((resolve, reject) => {
      this.resolveHead = resolve;
      this.rejectHead = reject;
    });
    this.method = spec.method;
    this.signal = spec.signal;
    const body = spec.body ?? null;
    // Headers as a flat list: node:http then renders them at once, with no per-header bookkeeping.
    const headers = [...target.headers];
    if (spec.headers) for (const k in spec.headers) headers.push(k, spec.headers[k]!);
    if (typeof body === 'string') headers.push('content-length', String(Buffer.byteLength(body)));
    else if (Buffer.isBuffer(body)) headers.push('content-length', String(body.length));
    else if (isParts(body)) headers.push('content-length', String(body.reduce((n, b) => n + b.length, 0)));
    const req: Req = target.request({
      agent: target.agent,
      host: target.host,
      port: target.port,
      path: spec.path,
      method: spec.method,
      headers,
    });
    this.req = req;
    req[kExchange] = this;
    target.inflight.add(this);
    req.on('socket', onReqSocket);
    req.on('response', onReqResponse);
    req.on('error', onReqError);
    req.on('close', onReqClose);
    if (this.signal) {
      const signal = this.signal;
      this.onAbort = () => this.abort(abortReason(signal));
      signal.addEventListener('abort', this.onAbort);
    }
    if (body === null) req.end();
    else if (typeof body === 'string' || Buffer.isBuffer(body)) req.end(body);
    else if (isParts(body)) {
      // Parts go out in one writev, so values are not first copied into one buffer.
      req.cork();
      for (const b of body) req.write(b);
      req.uncork();
      req.end();
    } else void this.pump(body);
  }

  get statusCode(): number {
    return this.res!.statusCode ?? 0;
  }

  get headers(): http.IncomingHttpHeaders {
    return this.res!.headers;
  }

  /** The whole body. */
  bytes(): Promise<Buffer> {
    const res = this.res!;
    if (res.errored || this.error) return Promise.reject(res.errored ?? this.error);
    if (res.destroyed || this.body) return Promise.reject(new Error('the response was already closed or read'));
    // A HEAD answer announces the length of a body it does not have.
    const length = this.method === 'HEAD' ? 0 : Number(res.headers['content-length']);
    return new Promise<Buffer>((resolve, reject) => {
      const out = length > BIG_BODY && length <= MAX_PREALLOCATED ? Buffer.allocUnsafeSlow(length) : undefined;
      this.body = { chunks: [], size: 0, out, resolve, reject };
      res.on('data', onResData);
      res.on('end', onResEnd);
      res.on('error', onResError);
      res.on('close', onResClose);
    });
  }

  /** The body as it arrives (with backpressure); the caller destroys the exchange if it stops early. */
  async *stream(): AsyncGenerator<Buffer> {
    for await (const chunk of this.res!) {
      this.last = Date.now();
      yield chunk as Buffer;
    }
  }

  /**
   * Drops the body: reads a small one to its end, so that the connection is free again when this resolves (the
   * caller's next request reuses it); closes the connection instead when the body is large or of unknown size.
   */
  async discard(): Promise<void> {
    const res = this.res!;
    if (res.destroyed) return;
    const length = Number(res.headers['content-length'] ?? DISCARD_LIMIT + 1);
    if (this.method === 'HEAD' || res.complete || length <= DISCARD_LIMIT) await this.bytes().catch(noop);
    else this.abort(new Error('response discarded'));
  }

  /**
   * Ends the exchange now if it has not ended: a response received in full is drained (its connection is kept),
   * any other is aborted (its connection closed).
   */
  destroy(): void {
    if (this.finished) return;
    if (this.res?.complete && !this.res.destroyed) this.res.resume();
    else this.abort(new Error('response abandoned'));
  }

  /** Fails the exchange with `e`: the pending request rejects, a body being read fails; the socket is destroyed. */
  abort(e: Error): void {
    if (this.finished) return;
    this.error ??= e;
    if (this.res) this.res.destroy(e);
    else this.req.destroy(e);
  }

  /** @internal A connection was assigned (new or reused): the clock starts. */
  started(socket: Socket): void {
    this.last = Date.now();
    this.timer = setTimeout(onTimer, this.timeoutMs, this);
    if (socket.connecting) {
      socket.once('connect', () => {
        this.connected = true;
        this.last = Date.now();
      });
    } else this.connected = true;
  }

  /** @internal */
  responded(res: Res): void {
    this.res = res;
    this.last = Date.now();
    res[kExchange] = this;
    // Errors while the caller holds the response are its to see (bytes, stream); never unhandled.
    res.on('error', noop);
    // Every answer names the node's protocol version (none: a node of before versioning). One older than we
    // accept is not half-understood: the caller gets the typed refusal instead of the answer.
    const protocol = protocolOf(res.headers[PROTOCOL_HEADER]);
    this.target.protocol = protocol;
    const refused = protocolRefusal(protocol, this.minPeerProtocol, 'client');
    if (refused) {
      const e = new ProtocolUnsupportedError(this.url, refused, protocol);
      this.rejectHead(e);
      this.abort(e);
      return;
    }
    this.resolveHead(this);
  }

  /** @internal */
  failed(e: Error): void {
    this.error ??= e;
    if (!this.res) this.rejectHead(new NodeUnavailableError(this.url, this.error.message, { cause: this.error }));
  }

  /**
   * @internal The timer fired: fail if nothing moved for timeoutMs, else wait for the rest.
   *
   * A stalled event loop (a long GC, a starved process) runs expired timers before the I/O that arrived meanwhile,
   * so "nothing moved" is only believed after that I/O had its turn: the first verdict waits for setImmediate,
   * which runs after the poll phase. Without this a node that answered in time is marked unavailable.
   */
  tick(rechecked = false): void {
    this.timer = undefined;
    this.recheck = undefined;
    if (this.finished || this.res?.complete) return;
    const idle = Date.now() - this.last;
    // Body data the caller has not read yet: the caller is the slow side, not the node.
    const waiting = this.res !== undefined && this.res.readableLength > 0;
    if (idle < this.timeoutMs || waiting) {
      this.timer = setTimeout(onTimer, waiting ? this.timeoutMs : this.timeoutMs - idle, this);
      return;
    }
    if (!rechecked) {
      this.recheck = setImmediate(onRecheck, this);
      return;
    }
    const phase = !this.connected
      ? 'connecting'
      : !this.res
        ? 'waiting for the response'
        : 'waiting for the rest of the response';
    this.abort(new Error(`timed out after ${this.timeoutMs} ms ${phase}`));
  }

  /** @internal The request is over (response read to its end, or connection closed): release everything. */
  closed(): void {
    this.finished = true;
    if (this.timer) clearTimeout(this.timer);
    if (this.recheck) clearImmediate(this.recheck);
    this.timer = undefined;
    this.recheck = undefined;
    if (this.onAbort) this.signal!.removeEventListener('abort', this.onAbort);
    if (!this.res) {
      const message = this.error?.message ?? 'the connection closed before the response';
      this.rejectHead(new NodeUnavailableError(this.url, message, this.error ? { cause: this.error } : undefined));
    }
    const t = this.target;
    t.inflight.delete(this);
    if (t.inflight.size === 0) t.drained?.();
  }

  /** @internal */
  bodyData(c: Buffer): void {
    this.last = Date.now();
    const b = this.body!;
    if (!b.out) b.chunks.push(c);
    else if (b.size + c.length <= b.out.length) c.copy(b.out, b.size);
    else return this.abort(new Error('the body is longer than its content-length')); // node:http prevents it
    b.size += c.length;
  }

  /** @internal */
  bodyEnd(): void {
    const b = this.body!;
    if (b.out) b.resolve(b.size === b.out.length ? b.out : b.out.subarray(0, b.size));
    else b.resolve(b.chunks.length === 1 ? b.chunks[0]! : Buffer.concat(b.chunks, b.size));
  }

  /** @internal */
  bodyFailed(e: unknown): void {
    this.body!.reject(e);
  }

  /** @internal */
  bodyClosed(): void {
    if (!this.res!.complete) this.body!.reject(this.error ?? new Error('the connection closed before the response ended'));
  }

  /** Writes a streamed request body, with backpressure; a failing source fails the request. */
  private async pump(body: AsyncIterable<Buffer>): Promise<void> {
    const req = this.req;
    try {
      for await (const chunk of body) {
        if (req.destroyed) return;
        this.last = Date.now();
        if (!req.write(chunk)) await drainOrClose(req);
      }
      if (!req.destroyed) req.end();
    } catch (e) {
      this.abort(e instanceof Error ? e : new Error(String(e)));
    }
  }
}

function onReqSocket(this: Req, socket: Socket): void {
  this[kExchange]!.started(socket);
}
function onReqResponse(this: Req, res: Res): void {
  this[kExchange]!.responded(res);
}
function onReqError(this: Req, e: Error): void {
  this[kExchange]!.failed(e);
}
function onReqClose(this: Req): void {
  this[kExchange]!.closed();
}
function onTimer(x: Exchange): void {
  x.tick();
}
function onRecheck(x: Exchange): void {
  x.tick(true);
}
function onResData(this: Res, c: Buffer): void {
  this[kExchange]!.bodyData(c);
}
function onResEnd(this: Res): void {
  this[kExchange]!.bodyEnd();
}
function onResError(this: Res, e: Error): void {
  this[kExchange]!.bodyFailed(e);
}
function onResClose(this: Res): void {
  this[kExchange]!.bodyClosed();
}

function drainOrClose(req: http.ClientRequest): Promise<void> {
  return new Promise<void>((resolve) => {
    const done = (): void => {
      req.off('drain', done);
      req.off('close', done);
      resolve();
    };
    req.on('drain', done);
    req.on('close', done);
  });
}
