import { StrataError, TierUnavailableError } from '../errors.js';
import type { Entry, EntryHeader } from '../model/entry.js';
import { isBlobKey } from '../model/entry.js';
import { LOGICAL_BITS } from '../model/hlc.js';
import { contentHash, SYSTEM_NAMESPACE } from '../model/keys.js';
import { PrefixTrie } from './prefix-trie.js';
import type { Tier } from '../tiers/tier.js';

/**
 * Invalidation by tag, by prefix and of a whole namespace, without touching the entries it covers (issue 24).
 *
 * An invalidation is a *generation*: a version G recorded for a tag, a prefix or a namespace. An entry whose
 * version is at or below the highest G of its namespace, its key's prefixes and its tags is covered: every read
 * treats it as missing, whichever tier or near cache holds it and whether or not it is being promoted or migrated
 * (the check is on the entry a read found, not on where it was found). Physical removal can therefore wait. The near
 * cache is the exception that keeps its hits cheap: it drops the copies a newer document covers as that document is
 * adopted ({@link Invalidations.onChange}), and never caches a covered one, so its hits are not checked.
 *
 * - The generations live in one small document in the lowest (durable) tier, changed by compare-and-set like the
 *   hot fence's, so they survive losing the hot tier.
 * - Coordinators trust their copy for `leaseMs` from the moment they started reading it, and refresh it on demand
 *   (a head of the document, and a get only when it changed). A read or write that finds its copy expired and
 *   cannot refresh it fails with 503 (fails closed): it cannot know what is covered.
 * - The lease is measured on the monotonic clock, which no step of the wall clock moves. A read takes one reading of
 *   it for the lease and derives from the same reading the wall time of its near cache's expiry checks
 *   ({@link Invalidations.wallAt}): an L1 hit is ~1.8 µs, and each clock read ~40 ns here.
 * - An invalidation writes its generation, then waits one lease before it returns: by then no coordinator still
 *   trusts a copy without it, so no read that starts after the call returns can serve what it covers.
 * - Writes after it are not covered, whatever the clocks: every copy a coordinator adopts raises its clock above
 *   the document's generations (`observe`), so a write stamped after the call returned is above G. Writes
 *   acknowledged before the call started are covered when clocks agree within `maxClockSkewMs`: G is taken at
 *   least that far ahead of the invalidating coordinator's wall clock.
 */

/** The generations of one namespace: `all` for a flush, then per tag and per prefix. */
export interface NamespaceGenerations {
  all?: number;
  tags: Record<string, number>;
  prefixes: Record<string, number>;
}

/** One invalidation or flush, as the audit log keeps it. */
export interface InvalidationRecord {
  /** Unique per document (the document version that recorded it). */
  id: number;
  ns: string;
  kind: 'tags' | 'prefix' | 'flush';
  tags?: string[];
  prefix?: string;
  generation: number;
  /** Wall-clock time the record was written (ISO 8601). */
  at: string;
  /** Who asked: the tenant or `admin`, as the API knows it. */
  by: string;
}

export interface InvalidationDocument {
  version: number;
  namespaces: Record<string, NamespaceGenerations>;
  /** The most recent {@link AUDIT_LOG_LIMIT} records, oldest first. */
  log: InvalidationRecord[];
}

/** What an invalidation covers: tags (any of), a key prefix, or the whole namespace. */
export type InvalidationScope = { tags: readonly string[] } | { prefix: string } | { flush: true };

/** What an invalidation answers once it is in force everywhere. */
export interface InvalidationResult {
  id: number;
  generation: number;
  /** Entries at or below this version in the scope are covered. */
  kind: InvalidationRecord['kind'];
}

/** Where the document is kept: any durable store with a versioned compare-and-set write. */
export interface InvalidationRegister {
  /** The stored document's version (cheap: no body); undefined when there is none. */
  version(): Promise<number | undefined>;
  read(): Promise<InvalidationDocument | undefined>;
  /** Writes `doc` only if the stored version is `doc.version - 1` (none stored for version 1). */
  write(doc: InvalidationDocument): Promise<boolean>;
}

