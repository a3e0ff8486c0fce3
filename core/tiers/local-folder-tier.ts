import { randomBytes } from 'node:crypto';
import { constants as fsConstants } from 'node:fs';
import { access, mkdir, opendir, readdir, stat, unlink } from 'node:fs/promises';
import { join, resolve, sep } from 'node:path';
import { Readable } from 'node:stream';
import { NotFoundError, StrataError, TierUnavailableError, ValidationError } from '../errors.js';
import type { Entry, EntryHeader, WriteOutcome } from '../model/entry.js';
import { isExpired, isLive, isNewer } from '../model/entry.js';
import type { OrderedKeysPage, OrderedKeysQuery } from '../model/key-order.js';
import { encodeKey, NAMESPACE_PATTERN, validateNamespace } from '../model/keys.js';
import { LOCAL_ENTRY_SUFFIX, localEntrySegments, parseLocalEntrySegments, UPLOADS_FOLDER } from './storage-key.js';
import { mapLimit } from '../util/concurrency.js';
import { pageOfKeyListing } from './ordered-from-listing.js';
import type {
  CreatesIfAbsent,
  KeyOrdering,
  NewUpload,
  PresignedDownload,
  PresignedUrl,
  Presigning,
  PutOptions,
  ScanOptions,
  KeyPage,
  ScanPage,
  Scanning,
  Tier,
  TierName,
  TierStats,
  UploadClaim,
  UploadRecord,
} from './tier.js';
import { LocalUploadParts } from './local-uploads.js';
import { LocalFolderUploads } from './local-folder-uploads.js';
import type { StoredUpload, UploadRecords } from './upload-record.js';
import { EntryFiles, isMissing, readFully, TEMP_PREFIX, trailer } from './local-entry-files.js';
export { StagedUploadExistsError } from './local-entry-files.js';
import { BlobTokens, type BlobTokenClaims } from './local-blob-tokens.js';
export type { BlobTokenClaims } from './local-blob-tokens.js';
import type { CompletedPart, MultipartPresigning, PartUrl } from './multipart.js';

export interface LocalFolderTierOptions {
  /** @default 'cold' */
  name?: TierName;
  /** Root directory (created on first write). */
  dir: string;
  /** Base URL of the local server that serves `/local-blobs/<token>`. @default 'http://localhost:8080' */
  publicBaseUrl?: string;
  /** HMAC key for blob tokens. @default random per process (tokens die with the process) */
  signingSecret?: string;
  /** fsync files and directories on every write (crash durability). @default true */
  fsync?: boolean;
  /** Clock, for tests. */
  now?: () => number;
}

/** A live value to stream to a client. Consume or destroy `body` (it holds an open file). */
export interface BlobRead {
  header: EntryHeader;
  size: number;
  body: Readable;
  /** The bytes `body` holds when a range was asked for and applies (else the whole value). */
  range?: { start: number; end: number };
}

/** Entry file = value bytes, then header JSON, then a trailer: u32 BE header length + magic. */
const MAX_PRESIGN_SECONDS = 7 * 24 * 3600;
/**
 * Per-file write locks of every instance in this process, by absolute path. Per instance, two instances over one
 * folder (two coordinators) interleaved their read-compare-rename of a key, and the older of two concurrent versions
 * could be renamed over the newer one after both were acknowledged.
 */
const FILE_LOCKS = new Map<string, Promise<void>>();
const BATCH_CONCURRENCY = 16;

/**
 * The cold tier for the embedded local run: one file per entry under `dir`.
 *
 * Layout: `<dir>/<ns>/<shard>/<base32(key) in ≤200-char segments>.e` (see storage-key.ts: base32 because a
 * case-insensitive file system would alias base64url names, segments because a 512-byte key is longer than
 * NAME_MAX). Each file holds the value followed by the header and a trailer, so one rename publishes value
 * and header together. Writes go to a temp file in the same directory, are fsynced and renamed over the
 * entry: readers see the old or the new file, never a torn one. A crash can leave `.tmp-*` files behind;
 * readers ignore them and {@link LocalFolderTier.sweep} removes them.
 *
 * Versioned writes to a key are serialised by a per-file mutex shared by every instance in this process (two
 * coordinators over one folder, as tests and benchmarks run them, take turns like two writers through one
 * instance). Two processes must not share a directory: nothing serialises their writes.
 */
