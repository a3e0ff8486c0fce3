/**
 * Byte layouts of the node store (see `NodeStore`): the `meta` record every key has in LMDB, the write
 * journal's record of a decided write, and the zero-copy views the store reads them through. Separate from the
 * store so the on-disk formats are defined (and read) in one place, apart from the rules that decide writes.
 */
import { FRAME_BYTES } from './journal.js';
import { decodeHeader } from '../../core/model/entry.js';

/** The fixed part of a `meta` record: `[f64 version][f64 expiresAt, NaN = none][u32 accounted bytes]`. */
export interface Meta {
  version: number;
  expiresAt: number | null;
  bytes: number;
  /** The value is in the `data` database (not inline). */
  external: boolean;
}

/** What a journal record does to LMDB (bits). */
export const OP_META_PUT = 1;
export const OP_META_DEL = 2;
export const OP_DATA_PUT = 4;
export const OP_DATA_DEL = 8;
export const OP_DATA = OP_DATA_PUT | OP_DATA_DEL;
/** A journal record: `[u8 ops][u8 0][u16 key length][u32 record length][u32 value length]`, key, record, value. */
const OP_FIXED = 12;

export function decodeOp(p: Buffer): { ops: number; sk: Buffer; rec: Buffer; value: Buffer } {
  const skLen = p.readUInt16BE(2);
  const recLen = p.readUInt32BE(4);
  const valLen = p.readUInt32BE(8);
  const at = OP_FIXED + skLen;
  return {
    ops: p[0]!,
    sk: p.subarray(OP_FIXED, at),
    rec: p.subarray(at, at + recLen),
    value: p.subarray(at + recLen, at + recLen + valLen),
  };
}

export const META_FIXED = 20;
/** First byte after the fixed part of an inline record (an external record's header JSON starts with `{`). */
const INLINE_MARK = 0x01;
export const INLINE_FIXED = META_FIXED + 5;
/** Values up to this size are stored inside their record (see the `NodeStore` comment). */
export const INLINE_VALUE_MAX_BYTES = 2048;

/** What a `meta` record holds: inline with `value` when given, else external (the value goes to `data`). */
export interface RecordParts {
  m: Meta;
  headerJson: string;
  value?: Buffer | undefined;
}

function recordLength(hBytes: number, value: Buffer | undefined): number {
  return (value ? INLINE_FIXED : META_FIXED) + hBytes + (value?.length ?? 0);
}

/** Writes the record of `parts` (header JSON `hBytes` long) at byte `at` of `out`. */
function writeRecord(out: Buffer, at: number, { m, headerJson, value }: RecordParts, hBytes: number): void {
  out.writeDoubleBE(m.version, at);
  out.writeDoubleBE(m.expiresAt ?? Number.NaN, at + 8);
  out.writeUInt32BE(m.bytes, at + 16);
  if (value) {
    out[at + META_FIXED] = INLINE_MARK;
    out.writeUInt32BE(hBytes, at + META_FIXED + 1);
  }
  const h = at + (value ? INLINE_FIXED : META_FIXED);
  out.write(headerJson, h, 'utf8');
  if (value) out.set(value, h + hBytes);
}

export function encodeRecord(parts: RecordParts): Buffer {
  const hBytes = Buffer.byteLength(parts.headerJson);
  const out = Buffer.allocUnsafe(recordLength(hBytes, parts.value));
  writeRecord(out, 0, parts, hBytes);
  return out;
}

/**
 * A journal record in one buffer, with the space for its frame in front (see `Journal.append`): `[u8
 * ops][u8 0][u16 key length][u32 record length][u32 value length]`, then the storage key, the `meta` record and the
 * external value, if any. Answers views of the record and value too, which the overlay keeps (no second copy).
 */
export function journalRecord(
  sk: Buffer,
  ops: number,
  record?: RecordParts,
  external?: Buffer,
): { framed: Buffer; rec?: Buffer; value?: Buffer } {
  const hBytes = record ? Buffer.byteLength(record.headerJson) : 0;
  const recLen = record ? recordLength(hBytes, record.value) : 0;
  const valLen = external?.length ?? 0;
  const at = FRAME_BYTES + OP_FIXED + sk.length;
  const out = Buffer.allocUnsafe(at + recLen + valLen);
  out[FRAME_BYTES] = ops;
  out[FRAME_BYTES + 1] = 0;
  out.writeUInt16BE(sk.length, FRAME_BYTES + 2);
  out.writeUInt32BE(recLen, FRAME_BYTES + 4);
  out.writeUInt32BE(valLen, FRAME_BYTES + 8);
  out.set(sk, FRAME_BYTES + OP_FIXED);
  if (record) writeRecord(out, at, record, hBytes);
  if (external) out.set(external, at + recLen);
  return {
    framed: out,
    ...(record ? { rec: out.subarray(at, at + recLen) } : {}),
    ...(external ? { value: out.subarray(at + recLen) } : {}),
  };
}

export function decodeMetaFixed(b: Buffer): Meta {
  return {
    version: b.readDoubleBE(0),
    expiresAt: expiresAtOf(b),
    bytes: b.readUInt32BE(16),
    external: b[META_FIXED] !== INLINE_MARK,
  };
}

/** A record's expiry (ms since the epoch), null for none: read alone where a whole Meta is not needed. */
export function expiresAtOf(b: Buffer): number | null {
  const e = b.readDoubleBE(8);
  return Number.isNaN(e) ? null : e;
}

/** Where an inline record's header ends and its value starts (undefined: external record). */
export function inlineValueAt(b: Buffer): number | undefined {
  return b[META_FIXED] === INLINE_MARK ? INLINE_FIXED + b.readUInt32BE(META_FIXED + 1) : undefined;
}

export function metaHeaderJson(b: Buffer): string {
  const at = inlineValueAt(b);
  return at === undefined ? b.toString('utf8', META_FIXED) : b.toString('utf8', INLINE_FIXED, at);
}

export const EMPTY = Buffer.alloc(0);

/**
 * lmdb-js's reusable read buffer reports the value's size as an own `length` property over a larger memory area,
 * which not every Buffer method honours (`toString` reads the whole area): a plain view of exactly the value.
 */
export function exactView(b: Buffer | undefined): Buffer | undefined {
  return b && b.subarray(0, b.length);
}

/** Whether a stored header JSON has the pinned flag (a cheap test first: few headers mention it). */
export function isPinnedJson(headerJson: string): boolean {
  return headerJson.includes('"pinned"') && decodeHeader(headerJson).flags.pinned === true;
}

/** A Buffer over the same memory as `b` (no copy). */
function viewOf(b: Uint8Array, start = 0, end = b.length): Buffer {
  return Buffer.from(b.buffer, b.byteOffset + start, end - start);
}

/**
 * Value codec of the `NodeStore` handle that sweeps ranges: it hands out views of lmdb-js's read buffer (or
 * its memory map) instead of the copy its `binary` encoding makes of every value. A view is valid only until the
 * next read, so a sweep consumes each entry before it steps on. (Keys stay copies: lmdb-js's custom key codecs
 * skipped entries in a sweep, measured on 3.5.6.)
 */
export const VIEW_VALUES = {
  encode: (v: Buffer) => v,
  decode: (b: Uint8Array, size: number) => viewOf(b, 0, size),
  needsStableBuffer: false,
};

/** A storage key as a Map key (latin1 maps bytes to chars one to one). */
export function idOf(sk: Buffer): string {
  return sk.toString('latin1');
}
