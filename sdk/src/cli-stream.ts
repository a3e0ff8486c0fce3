/**
 * `strata get --out` / `--range` and `strata put --file`: values streamed between files (or stdin/stdout) and the
 * server through `getStream` / `putStream`, so a value of any size passes with bounded memory.
 */
import { createReadStream, createWriteStream } from 'node:fs';
import { open, stat } from 'node:fs/promises';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { ReadableStream as NodeWebStream } from 'node:stream/web';
import type { StrataClient } from './client.js';
import { UsageError, type CliIo } from './cli-workflow.js';
import type { StreamSource } from './streams.js';

/** `--range a-b` (inclusive) or `a-`: the SDK's range. */
export function parseCliRange(raw: string): { start: number; end?: number } {
  const m = /^(\d{1,16})-(\d{0,16})$/.exec(raw);
  if (!m || (m[2] !== '' && Number(m[2]) < Number(m[1])))
    throw new UsageError(
      `--range takes first-last byte offsets (inclusive), e.g. 0-1023 or 1024-; not '${raw}'`,
      undefined,
      'get',
    );
  return m[2] === '' ? { start: Number(m[1]) } : { start: Number(m[1]), end: Number(m[2]) };
}

/** Writes to the CLI's stdout, waiting for it to drain when it says so (a pipe to a slow reader). */
async function writeOut(out: CliIo['stdout'], chunk: Uint8Array): Promise<void> {
  const more = out.write(chunk);
  const emitter = out as { once?: (event: string, fn: () => void) => unknown };
  if (more === false && typeof emitter.once === 'function') await new Promise<void>((r) => emitter.once!('drain', r));
}

/** `strata get <key> --out <file|-> [--range a-b]`: 0, or 1 when the key does not exist. */
export async function getToOutput(
  client: StrataClient,
  key: string,
  o: { out: string; range?: string | undefined; verbose?: boolean | undefined },
  io: CliIo,
): Promise<number> {
  const range = o.range === undefined ? undefined : parseCliRange(o.range);
  const item = await client.getStream(key, range ? { range } : {});
  if (!item) {
    io.stderr.write(`strata: ${key} not found\n`);
    return 1;
  }
  if (o.verbose) {
    const span = item.range ? `bytes ${item.range.start}-${item.range.end} of ` : '';
    io.stderr.write(`version  ${item.version}\ntier     ${item.tier}\nsize     ${span}${item.size ?? '?'} bytes\n`);
  }
  if (o.out !== '-' && (await writeByob(item.body, o.out))) return 0;
  const body = Readable.fromWeb(item.body as NodeWebStream<Uint8Array>);
  if (o.out === '-') {
    for await (const chunk of body) await writeOut(io.stdout, chunk as Uint8Array);
  } else {
    await pipeline(body, createWriteStream(o.out));
  }
  return 0;
}

/**
 * The body into a file through a BYOB reader and one 64 KiB buffer, each read written before the next: a default
 * reader allocates a chunk per read, which V8 frees only at a later collection (bench/README.md "## stream"). False,
 * having read nothing, where the body is not a byte stream (fetch's, outside Node's own download path).
 */
async function writeByob(body: ReadableStream<Uint8Array>, path: string): Promise<boolean> {
  let reader: ReadableStreamBYOBReader;
  try {
    reader = body.getReader({ mode: 'byob' });
  } catch {
    return false;
  }
  const file = await open(path, 'w');
  try {
    let buffer = new ArrayBuffer(64 * 1024);
    for (;;) {
      const { done, value } = await reader.read(new Uint8Array(buffer));
      if (done || !value) break;
      for (let at = 0; at < value.byteLength;) at += (await file.write(value, at, value.byteLength - at)).bytesWritten;
      buffer = value.buffer as ArrayBuffer; // the read took the buffer over and hands it back with the bytes
    }
  } catch (e) {
    await reader.cancel(e).catch(() => {});
    throw e;
  } finally {
    await file.close();
  }
  return true;
}

/** `strata put <key> --file <file|->`: the file (or stdin) streamed up; prints the write's result as JSON. */
export async function putFromFile(
  client: StrataClient,
  key: string,
  o: { file: string; ttl?: number | undefined; tags?: string[] | undefined; contentType?: string | undefined },
  io: CliIo & { stdin?: AsyncIterable<Uint8Array | string> | Iterable<Uint8Array | string> | undefined },
): Promise<number> {
  let source: StreamSource;
  if (o.file === '-') {
    source = Readable.from(io.stdin ?? []);
  } else {
    const s = await stat(o.file).catch(() => undefined);
    if (!s?.isFile()) throw new UsageError(`--file: '${o.file}' is not a readable file`, undefined, 'put');
    source = createReadStream(o.file);
  }
  const result = await client.putStream(key, source, {
    ttl: o.ttl,
    ...(o.tags ? { tags: o.tags } : {}),
    contentType: o.contentType,
  });
  io.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
  return 0;
}
