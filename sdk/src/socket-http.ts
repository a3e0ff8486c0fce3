/**
 * Internal, Node only: the GET of a presigned download URL over one `net` / `tls` socket, read with `onread` into
 * ONE reusable buffer, its body handed out as a web byte stream (`type: 'bytes'`).
 *
 * Why not fetch: every socket read through fetch (or `node:http`) lands in a new backing store that V8 frees only at a
 * later collection, so a 1 GiB download keeps tens of MiB of spent chunks outstanding (peak RSS 176-181 MiB with fetch,
 * 153 with `node:http`, 67 with one reused buffer; see bench/README.md "## stream"). Here the bytes are copied from the
 * socket's buffer straight into the caller's BYOB view, so a reader that reuses its buffer allocates nothing per chunk.
 *
 * A minimal HTTP/1.1 client: one request per connection (`connection: close`), the status line and headers, then
 * a body framed by `content-length`, `transfer-encoding: chunked` or the end of the connection. Short bodies, resets
 * and bad framing error the stream with a {@link NetworkError}; nothing ends silently short.
 */
import type * as Net from 'node:net';
import type * as Tls from 'node:tls';
import { NetworkError } from './errors.js';
import type { FetchLike } from './types.js';

const READ_BYTES = 64 * 1024;
/**
 * The most a default reader's read gets. Each such read is a new allocation, which V8 reclaims only at a later
 * collection; its young-generation collections are paced by the JS objects every read allocates, so smaller chunks
 * mean a collection after fewer bytes, and fewer spent bytes outstanding. A 1 GiB round trip through a default reader
 * peaked (the highest of 5 rounds) at 144 MiB RSS with 64 KiB chunks, 119-127 with 16 KiB, 114-115 with 8 KiB (as
 * with a BYOB reader), and read no slower (bench/README.md, "## stream").
 */
const DEFAULT_READ_BYTES = 8 * 1024;
/** Node's own default limit on a response's head (`--max-http-header-size`). */
const MAX_HEAD_BYTES = 16 * 1024;

type Builtins = { net: typeof Net; tls: typeof Tls };

/** Only for tests: extra CAs trusted by the TLS connections (a self-signed test server). Never a user option. */
let testCa: string | undefined;
/** @internal */
export function setSocketTestCa(ca: string | undefined): void {
  testCa = ca;
}

/** Node's `net` and `tls`, or undefined elsewhere (browsers, Deno, Bun: they keep fetch). */
function builtins(): Builtins | undefined {
  const proc = (
    globalThis as { process?: { versions?: Record<string, string | undefined>; getBuiltinModule?: (id: string) => unknown } }
  ).process;
  const versions = proc?.versions;
  if (!versions?.node || versions.bun || versions.deno || typeof proc?.getBuiltinModule !== 'function') return undefined;
  // getBuiltinModule rather than an import: no `node:` specifier for a browser bundler to trip over.
  const net = proc.getBuiltinModule('node:net') as typeof Net | undefined;
  const tls = proc.getBuiltinModule('node:tls') as typeof Tls | undefined;
  return net && tls ? { net, tls } : undefined;
}

/** A proxy named in the environment: fetch may be routed through it (NODE_USE_ENV_PROXY), this client cannot. */
function proxyConfigured(): boolean {
  const env = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env ?? {};
  return ['HTTP_PROXY', 'HTTPS_PROXY', 'http_proxy', 'https_proxy'].some((name) => Boolean(env[name]));
}

/** The socket client as a FetchLike for the presigned download's GET, or undefined where fetch must stay. @internal */
export function socketFetch(): FetchLike | undefined {
  const mods = builtins();
  if (!mods || proxyConfigured()) return undefined;
  return (input, init) => exchange(mods, new URL(String(input)), init ?? {});
}

function framingError(url: URL, message: string, cause?: unknown): NetworkError {
  return new NetworkError({ code: 'NETWORK_ERROR', status: 0, message: `GET ${url.origin}${url.pathname}: ${message}`, cause });
}

/** The request's head; header names and values with CR, LF or NUL are refused, as fetch refuses them. */
function requestHead(url: URL, init: RequestInit): string {
  const lines = [`GET ${url.pathname}${url.search} HTTP/1.1`, `host: ${url.host}`];
  const given = new Headers(init.headers);
  for (const [name, value] of given) {
    if (name === 'host' || name === 'connection') continue;
    lines.push(`${name}: ${value}`);
  }
  lines.push('connection: close', 'accept-encoding: identity');
  for (const line of lines) if (/[\r\n\0]/.test(line)) throw new TypeError('invalid header in the download request');
  return `${lines.join('\r\n')}\r\n\r\n`;
}

