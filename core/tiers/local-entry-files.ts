/**
 * The local folder tier's files: an entry file's layout (the value, then the header as JSON, then an 8-byte trailer
 * holding the header's length and a magic number, so the value is read from offset 0 without parsing anything
 * first), reading one back, and writing any of the tier's files atomically (a temp file in the target's directory,
 * fsync, rename or link, fsync of the directory). Apart from local-folder-tier.ts, which decides what to write where.
 */
import { createHash, randomBytes } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { link, mkdir, open, rename, unlink, type FileHandle } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { StrataError } from '../errors.js';
import type { EntryHeader } from '../model/entry.js';
import { decodeHeader, encodeHeader } from '../model/entry.js';

const MAGIC = Buffer.from('STR1');
const TRAILER_BYTES = 8;
const MAX_HEADER_BYTES = 1024 * 1024;
/** Temp files start with this (the sweep removes old ones; listings skip them). */
export const TEMP_PREFIX = '.tmp-';

export interface EntryFilesOptions {
  /** fsync files and their directory on write (off: faster, for tests and scratch use). */
  fsync: boolean;
  /** The tier's error for a file system failure (a StrataError passes through). */
  unavailable: (e: unknown) => Error;
}

/** Reads entry files and writes the tier's files atomically. */
export class EntryFiles {
  private readonly fsync: boolean;
  private readonly unavailable: (e: unknown) => Error;

  constructor(opts: EntryFilesOptions) {
    this.fsync = opts.fsync;
    this.unavailable = opts.unavailable;
  }

  /** The entry file at `path`, open, with its header read (undefined: none there, or not an entry file). */
  async open(path: string): Promise<{ fh: FileHandle; header: EntryHeader; valueLength: number } | undefined> {
    let fh: FileHandle;
    try {
      fh = await open(path, 'r');
    } catch (e) {
      if (isMissing(e)) return undefined;
      throw this.unavailable(e);
    }
    try {
      const { size } = await fh.stat();
      if (size < TRAILER_BYTES) throw new CorruptEntry();
      const t = Buffer.alloc(TRAILER_BYTES);
      await readFully(fh, t, size - TRAILER_BYTES);
      if (!t.subarray(4).equals(MAGIC)) throw new CorruptEntry();
      const hlen = t.readUInt32BE(0);
      if (hlen > MAX_HEADER_BYTES || hlen > size - TRAILER_BYTES) throw new CorruptEntry();
      const hb = Buffer.alloc(hlen);
      const valueLength = size - TRAILER_BYTES - hlen;
      await readFully(fh, hb, valueLength);
      let header: EntryHeader;
      try {
        header = decodeHeader(hb.toString('utf8'));
      } catch {
        throw new CorruptEntry();
      }
      header.size = valueLength;
      return { fh, header, valueLength };
    } catch (e) {
      await fh.close().catch(() => {});
      // Writes are atomic, so a malformed file was not written by us: treat it as absent (a put replaces it).
      if (e instanceof CorruptEntry) return undefined;
      throw this.unavailable(e);
    }
  }

  /** The header of the entry file at `path` (undefined: none there, or not an entry file). */
  async readHeader(path: string): Promise<EntryHeader | undefined> {
    const file = await this.open(path);
    if (!file) return undefined;
    await file.fh.close().catch(() => {});
    return file.header;
  }

  /**
   * temp file in the target's directory → write → fsync → rename → fsync dir. Returns the bytes written.
   * `exclusive`: create only, with link() instead of rename() (atomic, fails when the target exists:
   * StagedUploadExistsError).
   */
  async writeAtomic(
    path: string,
    parts: Iterable<Uint8Array> | AsyncIterable<Uint8Array>,
    maxBytes?: number,
    exclusive = false,
  ): Promise<number> {
    const dir = dirname(path);
    const tmp = join(dir, `${TEMP_PREFIX}${randomBytes(6).toString('hex')}`);
    let written = 0;
    try {
      await mkdir(dir, { recursive: true });
      const fh = await open(tmp, 'wx');
      try {
        for await (const part of parts) {
          written += part.length;
          if (maxBytes !== undefined && written > maxBytes)
            throw new StrataError('PAYLOAD_TOO_LARGE', `upload is larger than ${maxBytes} bytes`, { limit: maxBytes });
          await fh.writeFile(part);
        }
        if (this.fsync) await fh.sync();
      } finally {
        await fh.close();
      }
      if (exclusive) {
        try {
          await link(tmp, path);
        } catch (e) {
          if ((e as NodeJS.ErrnoException).code === 'EEXIST') throw new StagedUploadExistsError(path);
          throw e;
        }
        await unlink(tmp);
      } else {
        await rename(tmp, path);
      }
      await this.syncDir(dir);
      return written;
    } catch (e) {
      await this.unlinkQuiet(tmp).catch(() => {});
      if (e instanceof StagedUploadExistsError) throw e;
      throw this.unavailable(e);
    }
  }

  async syncDir(dir: string): Promise<void> {
    if (!this.fsync) return;
    try {
      const d = await open(dir, 'r');
      try {
        await d.sync();
      } finally {
        await d.close();
      }
    } catch {
      // Not supported everywhere (e.g. Windows); the rename itself is still atomic.
    }
  }

  async unlinkQuiet(path: string): Promise<void> {
    try {
      await unlink(path);
    } catch (e) {
      if (!isMissing(e)) throw this.unavailable(e);
    }
  }
}

/** A file that is not an entry file (writes are atomic, so not one this tier wrote): read as absent. */
class CorruptEntry extends Error {}

/** A staged upload (or the marker of a completed one) is already there: the upload URL takes one PUT (the server answers 412). */
export class StagedUploadExistsError extends Error {
  constructor(path: string) {
    super(`already staged: ${path}`);
    this.name = 'StagedUploadExistsError';
  }
}

export function trailer(h: EntryHeader): Buffer {
  const json = Buffer.from(encodeHeader(h), 'utf8');
  const t = Buffer.alloc(TRAILER_BYTES);
  t.writeUInt32BE(json.length, 0);
  MAGIC.copy(t, 4);
  return Buffer.concat([json, t]);
}

export async function readFully(fh: FileHandle, buf: Buffer, position: number): Promise<void> {
  let off = 0;
  while (off < buf.length) {
    const { bytesRead } = await fh.read(buf, off, buf.length - off, position + off);
    if (bytesRead === 0) throw new CorruptEntry();
    off += bytesRead;
  }
}

export async function hashFile(path: string): Promise<{ size: number; hash: string }> {
  const h = createHash('sha256');
  let size = 0;
  for await (const chunk of createReadStream(path)) {
    h.update(chunk as Buffer);
    size += (chunk as Buffer).length;
  }
  return { size, hash: h.digest('base64url') };
}

export function isMissing(e: unknown): boolean {
  const code = (e as NodeJS.ErrnoException | undefined)?.code;
  return code === 'ENOENT' || code === 'ENOTDIR';
}