export class LocalFolderTier
  implements Tier, Presigning, MultipartPresigning, UploadRecords, Scanning, KeyOrdering, CreatesIfAbsent
{
  readonly name: TierName;
  readonly kind = 'local-folder';
  readonly createsIfAbsent = true;
  readonly dir: string;
  private readonly publicBaseUrl: string;
  private readonly tokens: BlobTokens;
  private readonly fsync: boolean;
  private readonly now: () => number;
  /** This instance's writes in progress (what close() waits for). */
  private readonly writing = new Set<Promise<void>>();
  private readonly parts: LocalUploadParts;
  /** Entry files and atomic writes (local-entry-files.ts). */
  private readonly files: EntryFiles;
  /** Presigned uploads and their commits (local-folder-uploads.ts). */
  private readonly uploads: LocalFolderUploads;

  constructor(opts: LocalFolderTierOptions) {
    if (!opts.dir) throw new ValidationError('dir', 'LocalFolderTier needs a directory');
    this.name = opts.name ?? 'cold';
    this.dir = resolve(opts.dir);
    this.publicBaseUrl = (opts.publicBaseUrl ?? 'http://localhost:8080').replace(/\/+$/, '');
    this.fsync = opts.fsync ?? true;
    this.now = opts.now ?? Date.now;
    this.tokens = new BlobTokens(opts.signingSecret ? Buffer.from(opts.signingSecret, 'utf8') : randomBytes(32), this.now);
    this.parts = new LocalUploadParts(join(this.dir, UPLOADS_FOLDER), this.fsync);
    this.files = new EntryFiles({ fsync: this.fsync, unavailable: (e) => this.unavailable(e) });
    this.uploads = new LocalFolderUploads({
      name: this.name,
      dir: this.dir,
      publicBaseUrl: this.publicBaseUrl,
      fsync: this.fsync,
      files: this.files,
      parts: this.parts,
      tokens: this.tokens,
      now: this.now,
      entryPath: (ns, key) => this.entryPath(ns, key),
      withLock: (id, fn) => this.withLock(id, fn),
      unavailable: (e) => this.unavailable(e),
    });
  }

  // ---- reads ----------------------------------------------------------------------------------------------

  async get(ns: string, key: string): Promise<Entry | undefined> {
    const file = await this.files.open(this.entryPath(ns, key));
    if (!file) return undefined;
    try {
      if (isExpired(file.header, this.now())) return undefined;
      const value = Buffer.alloc(file.valueLength);
      await readFully(file.fh, value, 0);
      return { header: file.header, value };
    } catch (e) {
      throw this.unavailable(e);
    } finally {
      await file.fh.close().catch(() => {});
    }
  }

  async head(ns: string, key: string): Promise<EntryHeader | undefined> {
    const h = await this.files.readHeader(this.entryPath(ns, key));
    return h && !isExpired(h, this.now()) ? h : undefined;
  }

  async has(ns: string, key: string): Promise<boolean> {
    const h = await this.head(ns, key);
    return !!h && isLive(h, this.now());
  }

  // ---- writes ---------------------------------------------------------------------------------------------

  async put(ns: string, key: string, entry: Entry, opts?: PutOptions): Promise<WriteOutcome> {
    const path = this.entryPath(ns, key);
    const header: EntryHeader = {
      ...entry.header,
      size: entry.value.length,
      tags: [...entry.header.tags],
      flags: { ...entry.header.flags },
    };
    return this.withLock(path, async () => {
      const cur = await this.files.readHeader(path);
      if (cur && !isNewer(header.version, cur, this.now())) return { applied: false, current: cur.version };
      if (cur && opts?.ifAbsent && !isExpired(cur, this.now())) return { applied: false, current: cur.version };
      await this.files.writeAtomic(path, [entry.value, trailer(header)]);
      return { applied: true, current: header.version };
    });
  }

  async delete(ns: string, key: string, version?: number): Promise<boolean> {
    const path = this.entryPath(ns, key);
    return this.withLock(path, async () => {
      const cur = await this.files.readHeader(path);
      if (!cur) return false;
      if (version !== undefined && cur.version !== version) return false;
      await this.files.unlinkQuiet(path);
      return !isExpired(cur, this.now()); // an expired entry counted as absent already (removed all the same)
    });
  }

  async getMany(ns: string, keys: string[]): Promise<(Entry | undefined)[]> {
    return mapLimit(keys, BATCH_CONCURRENCY, (k) => this.get(ns, k));
  }

  async putMany(ns: string, items: { key: string; entry: Entry }[]): Promise<WriteOutcome[]> {
    return mapLimit(items, BATCH_CONCURRENCY, (i) => this.put(ns, i.key, i.entry));
  }

  async deleteMany(ns: string, keys: string[]): Promise<boolean[]> {
    return mapLimit(keys, BATCH_CONCURRENCY, (k) => this.delete(ns, k));
  }

  // ---- enumeration ----------------------------------------------------------------------------------------

  /**
   * Entries of `ns` whose key starts with `opts.prefix`, in path order (`<shard>/<segments>`), `limit` per page.
   * The cursor is the relative path of the last file examined. File names are base32 of the key cut into
   * segments, so a key prefix is not a path prefix: each shard directory is listed and filtered (a shard is read
   * whole per page; fine for the embedded tier).
   */
  /** The namespace folders under the tier's directory, sorted (staged uploads and temp files are not namespaces). */
  async namespaces(): Promise<string[]> {
    try {
      return (await readdir(this.dir, { withFileTypes: true }))
        .filter((d) => d.isDirectory() && NAMESPACE_PATTERN.test(d.name))
        .map((d) => d.name)
        .sort();
    } catch (e) {
      if (isMissing(e)) return [];
      throw this.unavailable(e);
    }
  }

  async scan(ns: string, opts: ScanOptions): Promise<ScanPage> {
    const items: ScanPage['items'] = [];
    const cursor = await this.walk(ns, opts, async (key, path) => {
      const h = await this.files.readHeader(path);
      if (h && !isExpired(h, this.now())) items.push({ key, header: h });
      return items.length;
    });
    return { items, cursor };
  }

  /** The scan's walk, without its header read per entry. */
  async keys(ns: string, opts: ScanOptions): Promise<KeyPage> {
    const keys: string[] = [];
    const cursor = await this.walk(ns, opts, async (key) => keys.push(key));
    return { keys, cursor };
  }

  /** Sorted at each page from the walk of {@link keys} (ordered-from-listing.ts: O(n log n) over the namespace). */
  async listOrdered(ns: string, q: OrderedKeysQuery): Promise<OrderedKeysPage> {
    return pageOfKeyListing((opts) => this.keys(ns, opts), q);
  }

  /**
   * Walks the entry files of `ns` in order after `opts.cursor`, handing each wanted one (prefix, match) to `take`,
   * which answers how many the page holds; returns the page's cursor once that reaches `opts.limit` (null at the end).
   */
  private async walk(
    ns: string,
    opts: ScanOptions,
    take: (key: string, path: string) => Promise<number>,
  ): Promise<string | null> {
    validateNamespace(ns);
    const root = join(this.dir, ns);
    const prefix = opts.prefix ?? '';
    const after = opts.cursor ?? '';
    let shards: string[];
    try {
      shards = (await readdir(root, { withFileTypes: true }))
        .filter((d) => d.isDirectory() && /^[0-9a-f]{2}$/.test(d.name))
        .map((d) => d.name)
        .sort();
    } catch (e) {
      if (isMissing(e)) return null;
      throw this.unavailable(e);
    }
    let held = 0;
    let last: string | undefined;
    for (const shard of shards) {
      if (shard < after.slice(0, 2)) continue;
      let files: string[];
      try {
        files = (await readdir(join(root, shard), { recursive: true }))
          .map((f) => f.split(sep).join('/'))
          .filter((f) => f.endsWith(LOCAL_ENTRY_SUFFIX) && !f.split('/').some((seg) => seg.startsWith('.')))
          .sort();
      } catch (e) {
        if (isMissing(e)) continue;
        throw this.unavailable(e);
      }
      for (const f of files) {
        const rel = `${shard}/${f}`;
        if (rel <= after) continue;
        if (held >= opts.limit) return last ?? null;
        last = rel;
        const ref = parseLocalEntrySegments([ns, shard, ...f.split('/')]);
        if (!ref || !ref.key.startsWith(prefix) || (opts.match && !opts.match(ref.key))) continue;
        held = await take(ref.key, join(root, shard, ...f.split('/')));
      }
    }
    return null;
  }

  // ---- presigning (served by the local HTTP server) -----------------------------------------------------

  /**
   * The token names the version it was made for (`v`): the local server answers 412 when the key holds another
   * one by then (404 when none), as S3 does for the `If-Match` the S3 tier signs into its URLs.
   */
  async presignDownload(ns: string, key: string, expiresInSec: number): Promise<PresignedDownload> {
    const path = this.entryPath(ns, key);
    const now = this.now();
    const h = await this.files.readHeader(path);
    if (!h || !isLive(h, now)) throw new NotFoundError(`key not found in tier '${this.name}'`, { ns, key });
    const seconds = presignSeconds(expiresInSec, h.expiresAt, now);
    const exp = now + seconds * 1000;
    const token = this.tokens.sign({ op: 'get', path: `${ns}/${encodeKey(key)}`, exp, v: h.version });
    return { url: `${this.publicBaseUrl}/local-blobs/${token}`, method: 'GET', headers: {}, expiresAt: exp, header: h };
  }

  /** Writes the upload's record (`_uploads/<id>.json`), then signs a PUT token for its staging file (local-folder-uploads.ts). */
  presignUpload(upload: NewUpload, expiresInSec: number): Promise<PresignedUrl> {
    return this.uploads.presignUpload(upload, expiresInSec);
  }

  claimUpload(uploadId: string, accept: (r: UploadRecord) => boolean): Promise<UploadClaim | undefined> {
    return this.uploads.claimUpload(uploadId, accept);
  }

  releaseUpload(claim: UploadClaim): Promise<void> {
    return this.uploads.releaseUpload(claim);
  }

  /** The staged size and the upload's record, for asynchronous completions (upload-record.ts UploadRecords). */
  stagedBytes(uploadId: string): Promise<number | undefined> {
    return this.uploads.stagedBytes(uploadId);
  }

  readUploadRecord(uploadId: string): Promise<StoredUpload | undefined> {
    return this.uploads.readUploadRecord(uploadId);
  }

  changeUploadRecord(uploadId: string, change: (u: StoredUpload) => StoredUpload | undefined): Promise<StoredUpload | undefined> {
    return this.uploads.changeUploadRecord(uploadId, change);
  }

  /** For the local server: the claims of a `/local-blobs/<token>` token, or null (see local-blob-tokens.ts). */
  verifyBlobToken(token: string): BlobTokenClaims | null {
    return this.tokens.verify(token);
  }

  /**
   * For the local server: the live value of (ns, key) as a stream over an open file (a later overwrite does not affect
   * it); `range` picks the bytes to stream once the size is known (api/ranges.ts; it may throw, e.g. a 416).
   */
  async readBlob(
    ns: string,
    key: string,
    range?: (size: number) => { start: number; end: number } | undefined,
  ): Promise<BlobRead | undefined> {
    const file = await this.files.open(this.entryPath(ns, key));
    if (!file) return undefined;
    let slice: { start: number; end: number } | undefined;
    try {
      if (!isLive(file.header, this.now())) return void (await file.fh.close().catch(() => {}));
      slice = range?.(file.valueLength);
    } catch (e) {
      await file.fh.close().catch(() => {});
      throw e;
    }
    if (file.valueLength === 0) {
      await file.fh.close().catch(() => {});
      return { header: file.header, size: 0, body: Readable.from([]) };
    }
    const { start, end } = slice ?? { start: 0, end: file.valueLength - 1 };
    const body = file.fh.createReadStream({ start, end, autoClose: true });
    return { header: file.header, size: file.valueLength, body, ...(slice ? { range: slice } : {}) };
  }

  /**
   * For the local server: stores the bytes of a presigned upload, once (StagedUploadExistsError when something is
   * already staged). Throws PAYLOAD_TOO_LARGE past `maxBytes`.
   */
  writeStagedUpload(
    uploadId: string,
    body: Buffer | AsyncIterable<Uint8Array>,
    opts: { maxBytes?: number } = {},
  ): Promise<{ size: number }> {
    return this.uploads.writeStagedUpload(uploadId, body, opts);
  }

  commitUpload(
    uploadId: string,
    ns: string,
    key: string,
    header: Omit<EntryHeader, 'size' | 'hash'>,
  ): Promise<WriteOutcome & { size: number }> {
    return this.uploads.commitUpload(uploadId, ns, key, header);
  }

  // ---- multipart uploads (tiers/multipart.ts; local-folder-uploads.ts, the part files: local-uploads.ts) ------

  createMultipartUpload(upload: NewUpload, expiresInSec: number): Promise<{ expiresAt: number }> {
    return this.uploads.createMultipartUpload(upload, expiresInSec);
  }

  presignParts(
    uploadId: string,
    partNumbers: readonly number[],
    accept: (r: UploadRecord) => boolean,
    expiresInSec: number,
  ): Promise<PartUrl[] | undefined> {
    return this.uploads.presignParts(uploadId, partNumbers, accept, expiresInSec);
  }

  /** For the local server: stores one part's bytes (undefined: no such open multipart upload). */
  writeUploadPart(
    uploadId: string,
    partNumber: number,
    body: AsyncIterable<Uint8Array>,
    opts: { maxBytes: number },
  ): Promise<{ etag: string; size: number } | undefined> {
    return this.uploads.writeUploadPart(uploadId, partNumber, body, opts);
  }

  completeParts(claim: UploadClaim, parts: readonly CompletedPart[]): Promise<void> {
    return this.uploads.completeParts(claim, parts);
  }

  abortUpload(claim: UploadClaim): Promise<void> {
    return this.uploads.abortUpload(claim);
  }

  // ---- service --------------------------------------------------------------------------------------------

  /** Walks the directory (entries and bytes on disk, tombstones included; temp files and staged uploads excluded). */
  async stats(): Promise<TierStats> {
    let entries = 0;
    let bytes = 0;
    try {
      await walk(this.dir, async (path, name, depth) => {
        // Only namespace folders hold entries (not _uploads, nor the local run's _warm: storage-key.ts).
        if (depth === 0 && !NAMESPACE_PATTERN.test(name)) return false;
        if (name.startsWith('.')) return false;
        if (name.endsWith('.e')) {
          try {
            bytes += (await stat(path)).size;
            entries++;
          } catch {
            /* removed meanwhile */
          }
        }
        return true;
      });
    } catch (e) {
      if (!isMissing(e)) throw this.unavailable(e);
    }
    return { name: this.name, kind: this.kind, dir: this.dir, entries, bytes };
  }

  async ping(): Promise<void> {
    try {
      await mkdir(this.dir, { recursive: true });
      await access(this.dir, fsConstants.R_OK | fsConstants.W_OK);
    } catch (e) {
      throw this.unavailable(e);
    }
  }

  async close(): Promise<void> {
    await Promise.all([...this.writing]);
  }

  /**
   * Removes crash leftovers: temp files older than `tempMaxAgeMs` (default 1 h), and the files of `_uploads/` (staged
   * bytes, upload records, completed-markers) older than `uploadMaxAgeMs` (default 24 h: longer than an upload URL
   * lives, MAX_UPLOAD_URL_SECONDS, so a marker outlives its URL). Returns how many files it removed.
   */
  async sweep(opts: { tempMaxAgeMs?: number; uploadMaxAgeMs?: number } = {}): Promise<number> {
    const now = this.now();
    const tempBefore = now - (opts.tempMaxAgeMs ?? 3_600_000);
    const uploadBefore = now - (opts.uploadMaxAgeMs ?? 86_400_000);
    let removed = 0;
    const removeIfOlder = async (path: string, before: number): Promise<void> => {
      try {
        const s = await stat(path);
        if (s.isFile() && s.mtimeMs < before) {
          await unlink(path);
          removed++;
        }
      } catch {
        /* gone */
      }
    };
    try {
      await walk(this.dir, async (path, name, depth, parentName) => {
        if (name.startsWith(TEMP_PREFIX)) {
          await removeIfOlder(path, tempBefore);
          return false;
        }
        // Other folders of the data folder are not the tier's (the local run's cache nodes live in _warm).
        if (depth === 0 && name !== UPLOADS_FOLDER && !NAMESPACE_PATTERN.test(name)) return false;
        if (depth === 1 && parentName === UPLOADS_FOLDER) {
          await removeIfOlder(path, uploadBefore);
          return false;
        }
        return true;
      });
    } catch (e) {
      if (!isMissing(e)) throw this.unavailable(e);
    }
    return removed;
  }

  // ---- internals ------------------------------------------------------------------------------------------

  /** Absolute path of an entry file; always inside `dir` (ns is validated, the key encoded). */
  entryPath(ns: string, key: string): string {
    const path = join(this.dir, ...localEntrySegments(ns, key));
    if (!path.startsWith(this.dir.endsWith(sep) ? this.dir : this.dir + sep))
      throw new ValidationError('key', 'key maps outside the tier directory');
    return path;
  }

  /** Runs `fn` once every earlier write to the file `id` (an absolute path) in this process is done. */
  private async withLock<T>(id: string, fn: () => Promise<T>): Promise<T> {
    const prev = FILE_LOCKS.get(id) ?? Promise.resolve();
    let release!: () => void;
    const mine = new Promise<void>((r) => (release = r));
    const tail = prev.then(() => mine);
    FILE_LOCKS.set(id, tail);
    this.writing.add(mine);
    await prev;
    try {
      return await fn();
    } finally {
      release();
      this.writing.delete(mine);
      if (FILE_LOCKS.get(id) === tail) FILE_LOCKS.delete(id);
    }
  }

  private unavailable(e: unknown): Error {
    if (e instanceof StrataError) return e;
    return new TierUnavailableError(this.name, e);
  }
}

/** Whole seconds in 1..7 days, never past the entry's expiry. */
function presignSeconds(requested: number, expiresAt: number | null, now: number): number {
  let s = Number.isFinite(requested) ? Math.floor(requested) : 900;
  if (expiresAt !== null) s = Math.min(s, Math.floor((expiresAt - now) / 1000));
  return Math.max(1, Math.min(MAX_PRESIGN_SECONDS, s));
}

/**
 * Depth-first walk; `visit` returns whether to descend into a directory. `depth` is 0 for children of `root`;
 * `parentName` is the name of the containing directory.
 */
async function walk(
  root: string,
  visit: (path: string, name: string, depth: number, parentName: string) => Promise<boolean>,
  depth = 0,
  parentName = '',
): Promise<void> {
  let dir;
  try {
    dir = await opendir(root);
  } catch (e) {
    if (depth > 0 && isMissing(e)) return;
    throw e;
  }
  for await (const d of dir) {
    const path = join(root, d.name);
    const descend = await visit(path, d.name, depth, parentName);
    if (descend && d.isDirectory()) await walk(path, visit, depth + 1, d.name);
  }
}
