/**
 * What travels between cache-node clients (WarmTier, the migration steps) and the cachenode daemon: header
 * names, the node's storage key, and the binary record stream used by batch, export and import.
 *
 * A record is `[u32 total length][u8 type][payload]` (big-endian), `total` counting type and payload:
 * - ENTRY: `[u16 ns bytes][u16 key bytes][u32 header bytes] ns key headerJson value` (the value runs to the end);
 * - ABSENT: empty payload (a batch get's miss, kept in request order);
 * - TRAILER: JSON (an export's end: next cursor and counts; an import's or a batch's summary);
 * - ACCESS: `[f64 lastAccessMs][u32 count]`, the access facts of the entry record that follows it. Only an export
 *   asked for them (`access=1`) carries them, so a client that never asks (every one before them) never meets the
 *   type, and a node that does not know them ignores the flag: its entries then simply have no facts (unknown).
 *
 * The protocol grows this way, by a request flag a node either honours or ignores and record types only sent when
 * asked for: older and newer nodes and clients keep talking to each other during a rolling upgrade.
 */
import { decodeHeader, type Entry, type EntryHeader } from '../model/entry.js';
import type { KeyBound, OrderedKeysQuery } from '../model/key-order.js';
import { validateNamespace } from '../model/keys.js';
import { HASH_BYTES, ringHashBytes } from '../ring/hash.js';

export const SECRET_HEADER = 'x-strata-secret';
/** The ring version the caller routed with. */
export const RING_HEADER = 'x-strata-ring';
/** An entry's header (ASCII JSON) on single-key requests and responses. */
export const ENTRY_HEADER = 'x-strata-entry';
/** Set on a shadow write to a pending target (counted apart; such a write is accepted only for pending ranges). */
export const SHADOW_HEADER = 'x-strata-shadow';
export const RECORDS_CONTENT_TYPE = 'application/vnd.strata.records';

export const RECORD_ENTRY = 1;
export const RECORD_ABSENT = 2;
export const RECORD_TRAILER = 3;
export const RECORD_ACCESS = 4;

const PREFIX_BYTES = 5; // u32 length + u8 type
const ENTRY_FIXED = 8; // u16 + u16 + u32
const ACCESS_FIXED = 12; // f64 + u32
/** Bytes of an access record. */
export const ACCESS_RECORD_BYTES = PREFIX_BYTES + ACCESS_FIXED;

/** JSON with every non-ASCII character escaped (\uXXXX), so it is a valid HTTP header value. */
export function asciiJson(v: unknown): string {
  return JSON.stringify(v).replace(/[\u007f-\uffff]/g, (c) => '\\u' + c.charCodeAt(0).toString(16).padStart(4, '0'));
}

export function encodeEntryHeader(h: EntryHeader): string {
  return asciiJson(h);
}

/** A JSON text made ASCII-only (non-ASCII characters, which can only occur inside strings, as \uXXXX escapes). */
export function asciiJsonText(json: string): string {
  return json.replace(/[\u007f-\uffff]/g, (c) => '\\u' + c.charCodeAt(0).toString(16).padStart(4, '0'));
}

export function decodeEntryHeader(s: string): EntryHeader {
  return decodeHeader(s);
}

// ------------------------------------------------------------------ storage keys

/**
 * The node's storage key: 8-byte ring position, then ns, NUL, key (UTF-8). Ordered by position first, so a
 * ring range is one contiguous key range (migration and eviction are range sweeps). Namespaces and keys never
 * contain NUL.
 */
export function storeKey(ns: string, key: string): Buffer {
  return storeKeyAt(ringHashBytes(ns, key), ns, key);
}