/** The key of the document in its tier (a namespace the API refuses, so no tenant can touch it). */
export const INVALIDATIONS_KEY = 'invalidations';
/** Tags one call may name (an entry carries at most 16). */
export const MAX_TAGS_PER_INVALIDATION = 64;
/** Tag and prefix generations a namespace may hold; the next invalidation of a new tag or prefix is refused. */
export const MAX_RECORDS_PER_NAMESPACE = 1000;
/** Tag and prefix generations the document may hold across namespaces (its size stays under ~1 MB). */
export const MAX_RECORDS = 10_000;
/** Invalidations and flushes one coordinator accepts per namespace per second (each is a document write). */
export const MAX_INVALIDATIONS_PER_SECOND = 10;
/** Invalidations and flushes the audit log keeps. */
export const AUDIT_LOG_LIMIT = 200;

const MAX_CAS_TRIES = 24;
/** A failed refresh is retried on demand, at most this often (meanwhile reads and writes fail closed). */
const RETRY_MS = 250;
/** Readers trust their copy for this much less than a lease, so they give it up before the invalidator returns. */
const LEASE_MARGIN = 0.05;

/** The document as an entry of a durable tier: a put of version n + 1 over n is a compare-and-set. */
export function tierInvalidationRegister(tier: Tier): InvalidationRegister {
  return {
    async version() {
      const h = await tier.head(SYSTEM_NAMESPACE, INVALIDATIONS_KEY);
      return h && !h.flags.tombstone && !h.flags.elsewhere ? h.version : undefined;
    },
    async read() {
      const e = await tier.get(SYSTEM_NAMESPACE, INVALIDATIONS_KEY);
      if (!e || e.header.flags.tombstone || e.header.flags.elsewhere) return undefined;
      return parseDocument(e.value, e.header.version, tier.name);
    },
    async write(doc) {
      const { version, ...body } = doc;
      const value = Buffer.from(JSON.stringify(body));
      const header = { version, expiresAt: null, size: value.length, hash: contentHash(value), tags: [], flags: {} };
      const entry: Entry = { header, value };
      return (await tier.put(SYSTEM_NAMESPACE, INVALIDATIONS_KEY, entry)).applied;
    },
  };
}

function parseDocument(value: Buffer, version: number, tier: string): InvalidationDocument {
  const body = JSON.parse(value.toString('utf8')) as Partial<InvalidationDocument>;
  if (!body || typeof body.namespaces !== 'object' || !Array.isArray(body.log)) {
    throw new TierUnavailableError(tier, new Error('the invalidations document is corrupt'));
  }
  return { version, namespaces: body.namespaces, log: body.log };
}

export interface InvalidationsOptions {
  register: InvalidationRegister;
  /** How long a coordinator trusts its copy; an invalidation waits this long before it returns. @default 1000 */
  leaseMs?: number;
  /**
   * How far apart coordinators' wall clocks may be while an invalidation still covers every write acknowledged
   * before it started. Versions issued after an invalidation run up to this far ahead of wall-clock time. @default 2000
   */
  maxClockSkewMs?: number;
  /** The coordinator's hybrid logical clock: a fresh version, versions seen elsewhere, and its wall clock. */
  clock: { next(): number; observe(version: number): void; wallNow(): number };
  /** Monotonic milliseconds (tests inject one). @default performance.now */
  now?: () => number;
  sleep?: (ms: number) => Promise<void>;
  /** Reports what happened (an invalidation in force, a failed refresh): a metric and a log line. */
  onEvent?: (event: InvalidationEvent) => void;
}

export type InvalidationEvent =
  { type: 'invalidated'; record: InvalidationRecord; waitedMs: number } | { type: 'invalidation-refresh-failed'; error: unknown };

/** One namespace's generations, compiled for the read path. */
interface Compiled {
  /** The highest generation of the namespace: an entry above it is covered by none (the common case, one compare). */
  max: number;
  all: number;
  maxTag: number;
  maxPrefix: number;
  tags: Map<string, number>;
  /** The prefix generations, walked along the key once (prefix-trie.ts). */
  prefixes: PrefixTrie;
}

