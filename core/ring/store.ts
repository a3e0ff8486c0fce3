import { createHash, randomUUID } from 'node:crypto';
import { mkdir, open as openFile, readFile, rename, rmdir, stat } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { GetObjectCommand, PutObjectCommand, S3Client, type S3ClientConfig } from '@aws-sdk/client-s3';
import { cloneRing, parseRingDocument, ringProblem, RingDocumentError, type RingDocument } from './document.js';

/**
 * A small compare-and-set document store: the ring document and migration sessions live in one. Each stored
 * document has an opaque `etag`; a write names the etag it read (or `null` = must not exist yet) and fails with
 * {@link CasConflictError} when someone else wrote in between. Implemented over S3 conditional writes
 * (If-Match / If-None-Match on PutObject) and in memory for tests.
 */
export interface CasStore {
  get(key: string): Promise<{ body: string; etag: string } | undefined>;
  /** Writes `body` if the stored etag is still `ifEtag` (null: only if absent). Returns the new etag. */
  put(key: string, body: string, ifEtag: string | null): Promise<string>;
  /** Releases what the store holds open (an SDK client it created). */
  close?(): void;
}

export class CasConflictError extends Error {
  constructor(readonly key: string) {
    super(`compare-and-set of '${key}' lost to a concurrent writer`);
    this.name = 'CasConflictError';
  }
}