/** {@link storeKey} from an already computed ring position (8 bytes). */
export function storeKeyAt(pos: Buffer, ns: string, key: string): Buffer {
  const nsBytes = Buffer.byteLength(ns);
  const out = Buffer.allocUnsafe(HASH_BYTES + nsBytes + 1 + Buffer.byteLength(key));
  pos.copy(out, 0);
  out.write(ns, HASH_BYTES, 'utf8');
  out[HASH_BYTES + nsBytes] = 0;
  out.write(key, HASH_BYTES + nsBytes + 1, 'utf8');
  return out;
}

export function parseStoreKey(k: Uint8Array): { position: string; ns: string; key: string } {
  const b = Buffer.from(k.buffer, k.byteOffset, k.byteLength);
  const sep = b.indexOf(0, HASH_BYTES);
  if (sep < 0) throw new Error('corrupt storage key');
  return {
    position: b.toString('hex', 0, HASH_BYTES),
    ns: b.toString('utf8', HASH_BYTES, sep),
    key: b.toString('utf8', sep + 1),
  };
}

/** The smallest storage key after `k` (for exclusive cursors). */
export function keyAfter(k: Uint8Array): Buffer {
  const out = Buffer.alloc(k.byteLength + 1);
  out.set(k, 0);
  return out;
}

/** The first storage key at ring position `position` (16 hex digits). */
export function positionKey(position: string): Buffer {
  return Buffer.from(position, 'hex');
}

// ------------------------------------------------------------------ ordered key listing

/**
 * The route that lists the keys a node holds in a namespace, in key order (model/key-order.ts), whatever ring range
 * they are in: `GET` with the query of {@link orderedKeysParams}, answered `{ keys, more }` (an OrderedKeysPage).
 */
export const ORDERED_KEYS_PATH = '/v1/keys-ordered';
/** Most keys a node lists per request: a larger `limit` is answered with this many (and `more`, when there are). */
export const ORDERED_KEYS_MAX_LIMIT = 1000;

/**
 * The query string of a listing request: `ns`, `limit`, and when set `prefix`, `from` with `fromInclusive`
 * (`1` or `0`) and `to` with `toInclusive`. Keys travel as text (URL-encoded UTF-8), so characters above U+FFFF
 * arrive whole.
 */
export function orderedKeysParams(ns: string, q: OrderedKeysQuery): URLSearchParams {
  const p = new URLSearchParams({ ns, limit: String(q.limit) });
  if (q.prefix !== undefined) p.set('prefix', q.prefix);
  for (const [name, b] of [
    ['from', q.from],
    ['to', q.to],
  ] as const) {
    if (!b) continue;
    p.set(name, b.key);
    p.set(`${name}Inclusive`, b.inclusive ? '1' : '0');
  }
  return p;
}

/** Reads a listing request's query (see {@link orderedKeysParams}); the limit is capped at {@link ORDERED_KEYS_MAX_LIMIT}. */
export function parseOrderedKeysParams(p: URLSearchParams): { ns: string; query: OrderedKeysQuery } {
  const ns = validateNamespace(p.get('ns'));
  const limit = Number(p.get('limit'));
  if (!Number.isSafeInteger(limit) || limit < 1) throw new Error('limit must be a positive integer');
  const bound = (name: 'from' | 'to'): KeyBound | undefined => {
    const key = p.get(name);
    if (key === null) return undefined;
    const inclusive = p.get(`${name}Inclusive`) ?? '1';
    if (inclusive !== '1' && inclusive !== '0') throw new Error(`${name}Inclusive must be 1 or 0`);
    return { key, inclusive: inclusive === '1' };
  };
  const prefix = p.get('prefix');
  const from = bound('from');
  const to = bound('to');
  return {
    ns,
    query: {
      limit: Math.min(limit, ORDERED_KEYS_MAX_LIMIT),
      ...(prefix !== null ? { prefix } : {}),
      ...(from ? { from } : {}),
      ...(to ? { to } : {}),
    },
  };
}

// ------------------------------------------------------------------ records

/** What a cache node knows of an entry's reads (see cachenode/src/store.ts `accessOf`). */
export interface EntryAccess {
  /** Its last read on that node, or when it arrived there or the node started, whichever is later (epoch ms). */
  lastAccessMs: number;
  /** Reads on that node since it arrived or the node started. */
  count: number;
}