interface Head {
  status: number;
  statusText: string;
  headers: Headers;
}

function parseHead(text: string): Head | undefined {
  const lines = text.split('\r\n');
  const status = /^HTTP\/1\.[01] (\d{3})(?: (.*))?$/.exec(lines[0] ?? '');
  if (!status) return undefined;
  const headers = new Headers();
  for (const line of lines.slice(1)) {
    const colon = line.indexOf(':');
    if (colon <= 0) return undefined;
    headers.append(line.slice(0, colon).trim(), line.slice(colon + 1).trim());
  }
  return { status: Number(status[1]), statusText: status[2] ?? '', headers };
}

/** How the body ends: after `length` bytes, by chunked framing, or when the server closes. */
type Framing = { kind: 'length'; left: number } | { kind: 'chunked' } | { kind: 'close' };

function framingOf(head: Head): Framing | undefined {
  const te = head.headers.get('transfer-encoding');
  if (te) return /(^|,)\s*chunked\s*$/i.test(te) ? { kind: 'chunked' } : { kind: 'close' };
  const cl = head.headers.get('content-length');
  if (cl === null) return { kind: 'close' };
  // Repeated content-length headers arrive joined: all must agree.
  const values = new Set(cl.split(',').map((v) => v.trim()));
  const [only] = values;
  if (values.size !== 1 || only === undefined || !/^\d+$/.test(only) || !Number.isSafeInteger(Number(only))) return undefined;
  return { kind: 'length', left: Number(only) };
}

/** States of the chunked-body parser; it is byte by byte so a chunk line split across reads needs no buffer. */
const Chunk = {
  Size: 0,
  Ext: 1,
  SizeLf: 2,
  Data: 3,
  DataCr: 4,
  DataLf: 5,
  TrailerStart: 6,
  TrailerLine: 7,
  TrailerLf: 8,
  EndLf: 9,
} as const;