/** The store could not be reached or answered with an error. */
export class CasStoreUnavailableError extends Error {
  constructor(key: string, cause: unknown) {
    super(`document store unavailable for '${key}': ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
    this.name = 'CasStoreUnavailableError';
  }
}

export class InMemoryCasStore implements CasStore {
  private readonly docs = new Map<string, { body: string; etag: string }>();
  /** Counts writes (tests). */
  writes = 0;

  async get(key: string): Promise<{ body: string; etag: string } | undefined> {
    const d = this.docs.get(key);
    return d ? { ...d } : undefined;
  }

  async put(key: string, body: string, ifEtag: string | null): Promise<string> {
    const cur = this.docs.get(key);
    if ((ifEtag === null && cur) || (ifEtag !== null && cur?.etag !== ifEtag)) throw new CasConflictError(key);
    const etag = randomUUID();
    this.docs.set(key, { body, etag });
    this.writes++;
    return etag;
  }
}

/**
 * CAS documents as files in a local folder (the local run, several processes on one machine). A write takes a
 * lock directory (mkdir is atomic), compares the current content's hash with the expected etag, writes a
 * temporary file and renames it into place (atomic), then drops the lock. A lock older than `staleLockMs`
 * (its holder died) is broken.
 */
export class FileCasStore implements CasStore {
  constructor(
    private readonly dir: string,
    private readonly staleLockMs = 10_000,
  ) {}

  private path(key: string): string {
    if (key.includes('..')) throw new Error(`invalid document key '${key}'`);
    return join(this.dir, key);
  }

  async get(key: string): Promise<{ body: string; etag: string } | undefined> {
    try {
      const body = await readFile(this.path(key), 'utf8');
      return { body, etag: etagOf(body) };
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw new CasStoreUnavailableError(key, e);
    }
  }

  async put(key: string, body: string, ifEtag: string | null): Promise<string> {
    const file = this.path(key);
    await mkdir(dirname(file), { recursive: true });
    const lock = `${file}.lock`;
    await this.lock(lock, key);
    try {
      const cur = await this.get(key);
      if ((ifEtag === null && cur) || (ifEtag !== null && cur?.etag !== ifEtag)) throw new CasConflictError(key);
      const tmp = `${file}.${randomUUID()}.tmp`;
      const fh = await openFile(tmp, 'w');
      try {
        await fh.writeFile(body, 'utf8');
        await fh.sync();
      } finally {
        await fh.close();
      }
      await rename(tmp, file);
      return etagOf(body);
    } finally {
      await rmdir(lock).catch(() => undefined);
    }
  }

  private async lock(lock: string, key: string): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      try {
        await mkdir(lock);
        return;
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw new CasStoreUnavailableError(key, e);
        const st = await stat(lock).catch(() => undefined);
        if (st && Date.now() - st.mtimeMs > this.staleLockMs) await rmdir(lock).catch(() => undefined);
        if (attempt > 2000) throw new CasStoreUnavailableError(key, new Error('lock held too long'));
        await new Promise((r) => setTimeout(r, 2 + Math.random() * 5));
      }
    }
  }
}

function etagOf(body: string): string {
  return createHash('sha256').update(body).digest('hex').slice(0, 32);
}

export interface S3CasStoreOptions {
  bucket: string;
  /** Prefix of every object ('strata/ring/' style; a trailing '/' is added). @default 'strata-ring' */
  prefix?: string;
  client?: S3Client;
  /** For a client made here (e.g. LocalStack's endpoint). */
  clientConfig?: S3ClientConfig;
}

/** CAS documents in S3: PutObject with If-Match (replace) or If-None-Match: * (create); 412/409 = lost. */
export class S3CasStore implements CasStore {
  private readonly client: S3Client;
  private readonly owned: boolean;
  private readonly bucket: string;
  private readonly prefix: string;

  constructor(opts: S3CasStoreOptions) {
    this.bucket = opts.bucket;
    this.prefix = (opts.prefix ?? 'strata-ring').replace(/\/+$/, '') + '/';
    this.owned = !opts.client;
    this.client = opts.client ?? new S3Client({ forcePathStyle: !!opts.clientConfig?.endpoint, ...opts.clientConfig });
  }

  async get(key: string): Promise<{ body: string; etag: string } | undefined> {
    try {
      const res = await this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: this.prefix + key }));
      const body = await res.Body!.transformToString('utf8');
      return { body, etag: res.ETag! };
    } catch (e) {
      if (isNoSuchKey(e)) return undefined;
      throw new CasStoreUnavailableError(key, e);
    }
  }

  async put(key: string, body: string, ifEtag: string | null): Promise<string> {
    try {
      const res = await this.client.send(
        new PutObjectCommand({
          Bucket: this.bucket,
          Key: this.prefix + key,
          Body: body,
          ContentType: 'application/json',
          ...(ifEtag === null ? { IfNoneMatch: '*' } : { IfMatch: ifEtag }),
        }),
      );
      return res.ETag!;
    } catch (e) {
      const status = (e as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
      const name = (e as { name?: string }).name;
      if (status === 412 || status === 409 || name === 'PreconditionFailed' || name === 'ConditionalRequestConflict')
        throw new CasConflictError(key);
      throw new CasStoreUnavailableError(key, e);
    }
  }

  close(): void {
    if (this.owned) this.client.destroy();
  }
}

function isNoSuchKey(e: unknown): boolean {
  const x = e as { name?: string; $metadata?: { httpStatusCode?: number } };
  return x.name === 'NoSuchKey' || x.$metadata?.httpStatusCode === 404;
}

// ------------------------------------------------------------------ the ring document in a CAS store

/** Thrown by an update function to stop without writing (its precondition no longer holds). */
export class RingPreconditionError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RingPreconditionError';
  }
}

export const RING_KEY = 'ring.json';
const MAX_CAS_ATTEMPTS = 16;

/**
 * The authoritative ring document. Every change is a read-modify-CAS loop: {@link update} re-runs the edit on
 * the freshest document after losing a race, so edits must be written as "make it so" on whatever they get
 * (and throw {@link RingPreconditionError} when that is no longer possible).
 */
export class RingStore {
  constructor(
    readonly cas: CasStore,
    private readonly key = RING_KEY,
  ) {}

  async load(): Promise<RingDocument | undefined> {
    const got = await this.cas.get(this.key);
    return got ? parseRingDocument(JSON.parse(got.body)) : undefined;
  }

  async loadWithEtag(): Promise<{ doc: RingDocument; etag: string } | undefined> {
    const got = await this.cas.get(this.key);
    return got ? { doc: parseRingDocument(JSON.parse(got.body)), etag: got.etag } : undefined;
  }

  /** Creates the first document (fails with CasConflictError if one exists). */
  async create(doc: RingDocument): Promise<RingDocument> {
    const checked = parseRingDocument(doc, { strict: true });
    await this.cas.put(this.key, JSON.stringify(checked), null);
    return checked;
  }

  /**
   * Applies `edit` to a draft of the current document and writes it as version + 1 by CAS, retrying on conflict.
   * `edit` receives the version the write will have (for range epochs). Returning false means "nothing to do":
   * no write, and the current document is returned.
   */
  async update(edit: (draft: RingDocument, nextVersion: number) => void | boolean): Promise<RingDocument> {
    for (let attempt = 0; ; attempt++) {
      const cur = await this.loadWithEtag();
      if (!cur) throw new RingDocumentError('there is no ring document yet (create one first)');
      const draft = cloneRing(cur.doc);
      const nextVersion = cur.doc.version + 1;
      if (edit(draft, nextVersion) === false) return cur.doc;
      draft.version = nextVersion;
      draft.updatedAt = new Date().toISOString();
      const problem = ringProblem(draft);
      if (problem) throw new RingDocumentError(`edit would make an invalid ring: ${problem}`);
      try {
        await this.cas.put(this.key, JSON.stringify(draft), cur.etag);
        return draft;
      } catch (e) {
        if (!(e instanceof CasConflictError) || attempt + 1 >= MAX_CAS_ATTEMPTS) throw e;
        await new Promise((r) => setTimeout(r, Math.random() * Math.min(200, 5 * 2 ** attempt)));
      }
    }
  }
}

/**
 * A JSON document per key with the same CAS discipline (migration sessions and plans).
 */
export class JsonDocStore<T> {
  constructor(
    readonly cas: CasStore,
    private readonly prefix: string,
  ) {}

  async get(id: string): Promise<T | undefined> {
    const got = await this.cas.get(this.prefix + id);
    return got ? (JSON.parse(got.body) as T) : undefined;
  }

  async create(id: string, doc: T): Promise<T> {
    await this.cas.put(this.prefix + id, JSON.stringify(doc), null);
    return doc;
  }

  /** Read-modify-CAS like {@link RingStore.update}; `edit` returns the new document (or undefined: no change). */
  async update(id: string, edit: (cur: T) => T | undefined): Promise<T> {
    for (let attempt = 0; ; attempt++) {
      const got = await this.cas.get(this.prefix + id);
      if (!got) throw new Error(`document '${this.prefix}${id}' does not exist`);
      const cur = JSON.parse(got.body) as T;
      const next = edit(structuredClone(cur));
      if (next === undefined) return cur;
      try {
        await this.cas.put(this.prefix + id, JSON.stringify(next), got.etag);
        return next;
      } catch (e) {
        if (!(e instanceof CasConflictError) || attempt + 1 >= MAX_CAS_ATTEMPTS) throw e;
        await new Promise((r) => setTimeout(r, Math.random() * Math.min(200, 5 * 2 ** attempt)));
      }
    }
  }
}

/** A CAS store from a URI: `file:<dir>` or `s3://<bucket>/<prefix>` (an S3 endpoint for LocalStack and the like). */
export function casStoreFromUri(uri: string, s3Endpoint?: string): CasStore {
  if (uri.startsWith('file:')) return new FileCasStore(uri.slice('file:'.length));
  const m = /^s3:\/\/([^/]+)\/?(.*)$/.exec(uri);
  if (m)
    return new S3CasStore({
      bucket: m[1]!,
      prefix: m[2] || 'strata-ring',
      ...(s3Endpoint ? { clientConfig: { endpoint: s3Endpoint } } : {}),
    });
  throw new Error(`a ring store must be file:<dir> or s3://<bucket>/<prefix> (got '${uri}')`);
}
