// How an entry is stored in one Redis string: the version digits, the dirty/pending byte, the header JSON, the value.
import { decodeHeader, isExpired, type Entry, type EntryHeader } from '../../model/entry.js';

/**
 * Layout of the one Redis string that holds an entry:
 *
 * - bytes 0..15: the version, 16 ASCII decimal digits, zero-padded (versions are safe integers, < 2^53);
 * - byte 16: `1` while the entry is dirty (write-back, not yet flushed below), `2` while a promotion is pending
 *   (not servable until the tiers below are confirmed to hold its version), `0` otherwise;
 * - bytes 17..24: the byte length of the header JSON, 8 ASCII decimal digits, zero-padded;
 * - the header JSON (UTF-8). Its flags never hold `dirty`: byte 16 does, so marking clean is one SETRANGE;
 * - the value bytes, to the end.
 *
 * A read is one GET and one JSON.parse of the header; the value is a view of the reply (no copy). Scripts read
 * only bytes 0..16 (GETRANGE) and never load the value.
 */
export const BLOB_PREFIX_BYTES = 25;
const VERSION_DIGITS = 16;
const DIRTY_AT = 16;
const HEADER_LENGTH_AT = 17;
const HEADER_LENGTH_DIGITS = 8;
const MAX_HEADER_BYTES = 99_999_999;
/** head() first reads this much of the entry; a longer header costs a second, full read. */
export const HEAD_READ_BYTES = 4096;
const ZEROS = '0'.repeat(VERSION_DIGITS);
const CHAR_0 = 0x30;
const CHAR_1 = 0x31;
const CHAR_2 = 0x32;

function checkVersion(version: number): void {
  if (!Number.isSafeInteger(version) || version < 0) {
    throw new Error(`RedisTier: a version must be a non-negative safe integer (got ${version})`);
  }
}

/** A version as stored: 16 zero-padded decimal digits. */
export function versionDigits(version: number): string {
  checkVersion(version);
  const s = String(version);
  return ZEROS.slice(s.length) + s;
}

/** Writes `n` (a non-negative safe integer of at most `width` digits) as zero-padded ASCII digits. */
function writeDigits(buf: Buffer, n: number, at: number, width: number): void {
  for (let i = at + width - 1; i >= at; i--) {
    const q = Math.floor(n / 10);
    buf[i] = CHAR_0 + n - q * 10;
    n = q;
  }
}

const BASE64URL = /^[A-Za-z0-9_-]*$/;

/**
 * The header JSON as stored: without the dirty and pending flags (byte 16 holds them). The usual header (numbers, a
 * base64url hash, no tags, no other flag) is written by hand, at half the cost of JSON.stringify; anything else goes
 * through JSON.stringify. Either way it is plain JSON that decodeHeader() reads back to an equal header.
 */
export function storedHeaderJson(h: EntryHeader): string {
  const { version, expiresAt, size, hash, tags, contentType, flags } = h;
  let plainFlags = true;
  for (const flag in flags) {
    if (flag !== 'dirty' && flag !== 'pending') {
      plainFlags = false;
      break;
    }
  }
  if (
    plainFlags &&
    (tags === undefined || tags.length === 0) &&
    contentType === undefined &&
    h.encoding === undefined &&
    h.staleAt === undefined &&
    Number.isSafeInteger(version) &&
    Number.isFinite(size) &&
    (expiresAt === null || Number.isFinite(expiresAt)) &&
    BASE64URL.test(hash) &&
    (h.hotEpoch === undefined || Number.isSafeInteger(h.hotEpoch))
  ) {
    const epoch = h.hotEpoch === undefined ? '' : `,"hotEpoch":${h.hotEpoch}`;
    return `{"version":${version},"expiresAt":${expiresAt},"size":${size},"hash":"${hash}","tags":[],"flags":{}${epoch}}`;
  }
  if (flags.dirty === undefined && flags.pending === undefined) return JSON.stringify(h);
  const { dirty: _dirty, pending: _pending, ...rest } = flags;
  return JSON.stringify({ ...h, flags: rest });
}

/** Checks what the layout cannot hold; returns the byte length of the header JSON. */
export function checkedJsonBytes(h: EntryHeader, json: string): number {
  checkVersion(h.version);
  const jsonBytes = Buffer.byteLength(json);
  if (jsonBytes > MAX_HEADER_BYTES) throw new Error(`RedisTier: entry header is ${jsonBytes} bytes (limit ${MAX_HEADER_BYTES})`);
  return jsonBytes;
}

/** Writes the stored form of an entry at `at` (BLOB_PREFIX_BYTES + jsonBytes + value length bytes). */
export function writeBlob(buf: Buffer, at: number, h: EntryHeader, json: string, jsonBytes: number, value: Buffer): void {
  writeDigits(buf, h.version, at, VERSION_DIGITS);
  buf[at + DIRTY_AT] = h.flags.dirty ? CHAR_1 : h.flags.pending ? CHAR_2 : CHAR_0;
  writeDigits(buf, jsonBytes, at + HEADER_LENGTH_AT, HEADER_LENGTH_DIGITS);
  buf.write(json, at + BLOB_PREFIX_BYTES, 'utf8');
  buf.set(value, at + BLOB_PREFIX_BYTES + jsonBytes);
}

/** The stored form of an entry (see the layout above). */
export function encodeEntryBlob(entry: Entry): Buffer {
  const h = entry.header;
  const json = storedHeaderJson(h);
  const jsonBytes = checkedJsonBytes(h, json);
  const blob = Buffer.allocUnsafe(BLOB_PREFIX_BYTES + jsonBytes + entry.value.length);
  writeBlob(blob, 0, h, json, jsonBytes, entry.value);
  return blob;
}

/** Decodes a stored entry; the value is a view of `blob`. */
export function decodeEntryBlob(blob: Buffer): Entry {
  const end = headerEnd(blob);
  if (end > blob.length) throw corrupt();
  return { header: blobHeader(blob, end), value: blob.subarray(end) };
}

function corrupt(): Error {
  return new Error('corrupt entry in Redis');
}

/** Where the header JSON of a stored entry (or of a prefix of one) ends. */
export function headerEnd(blob: Buffer): number {
  if (blob.length < BLOB_PREFIX_BYTES) throw corrupt();
  let n = 0;
  for (let i = HEADER_LENGTH_AT; i < BLOB_PREFIX_BYTES; i++) {
    const d = blob[i]! - CHAR_0;
    if (d < 0 || d > 9) throw corrupt();
    n = n * 10 + d;
  }
  return BLOB_PREFIX_BYTES + n;
}

export function blobHeader(blob: Buffer, end: number): EntryHeader {
  const h = decodeHeader(blob.toString('utf8', BLOB_PREFIX_BYTES, end));
  if (blob[DIRTY_AT] === CHAR_1) h.flags.dirty = true;
  else if (blob[DIRTY_AT] === CHAR_2) h.flags.pending = true;
  return h;
}

/** GET reply → entry; Redis expires keys itself, the isExpired check guards against clock skew. */
export function readEntry(blob: Buffer | null): Entry | undefined {
  if (blob === null) return undefined;
  const e = decodeEntryBlob(blob);
  return isExpired(e.header) ? undefined : e;
}

/** A key of another type holds an entry of an older layout: it reads as absent (and a write replaces it). */
export function isWrongType(e: unknown): boolean {
  return e instanceof Error && e.message.startsWith('WRONGTYPE');
}