export interface EntryRecord {
  type: typeof RECORD_ENTRY;
  ns: string;
  key: string;
  entry: Entry;
  /** The header as it travelled (JSON). */
  headerJson: string;
  /** The access record that came before it, if any (an export asked for access facts). */
  access?: EntryAccess;
}
export interface AccessRecord {
  type: typeof RECORD_ACCESS;
  access: EntryAccess;
}
export interface AbsentRecord {
  type: typeof RECORD_ABSENT;
}
export interface TrailerRecord {
  type: typeof RECORD_TRAILER;
  data: Record<string, unknown>;
}
/** An entry record left encoded (see {@link RecordReader} `raw`): forwarded as is, e.g. from an export to an import. */
export interface RawEntryRecord {
  type: typeof RECORD_ENTRY;
  ns: string;
  key: string;
  raw: Buffer;
}
export type WireRecord = EntryRecord | AbsentRecord | TrailerRecord | AccessRecord;

/** Encodes an entry record. `headerJson` may be passed when the caller already has it (stored form). */
export function encodeEntryRecord(
  ns: string,
  key: string,
  entry: Pick<Entry, 'value'> & { header?: EntryHeader },
  headerJson?: string,
): Buffer {
  return encodeEntryRecordHead(ns, key, headerJson ?? JSON.stringify(entry.header), entry.value);
}

/**
 * An entry record as two parts, everything before the value and the value itself, so a writer can send both
 * without copying the value (writev, or one concatenation into the request body).
 */
export function encodeEntryRecordParts(ns: string, key: string, headerJson: string, value: Buffer): [Buffer, Buffer] {
  return [encodeEntryRecordHead(ns, key, headerJson, value, false), value];
}

/**
 * Writes an entry record's length prefix, type and field lengths into `out` at `at`; answers where its ns bytes
 * go (the one place that knows the layout's fixed part).
 */
function writeEntryRecordFixed(
  out: Buffer,
  at: number,
  nsBytes: number,
  keyBytes: number,
  headerBytes: number,
  valueBytes: number,
): number {
  out.writeUInt32BE(1 + ENTRY_FIXED + nsBytes + keyBytes + headerBytes + valueBytes, at);
  out[at + 4] = RECORD_ENTRY;
  out.writeUInt16BE(nsBytes, at + 5);
  out.writeUInt16BE(keyBytes, at + 7);
  out.writeUInt32BE(headerBytes, at + 9);
  return at + PREFIX_BYTES + ENTRY_FIXED;
}

function encodeEntryRecordHead(ns: string, key: string, h: string, value: Buffer, withValue = true): Buffer {
  const nsBytes = Buffer.byteLength(ns);
  const keyBytes = Buffer.byteLength(key);
  const hBytes = Buffer.byteLength(h);
  const out = Buffer.allocUnsafe(PREFIX_BYTES + ENTRY_FIXED + nsBytes + keyBytes + hBytes + (withValue ? value.length : 0));
  let at = writeEntryRecordFixed(out, 0, nsBytes, keyBytes, hBytes, value.length);
  at += out.write(ns, at, 'utf8');
  at += out.write(key, at, 'utf8');
  at += out.write(h, at, 'utf8');
  if (withValue) out.set(value, at);
  return out;
}

/**
 * Bytes of the entry record of a stored entry (see {@link writeStoredEntryRecord}): `sk` its storage key,
 * `headerJson` its header JSON as UTF-8 bytes.
 */
export function storedEntryRecordBytes(sk: Uint8Array, headerJson: Uint8Array, value: Uint8Array): number {
  return PREFIX_BYTES + ENTRY_FIXED + sk.length - HASH_BYTES - 1 + headerJson.length + value.length;
}