export class Invalidations {
  readonly leaseMs: number;
  private readonly register: InvalidationRegister;
  private readonly maxClockSkewMs: number;
  private readonly clock: InvalidationsOptions['clock'];
  /** The lease clock (monotonic ms). A caller that reads it for its own use passes the reading to {@link ready}. */
  readonly now: () => number;
  private readonly sleep: (ms: number) => Promise<void>;
  private readonly onEvent: (event: InvalidationEvent) => void;
  private doc: InvalidationDocument = { version: 0, namespaces: {}, log: [] };
  private compiled = new Map<string, Compiled>();
  private readonly changed = new Set<() => void>();
  /** The highest generation of any namespace: a version above it is covered by nothing, decided without a lookup. */
  private maxAll = 0;
  private validUntil = -Infinity;
  /** Past this, a read starts a background refresh (half a lease before the copy expires). */
  private refreshAt = -Infinity;
  /** Wall-clock time minus the lease clock, taken again at every refresh (so a step of the wall clock is followed). */
  private wallOffset: number;
  private refreshing?: Promise<void>;
  private lastFailure = -Infinity;
  private failure?: unknown;
  /** Per namespace: the start of this second's window and the calls in it. */
  private readonly rate = new Map<string, { since: number; calls: number }>();

  constructor(opts: InvalidationsOptions) {
    this.register = opts.register;
    this.leaseMs = opts.leaseMs ?? 1000;
    this.maxClockSkewMs = opts.maxClockSkewMs ?? 2000;
    this.clock = opts.clock;
    this.now = opts.now ?? (() => performance.now());
    this.wallOffset = Date.now() - this.now();
    this.sleep = opts.sleep ?? ((ms) => new Promise((done) => setTimeout(done, ms)));
    this.onEvent = opts.onEvent ?? (() => {});
  }

  /**
   * Before a read or a write: nothing to wait for while the copy is trusted (the hot path), else a refresh to await.
   * The refresh rejects with 503 when the document cannot be read: the request fails closed. `now` is a reading of
   * {@link now} the caller just took, and uses for its own checks too ({@link wallAt}): the lease then costs no
   * clock read of its own.
   */
  ready(now: number = this.now()): Promise<void> | undefined {
    if (now < this.validUntil) {
      // Refreshed ahead of expiry in the background, so a busy coordinator rarely waits for one. Only started when
      // none is in flight: chaining a handler onto the running one on every call cost each read a promise until
      // it answered (bench invalidate: an L1 hit's cost rose by a third while a refresh was out).
      if (now >= this.refreshAt && !this.refreshing) void this.refresh().catch(() => {});
      return undefined;
    }
    return this.renew();
  }

  /**
   * Wall-clock milliseconds (as Date.now) at a reading of {@link now}: the near cache's expiry checks take it from
   * the read's one reading. Exact as of the last refresh (at most about half a lease ago on a busy coordinator),
   * so a step of the wall clock since shows up to that much late, in expiry checks only, never in the lease.
   */
  wallAt(now: number): number {
    return now + this.wallOffset;
  }

  /**
   * Calls `listener` each time the generations in force change (a newer document adopted), before any read checks
   * against them: the near cache drops its copies the new ones cover then, instead of checking every hit.
   */
  onChange(listener: () => void): () => void {
    this.changed.add(listener);
    return () => this.changed.delete(listener);
  }

  /** Whether a read that found `header` for `key` must treat it as missing. */
  covers(ns: string, key: string, header: EntryHeader): boolean {
    const v = header.version;
    // Newer than every generation anywhere: the common case, decided without a lookup (an L1 hit is ~1.8 µs, and
    // the namespace's lookup was most of this check's cost in it: bench invalidate).
    if (v > this.maxAll) return false;
    const c = this.compiled.get(ns);
    if (!c) return false;
    // Newer than every generation of the namespace: decided without looking at the key (a key a request brings is
    // often a fresh concatenation, which any string operation must first flatten: a copy).
    if (v > c.max) return false;
    // storeOnce blobs are shared by keys written after the invalidation; the keys that refer to them are checked.
    if (isBlobKey(key)) return false;
    if (v <= c.all) return true;
    if (v <= c.maxTag) {
      for (const t of header.tags) {
        const g = c.tags.get(t);
        if (g !== undefined && v <= g) return true;
      }
    }
    return v <= c.maxPrefix && c.prefixes.covers(key, v);
  }

  /**
   * The highest generation in force in `ns` (0: none): a version above it is covered by no invalidation of the
   * namespace. An exclusive create over an entry that is covered goes above it (coordinator.ts, createVersion).
   */
  ceiling(ns: string): number {
    return this.compiled.get(ns)?.max ?? 0;
  }

  /** The document as this coordinator holds it (stats, the audit route). */
  current(): InvalidationDocument {
    return this.doc;
  }

  /** The audit log, newest first, optionally of one namespace. */
  async audit(ns?: string): Promise<InvalidationRecord[]> {
    await this.refreshNow();
    return this.doc.log.filter((r) => ns === undefined || r.ns === ns).reverse();
  }