function exchange(mods: Builtins, url: URL, init: RequestInit): Promise<Response> {
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    return Promise.reject(new TypeError(`unsupported URL ${url.protocol}`));
  if ((init.method ?? 'GET').toUpperCase() !== 'GET' || init.body != null)
    return Promise.reject(new TypeError('the socket client sends a GET without a body only'));
  const signal = init.signal ?? undefined;
  if (signal?.aborted) return Promise.reject(signal.reason);
  let head: string;
  try {
    head = requestHead(url, init);
  } catch (err) {
    return Promise.reject(err);
  }

  return new Promise<Response>((resolveResponse, rejectResponse) => {
    const readBuf = Buffer.alloc(READ_BYTES);
    // Body bytes read but not yet taken by a read: the socket is paused while any wait here. Sized for one socket
    // read; it grows only if the socket delivers again after a pause, which it should not.
    let carry = Buffer.alloc(READ_BYTES);
    let carryStart = 0;
    let carryEnd = 0;
    let headBuf: Buffer | undefined = Buffer.alloc(MAX_HEAD_BYTES);
    let headLen = 0;
    let framing: Framing = { kind: 'close' };
    let chunkState: number = Chunk.Size;
    let chunkLeft = 0;
    let sizeDigits = 0;
    /** The Response was handed out (errors go to its body from then on). */
    let responded = false;
    let controller: ReadableByteStreamController | undefined;
    /** A read waits: pull was called and not yet answered. */
    let wanted = false;
    /** Bytes are being handed out: a pull re-entered from respond/enqueue only marks `wanted`. */
    let serving = false;
    let bodyDone = false;
    let finished = false;
    let received = 0;

    const hostname = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
    const port = Number(url.port || (url.protocol === 'https:' ? 443 : 80));
    const onread = { buffer: readBuf, callback: (n: number, buf: Uint8Array) => onRead(n, buf) };
    const socket: Net.Socket =
      url.protocol === 'https:'
        ? mods.tls.connect({
            host: hostname,
            port,
            // SNI: never for an IP address (RFC 6066 §3); certificate checks stay on.
            ...(mods.net.isIP(hostname) ? {} : { servername: hostname }),
            ALPNProtocols: ['http/1.1'],
            ...(testCa ? { ca: testCa } : {}),
            onread,
          } as Tls.ConnectionOptions)
        : mods.net.connect({ host: hostname, port, onread } as Net.NetConnectOpts);

    const cleanup = (): void => {
      finished = true;
      signal?.removeEventListener('abort', onAbort);
      socket.destroy();
    };
    const fail = (err: unknown): void => {
      if (finished) return;
      cleanup();
      if (!responded) return rejectResponse(err);
      try {
        controller?.error(err);
      } catch {
        /* already closed */
      }
    };
    function onAbort(): void {
      fail(signal?.reason);
    }
    signal?.addEventListener('abort', onAbort, { once: true });

    socket.on('error', (err) => fail(responded ? framingError(url, `the connection failed mid-body: ${err.message}`, err) : err));
    // 'end' (EOF read) or 'close' (the socket went away): whichever comes first ends or fails the body.
    const onEof = (): void => {
      if (finished) return;
      if (!responded) return fail(new Error('the server closed the connection before the response headers'));
      if (framing.kind === 'close') {
        bodyDone = true;
        return serve();
      }
      if (!bodyDone) {
        const what =
          framing.kind === 'length' ? `${framing.left} byte(s) missing after ${received}` : `mid-chunk after ${received} bytes`;
        fail(framingError(url, `the body was cut short: ${what}`));
      }
    };
    socket.on('end', onEof);
    socket.on('close', onEof);
    socket.write(head, 'latin1');

    /** Body bytes of a read: to the waiting read while one waits and nothing is held back, the rest to the carry. */
    function payload(buf: Uint8Array, start: number, end: number): void {
      received += end - start;
      while (start < end && wanted && carryEnd === carryStart) start += give(buf, start, end);
      if (start < end) keep(buf, start, end);
    }

    /** Hands bytes to the pending read: copied into its BYOB view, or (a default read) as a new copy. */
    function give(buf: Uint8Array, start: number, end: number): number {
      const c = controller!;
      wanted = false;
      const req = c.byobRequest;
      if (req?.view) {
        const view = new Uint8Array(req.view.buffer, req.view.byteOffset, req.view.byteLength);
        const n = Math.min(view.byteLength, end - start);
        view.set(buf.subarray(start, start + n));
        req.respond(n);
        return n;
      }
      // A default reader gets a fresh copy: enqueue takes over (detaches) its buffer, so never a view of ours.
      const n = Math.min(DEFAULT_READ_BYTES, end - start);
      c.enqueue(new Uint8Array(buf.subarray(start, start + n)));
      return n;
    }

    function keep(buf: Uint8Array, start: number, end: number): void {
      const n = end - start;
      if (carryStart > 0 && carryEnd + n > carry.length) {
        carry.copyWithin(0, carryStart, carryEnd);
        carryEnd -= carryStart;
        carryStart = 0;
      }
      if (carryEnd + n > carry.length) {
        const bigger = Buffer.alloc(carryEnd + n);
        carry.copy(bigger, 0, 0, carryEnd);
        carry = bigger;
      }
      carry.set(buf.subarray(start, end), carryEnd);
      carryEnd += n;
    }

    /** Answers waiting reads from the carry; closes the body once it is done and drained; else reads on. */
    function serve(): void {
      if (serving || finished || !controller) return;
      serving = true;
      try {
        while (wanted && carryEnd > carryStart) carryStart += give(carry, carryStart, carryEnd);
        if (carryStart === carryEnd) carryStart = carryEnd = 0;
        if (carryEnd === 0 && bodyDone) {
          finished = true;
          signal?.removeEventListener('abort', onAbort);
          socket.destroy();
          controller.close();
          // A pending BYOB read is answered "done" only once responded to with 0 bytes.
          controller.byobRequest?.respond(0);
        } else if (wanted && carryEnd === 0) socket.resume();
      } finally {
        serving = false;
      }
    }

    function onRead(n: number, buf: Uint8Array): boolean {
      if (finished) return false;
      serving = true;
      try {
        let at = 0;
        if (!responded) at = readHead(buf, n);
        if (controller && at < n && !finished) frame(buf, at, n);
      } catch (err) {
        fail(err);
        return false;
      } finally {
        serving = false;
      }
      serve();
      // The head is read through; the body only while a read waits and nothing is held back. (A paused socket does
      // not see the server's EOF either: a read that wants more resumes it.)
      if (finished) return false;
      return !responded || (wanted && carryEnd === 0);
    }

    /** Collects the head; returns how many bytes of `buf` it used (the rest is body). */
    function readHead(buf: Uint8Array, n: number): number {
      const hb = headBuf!;
      const take = Math.min(hb.length - headLen, n);
      hb.set(buf.subarray(0, take), headLen);
      // Search from 3 bytes back: the blank line may straddle two reads.
      const from = Math.max(0, headLen - 3);
      headLen += take;
      const end = hb.subarray(0, headLen).indexOf('\r\n\r\n', from, 'latin1');
      if (end < 0) {
        if (headLen >= hb.length) throw framingError(url, `response head over ${MAX_HEAD_BYTES} bytes`);
        return n;
      }
      const used = end + 4 - (headLen - take);
      const parsed = parseHead(hb.toString('latin1', 0, end));
      if (!parsed) throw framingError(url, 'malformed response head');
      if (parsed.status < 200) {
        // An interim answer (100 Continue): dropped, and the real head read from what follows.
        headLen = 0;
        return used + (used < n ? readHead(buf.subarray(used), n - used) : 0);
      }
      headBuf = undefined;
      const f = framingOf(parsed);
      if (!f) throw framingError(url, 'invalid content-length');
      framing = f;
      const noBody = parsed.status === 204 || parsed.status === 304 || (f.kind === 'length' && f.left === 0);
      const init = { status: parsed.status, statusText: parsed.statusText, headers: parsed.headers };
      const res = new Response(noBody ? null : bodyStream(), init);
      responded = true;
      if (noBody) cleanup();
      resolveResponse(res);
      return used;
    }

    function bodyStream(): ReadableStream<Uint8Array> {
      return new ReadableStream({
        type: 'bytes',
        start(c: ReadableByteStreamController) {
          controller = c;
        },
        pull() {
          wanted = true;
          serve();
        },
        cancel() {
          cleanup();
        },
      });
    }

    /** Splits the bytes `start..end` of a read into payload, per the framing. */
    function frame(buf: Uint8Array, start: number, end: number): void {
      if (framing.kind === 'close') return payload(buf, start, end);
      if (framing.kind === 'length') {
        const n = Math.min(framing.left, end - start);
        if (n > 0) payload(buf, start, start + n);
        framing.left -= n;
        if (framing.left === 0) bodyDone = true;
        return;
      }
      let i = start;
      while (i < end && !bodyDone) {
        if (chunkState === Chunk.Data) {
          const n = Math.min(chunkLeft, end - i);
          payload(buf, i, i + n);
          i += n;
          chunkLeft -= n;
          if (chunkLeft === 0) chunkState = Chunk.DataCr;
          continue;
        }
        chunkStep(buf[i]!);
        i++;
      }
    }

    /** One framing byte of a chunked body (size line, CRLFs, trailers). */
    function chunkStep(b: number): void {
      const bad = (): never => {
        throw framingError(url, 'malformed chunked body');
      };
      switch (chunkState) {
        case Chunk.Size: {
          const digit = b >= 48 && b <= 57 ? b - 48 : b >= 97 && b <= 102 ? b - 87 : b >= 65 && b <= 70 ? b - 55 : -1;
          if (digit >= 0) {
            if (++sizeDigits > 12) bad();
            chunkLeft = chunkLeft * 16 + digit;
          } else if (sizeDigits === 0) bad();
          else if (b === 13) chunkState = Chunk.SizeLf;
          else if (b === 59 || b === 32 || b === 9) chunkState = Chunk.Ext;
          else bad();
          return;
        }
        case Chunk.Ext:
          if (b === 13) chunkState = Chunk.SizeLf;
          return;
        case Chunk.SizeLf:
          if (b !== 10) bad();
          sizeDigits = 0;
          chunkState = chunkLeft === 0 ? Chunk.TrailerStart : Chunk.Data;
          return;
        case Chunk.DataCr:
          if (b !== 13) bad();
          chunkState = Chunk.DataLf;
          return;
        case Chunk.DataLf:
          if (b !== 10) bad();
          chunkState = Chunk.Size;
          return;
        case Chunk.TrailerStart:
          // An empty line ends the body; anything else is a trailer field, skipped.
          chunkState = b === 13 ? Chunk.EndLf : Chunk.TrailerLine;
          return;
        case Chunk.TrailerLine:
          if (b === 13) chunkState = Chunk.TrailerLf;
          return;
        case Chunk.TrailerLf:
          if (b !== 10) bad();
          chunkState = Chunk.TrailerStart;
          return;
        case Chunk.EndLf:
          if (b !== 10) bad();
          bodyDone = true;
          return;
        default:
          bad();
      }
    }
  });
}