/**
 * Writes the entry record of a stored entry into `out` at `at`, ns and key taken from its storage key as bytes
 * (an export copies each stored entry once, with no strings in between). Answers where the record ends.
 */
export function writeStoredEntryRecord(out: Buffer, at: number, sk: Buffer, headerJson: Uint8Array, value: Uint8Array): number {
  const sep = sk.indexOf(0, HASH_BYTES);
  if (sep < 0) throw new Error('corrupt storage key');
  const nsBytes = sep - HASH_BYTES;
  const keyBytes = sk.length - sep - 1;
  let p = writeEntryRecordFixed(out, at, nsBytes, keyBytes, headerJson.length, value.length);
  out.set(sk.subarray(HASH_BYTES, sep), p);
  p += nsBytes;
  out.set(sk.subarray(sep + 1), p);
  p += keyBytes;
  out.set(headerJson, p);
  p += headerJson.length;
  out.set(value, p);
  return p + value.length;
}

/** Writes an access record into `out` at `at` (room for {@link ACCESS_RECORD_BYTES}); answers where it ends. */
export function writeAccessRecord(out: Buffer, at: number, access: EntryAccess): number {
  out.writeUInt32BE(1 + ACCESS_FIXED, at);
  out[at + 4] = RECORD_ACCESS;
  out.writeDoubleBE(access.lastAccessMs, at + PREFIX_BYTES);
  out.writeUInt32BE(Math.min(access.count, 0xffffffff), at + PREFIX_BYTES + 8);
  return at + ACCESS_RECORD_BYTES;
}

export function encodeAccessRecord(access: EntryAccess): Buffer {
  const out = Buffer.allocUnsafe(ACCESS_RECORD_BYTES);
  writeAccessRecord(out, 0, access);
  return out;
}

const ABSENT = Buffer.from([0, 0, 0, 1, RECORD_ABSENT]);

export function encodeAbsentRecord(): Buffer {
  return ABSENT;
}

export function encodeTrailerRecord(data: Record<string, unknown>): Buffer {
  const json = Buffer.from(JSON.stringify(data), 'utf8');
  const out = Buffer.allocUnsafe(PREFIX_BYTES + json.length);
  out.writeUInt32BE(1 + json.length, 0);
  out[4] = RECORD_TRAILER;
  json.copy(out, PREFIX_BYTES);
  return out;
}

/** The ns and key of an encoded entry record, leaving its header and value encoded. */
export function peekEntryRecord(buf: Buffer): RawEntryRecord {
  const nsBytes = buf.readUInt16BE(5);
  const keyBytes = buf.readUInt16BE(7);
  const at = PREFIX_BYTES + ENTRY_FIXED;
  return {
    type: RECORD_ENTRY,
    ns: buf.toString('utf8', at, at + nsBytes),
    key: buf.toString('utf8', at + nsBytes, at + nsBytes + keyBytes),
    raw: buf,
  };
}

/** Decodes one whole record (`buf` = length prefix through the end of the payload). */
export function decodeRecord(buf: Buffer): WireRecord {
  const type = buf[4];
  if (type === RECORD_ABSENT) return { type };
  if (type === RECORD_TRAILER) return { type, data: JSON.parse(buf.toString('utf8', PREFIX_BYTES)) as Record<string, unknown> };
  if (type === RECORD_ACCESS) {
    if (buf.length < ACCESS_RECORD_BYTES) throw new Error('truncated access record');
    const access = { lastAccessMs: buf.readDoubleBE(PREFIX_BYTES), count: buf.readUInt32BE(PREFIX_BYTES + 8) };
    return { type, access };
  }
  if (type !== RECORD_ENTRY) throw new Error(`unknown record type ${type}`);
  const nsBytes = buf.readUInt16BE(5);
  const keyBytes = buf.readUInt16BE(7);
  const hBytes = buf.readUInt32BE(9);
  let at = PREFIX_BYTES + ENTRY_FIXED;
  const ns = buf.toString('utf8', at, (at += nsBytes));
  const key = buf.toString('utf8', at, (at += keyBytes));
  const headerJson = buf.toString('utf8', at, (at += hBytes));
  if (at > buf.length) throw new Error('truncated entry record');
  return { type, ns, key, entry: { header: decodeHeader(headerJson), value: buf.subarray(at) }, headerJson };
}

