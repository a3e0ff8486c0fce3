/**
 * The client of the stream benchmark in a process of its own (bench/stream.ts forks one per transfer), so its peak
 * RSS is the client's alone: the server's memory stays in the parent. argv: <mode> <endpoint> <bytes> <partSize>
 * <concurrency>; sends back one message with the figures, then exits.
 *  - `stream`: `putStream` of a generated value, then `getStream` into a SHA-256 (the SDK's multipart upload and the
 *    303 download, streamed) through a BYOB reader with one reused buffer;
 *  - `stream-default`: the same, the body read through a default reader (a new chunk a read: what `for await`,
 *    `Readable.fromWeb` and most code do);
 *  - `raw`: the same bytes over bare HTTP: one upload URL, a single streamed `fetch` PUT to it and the completion,
 *    then one streamed `fetch` GET of the download URL (what any client would do by hand; no parts, no SDK).
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { StrataClient } from '../sdk/src/index.js';

const CHUNK = 64 * 1024;

/**
 * `bytes` of a fixed pseudo-random pattern (64 KiB chunks, as a file read stream's, each stamped with its index),
 * hashed as it is generated. `reuse`: every chunk is the same buffer, refilled, as a reader that reads a file into
 * one buffer; putStream copies a chunk into its part before it asks for the next, so the source's own garbage (a new
 * buffer a chunk, which the garbage collector frees late) does not count against the SDK. The bare-HTTP baseline
 * gets a new buffer a chunk: fetch may still hold a chunk it was given.
 */
async function* generated(bytes: number, hash: ReturnType<typeof createHash>, reuse: boolean): AsyncGenerator<Uint8Array> {
  const base = Buffer.alloc(CHUNK);
  const scratch = Buffer.alloc(CHUNK);
  for (let i = 0; i < CHUNK; i += 4) base.writeUInt32LE((Math.imul(i, 2654435761) ^ 0x9e3779b9) >>> 0, i);
  for (let i = 0, left = bytes; left > 0; i++) {
    const n = Math.min(CHUNK, left);
    const chunk = reuse ? scratch.subarray(0, n) : Buffer.from(base.subarray(0, n));
    if (reuse) base.copy(scratch, 0, 0, n);
    chunk.writeUInt32LE(i, 0);
    hash.update(chunk);
    yield chunk;
    left -= n;
  }
}

/**
 * The process's private resident memory (RssAnon in /proc/self/status), on Linux: its RSS without the file pages
 * it maps (the Node binary's code, some 40 MiB), which the kernel shares and can drop under pressure.
 */
function privateBytes(): number | undefined {
  try {
    const kb = /^RssAnon:\s+(\d+) kB$/m.exec(readFileSync('/proc/self/status', 'utf8'));
    return kb ? Number(kb[1]) * 1024 : undefined;
  } catch {
    return undefined;
  }
}

/** The body into a SHA-256 through a default reader: a new chunk a read (what `for await` or `Readable.fromWeb` do). */
async function hashed(body: ReadableStream<Uint8Array>): Promise<{ sha: string; bytes: number }> {
  const h = createHash('sha256');
  let bytes = 0;
  const reader = body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    h.update(value);
    bytes += value.byteLength;
  }
  return { sha: h.digest('hex'), bytes };
}

/**
 * The body into a SHA-256 through a BYOB reader and one 64 KiB buffer, handed back each read (a read detaches the
 * buffer it is given and returns it in `value`): where the body is a byte stream (getStream's on Node), nothing is
 * allocated per chunk.
 */
async function hashedByob(body: ReadableStream<Uint8Array>): Promise<{ sha: string; bytes: number }> {
  const h = createHash('sha256');
  let bytes = 0;
  const reader = body.getReader({ mode: 'byob' });
  let buf = new Uint8Array(CHUNK);
  for (;;) {
    const { done, value } = await reader.read(buf);
    if (done) break;
    h.update(value);
    bytes += value.byteLength;
    buf = new Uint8Array(value.buffer);
  }
  return { sha: h.digest('hex'), bytes };
}

/** What the RSS held at its peak: the JS heap, and the ArrayBuffers' bytes (part buffers, live or dead chunks). */
interface Breakdown {
  heapTotalBytes: number;
  arrayBuffersBytes: number;
}

async function main(mode: string, endpoint: string, bytes: number, partSize: number, concurrency: number): Promise<void> {
  let peak = process.memoryUsage().rss;
  const startRss = peak;
  let at: Breakdown = { heapTotalBytes: 0, arrayBuffersBytes: 0 };
  let peakAnon: number | undefined;
  const sample = (): void => {
    const anon = privateBytes();
    if (anon !== undefined) peakAnon = Math.max(peakAnon ?? 0, anon);
    const m = process.memoryUsage();
    if (m.rss >= peak) [peak, at] = [m.rss, { heapTotalBytes: m.heapTotal, arrayBuffersBytes: m.arrayBuffers }];
  };
  const sampler = setInterval(sample, 20);
  const key = `v-${mode}-${process.pid}`;
  const sent = createHash('sha256');
  const strata = new StrataClient({ endpoint, namespace: 'bench', transferTimeoutMs: 600_000 });
  const t0 = performance.now();
  if (mode !== 'raw') {
    await strata.putStream(key, generated(bytes, sent, true), { partSize, concurrency });
  } else {
    const base = `${endpoint}/v1/ns/bench/uploads/${key}`;
    const post = (url: string, body: unknown) =>
      fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    const ticket = (await (await post(base, {})).json()) as { uploadId: string; url: string; headers: Record<string, string> };
    const source = ReadableStream.from(generated(bytes, sent, false));
    const put = await fetch(ticket.url, { method: 'PUT', headers: ticket.headers, body: source, duplex: 'half' } as RequestInit);
    if (!put.ok) throw new Error(`raw PUT answered ${put.status}`);
    const done = await post(`${base}/complete`, { uploadId: ticket.uploadId });
    if (!done.ok) throw new Error(`complete answered ${done.status}: ${await done.text()}`);
  }
  const t1 = performance.now();
  sample();
  const putPeak = peak;
  const putAt = at;
  let got: { sha: string; bytes: number };
  if (mode === 'raw') {
    const dl = (await (await fetch(`${endpoint}/v1/ns/bench/downloads/${key}`)).json()) as { url: string };
    const res = await fetch(dl.url);
    got = await hashed(res.body!);
  } else {
    const item = await strata.getStream(key);
    got = await (mode === 'stream' ? hashedByob(item!.body) : hashed(item!.body));
  }
  const t2 = performance.now();
  sample();
  clearInterval(sampler);
  await strata.delete(key);
  const expected = sent.digest('hex');
  process.send!({
    mode,
    bytes,
    putSeconds: (t1 - t0) / 1000,
    getSeconds: (t2 - t1) / 1000,
    intact: got.sha === expected && got.bytes === bytes,
    startRssBytes: startRss,
    peakRssBytes: peak,
    putPeakRssBytes: putPeak,
    putPeakAt: putAt,
    peakAt: at,
    maxRssBytes: process.resourceUsage().maxRSS * 1024,
    peakAnonBytes: peakAnon,
  });
}

const [mode, endpoint, bytes, partSize, concurrency] = process.argv.slice(2);
main(mode!, endpoint!, Number(bytes), Number(partSize), Number(concurrency)).then(
  () => process.exit(0),
  (e: unknown) => {
    console.error(e);
    process.exit(1);
  },
);