  /**
   * Records an invalidation and resolves once it is in force for every coordinator (written, then one lease).
   * Refused with 429 above the per-namespace rate or record limits, 503 when the document cannot be written.
   */
  async invalidate(ns: string, scope: InvalidationScope, by: string): Promise<InvalidationResult> {
    this.admit(ns);
    for (let attempt = 0; attempt < MAX_CAS_TRIES; attempt++) {
      const started = this.now();
      const stored = (await this.register.read()) ?? { version: 0, namespaces: {}, log: [] };
      // The generation is above every version this document holds and this clock issued (observed first), and
      // at least maxClockSkewMs ahead of this wall clock, so writes another coordinator acknowledged before now
      // are at or below it (see the module comment).
      this.observeAll(stored);
      const generation = Math.max(this.clock.next(), (this.clock.wallNow() + this.maxClockSkewMs) * LOGICAL_BITS);
      const record: InvalidationRecord = {
        id: stored.version + 1,
        ns,
        kind: 'flush' in scope ? 'flush' : 'tags' in scope ? 'tags' : 'prefix',
        ...('tags' in scope ? { tags: [...scope.tags] } : {}),
        ...('prefix' in scope ? { prefix: scope.prefix } : {}),
        generation,
        at: new Date(this.clock.wallNow()).toISOString(),
        by,
      };
      const next = apply(stored, record);
      if (await this.register.write(next)) {
        this.adopt(next, started);
        const written = this.now();
        await this.waitUntil(written + this.leaseMs);
        this.onEvent({ type: 'invalidated', record, waitedMs: Math.round(this.now() - written) });
        return { id: record.id, generation, kind: record.kind };
      }
      // Another coordinator wrote meanwhile: read again, with jitter.
      await this.sleep(Math.random() * Math.min(200, 5 * 2 ** attempt));
    }
    const why = `the invalidations document kept changing under ${MAX_CAS_TRIES} compare-and-set attempts`;
    throw new TierUnavailableError('invalidations', new Error(why));
  }

  /** Reads the document now, and awaits it (start-up, the audit route, tests). */
  async refreshNow(): Promise<void> {
    const started = this.now();
    this.wallOffset = Date.now() - started;
    const version = await this.register.version();
    if (version !== undefined && version !== this.doc.version) {
      const doc = await this.register.read();
      if (doc) this.adopt(doc, started);
    }
    this.trustFrom(started);
  }

  /**
   * A refresh that leaves the copy trusted now. The refresh joined may have started long before this read (a
   * background one) and answered too late to extend the lease: then an invalidation may have returned since it read
   * the document, and a refresh started after this read began is awaited too. That one has seen every invalidation
   * returned before the read, however long it took.
   */
  private async renew(): Promise<void> {
    await this.refresh();
    if (!(this.now() < this.validUntil)) await this.refresh();
  }

  private refresh(): Promise<void> {
    if (!this.refreshing) {
      if (this.now() - this.lastFailure < RETRY_MS) return Promise.reject(this.unavailable());
      this.refreshing = this.refreshNow()
        .then(() => (this.failure = undefined))
        .catch((error: unknown) => {
          this.lastFailure = this.now();
          this.failure = error;
          this.onEvent({ type: 'invalidation-refresh-failed', error });
          if (this.now() >= this.validUntil) throw this.unavailable();
        })
        .finally(() => (this.refreshing = undefined));
    }
    return this.refreshing;
  }

  private unavailable(): TierUnavailableError {
    return new TierUnavailableError('invalidations', this.failure);
  }

  /** Trusts the copy for a lease from `started` (a lease-clock reading). */
  private trustFrom(started: number): void {
    this.validUntil = Math.max(this.validUntil, started + this.leaseMs * (1 - LEASE_MARGIN));
    this.refreshAt = this.validUntil - this.leaseMs / 2;
  }

  /** Takes a document read (or written) from `started` on, and raises the clock above its generations. */
  private adopt(doc: InvalidationDocument, started: number): void {
    if (doc.version >= this.doc.version) {
      this.doc = doc;
      this.compiled = compile(doc);
      this.maxAll = [...this.compiled.values()].reduce((m, c) => Math.max(m, c.max), 0);
      for (const l of this.changed) l();
      this.observeAll(doc);
    }
    this.trustFrom(started);
  }