/**
 * Splits a byte stream into records, whatever the chunk boundaries. Large records are assembled once (no
 * repeated concatenation).
 */
export class RecordReader {
  private chunks: Buffer[] = [];
  private buffered = 0;
  /** Upper bound on one record (a defence against a corrupt length). */
  constructor(private readonly maxRecordBytes = 1024 * 1024 * 1024) {}

  push(chunk: Uint8Array): WireRecord[] {
    return this.pushRecords(chunk, false) as WireRecord[];
  }

  /** As {@link push}, but entry records stay encoded ({@link RawEntryRecord}). */
  pushRaw(chunk: Uint8Array): (RawEntryRecord | AbsentRecord | TrailerRecord | AccessRecord)[] {
    return this.pushRecords(chunk, true) as (RawEntryRecord | AbsentRecord | TrailerRecord | AccessRecord)[];
  }

  private pushRecords(chunk: Uint8Array, raw: boolean): (WireRecord | RawEntryRecord)[] {
    const b = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    if (b.length > 0) {
      this.chunks.push(b);
      this.buffered += b.length;
    }
    const out: (WireRecord | RawEntryRecord)[] = [];
    for (;;) {
      if (this.buffered < 4) break;
      const head = this.peek(4);
      const total = head.readUInt32BE(0);
      if (total < 1 || total > this.maxRecordBytes) throw new Error(`invalid record length ${total}`);
      if (this.buffered < 4 + total) break;
      const buf = this.take(4 + total);
      out.push(raw && buf[4] === RECORD_ENTRY ? peekEntryRecord(buf) : decodeRecord(buf));
    }
    return out;
  }

  /** Bytes left over that do not make a whole record. */
  get pending(): number {
    return this.buffered;
  }

  private peek(n: number): Buffer {
    if (this.chunks[0]!.length >= n) return this.chunks[0]!;
    return Buffer.concat(this.chunks, n);
  }

  private take(n: number): Buffer {
    const first = this.chunks[0]!;
    let out: Buffer;
    if (first.length >= n) {
      out = first.subarray(0, n);
      if (first.length === n) this.chunks.shift();
      else this.chunks[0] = first.subarray(n);
    } else {
      out = Buffer.allocUnsafe(n);
      let at = 0;
      while (at < n) {
        const c = this.chunks[0]!;
        const want = n - at;
        if (c.length <= want) {
          c.copy(out, at);
          at += c.length;
          this.chunks.shift();
        } else {
          c.copy(out, at, 0, want);
          this.chunks[0] = c.subarray(want);
          at += want;
        }
      }
    }
    this.buffered -= n;
    return out;
  }
}

/** Reads every record of a stream. */
export async function* readRecords(stream: AsyncIterable<Uint8Array>, maxRecordBytes?: number): AsyncGenerator<WireRecord> {
  const reader = new RecordReader(maxRecordBytes);
  for await (const chunk of stream) yield* reader.push(chunk);
  if (reader.pending > 0) throw new Error(`stream ended inside a record (${reader.pending} bytes left)`);
}

/** Reads every record of a stream, entry records left encoded. */
export async function* readRawRecords(
  stream: AsyncIterable<Uint8Array>,
  maxRecordBytes?: number,
): AsyncGenerator<RawEntryRecord | AbsentRecord | TrailerRecord | AccessRecord> {
  const reader = new RecordReader(maxRecordBytes);
  for await (const chunk of stream) yield* reader.pushRaw(chunk);
  if (reader.pending > 0) throw new Error(`stream ended inside a record (${reader.pending} bytes left)`);
}