  private observeAll(doc: InvalidationDocument): void {
    for (const r of doc.log) this.clock.observe(r.generation);
    for (const g of Object.values(doc.namespaces)) {
      if (g.all !== undefined) this.clock.observe(g.all);
      for (const v of Object.values(g.tags)) this.clock.observe(v);
      for (const v of Object.values(g.prefixes)) this.clock.observe(v);
    }
  }

  /** The per-namespace rate limit (per coordinator; the document's compare-and-set bounds the total). */
  private admit(ns: string): void {
    const now = this.now();
    const r = this.rate.get(ns);
    if (!r || now - r.since >= 1000) {
      this.rate.set(ns, { since: now, calls: 1 });
      return;
    }
    if (++r.calls > MAX_INVALIDATIONS_PER_SECOND) {
      const message = `more than ${MAX_INVALIDATIONS_PER_SECOND} invalidations per second in namespace '${ns}': batch tags into one call, or retry in a second`;
      throw new StrataError('RATE_LIMITED', message, { limit: MAX_INVALIDATIONS_PER_SECOND, per: 'second' });
    }
  }

  private async waitUntil(at: number): Promise<void> {
    for (let left = at - this.now(); left > 0; left = at - this.now()) await this.sleep(Math.ceil(left));
  }
}

/**
 * The document with `record` applied: its generation raised where it names, what it supersedes dropped (a flush
 * drops the namespace's older tag and prefix generations; a prefix drops the longer prefixes it covers at or below
 * its generation), and the audit log appended. Refuses (429) a new tag or prefix above the record limits.
 */
export function apply(doc: InvalidationDocument, record: InvalidationRecord): InvalidationDocument {
  const namespaces = { ...doc.namespaces };
  const prev = namespaces[record.ns] ?? { tags: {}, prefixes: {} };
  const g: NamespaceGenerations = { ...prev, tags: { ...prev.tags }, prefixes: { ...prev.prefixes } };
  const G = record.generation;
  if (record.kind === 'flush') {
    g.all = Math.max(g.all ?? 0, G);
    g.tags = keepAbove(g.tags, G);
    g.prefixes = keepAbove(g.prefixes, G);
  } else if (record.kind === 'tags') {
    for (const t of record.tags!) g.tags[t] = Math.max(g.tags[t] ?? 0, G);
  } else {
    const p = record.prefix!;
    for (const [other, v] of Object.entries(g.prefixes)) if (other.startsWith(p) && v <= G) delete g.prefixes[other];
    g.prefixes[p] = Math.max(g.prefixes[p] ?? 0, G);
  }
  const added = count(g) - count(prev);
  if (added > 0) {
    if (count(g) > MAX_RECORDS_PER_NAMESPACE) limit(`namespace '${record.ns}' holds`, MAX_RECORDS_PER_NAMESPACE);
    const total = Object.values(namespaces).reduce((n, x) => n + count(x), 0) + added;
    if (total > MAX_RECORDS) limit('the deployment holds', MAX_RECORDS);
  }
  namespaces[record.ns] = g;
  const log = [...doc.log, record].slice(-AUDIT_LOG_LIMIT);
  return { version: doc.version + 1, namespaces, log };
}

function limit(what: string, max: number): never {
  const message = `${what} ${max} tag and prefix invalidations, the most kept at once; flush the namespace, or invalidate a shorter prefix that covers several`;
  throw new StrataError('RATE_LIMITED', message, { limit: max, per: 'records' });
}

function keepAbove(generations: Record<string, number>, floor: number): Record<string, number> {
  return Object.fromEntries(Object.entries(generations).filter(([, v]) => v > floor));
}

function count(g: NamespaceGenerations): number {
  return Object.keys(g.tags).length + Object.keys(g.prefixes).length;
}

function compile(doc: InvalidationDocument): Map<string, Compiled> {
  const out = new Map<string, Compiled>();
  for (const [ns, g] of Object.entries(doc.namespaces)) {
    const prefixes = new PrefixTrie(Object.entries(g.prefixes));
    const all = g.all ?? 0;
    const maxTag = Math.max(0, ...Object.values(g.tags));
    const maxPrefix = Math.max(0, ...Object.values(g.prefixes));
    const max = Math.max(all, maxTag, maxPrefix);
    out.set(ns, { max, all, maxTag, maxPrefix, tags: new Map(Object.entries(g.tags)), prefixes });
  }
  return out;
}
