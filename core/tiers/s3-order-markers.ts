/**
 * The S3 tier's key-order index (S3Tier.listOrdered, the KeyOrdering capability). An entry's object is named by
 * shard and base64url (`<prefix>/<ns>/<shard>/<base64url(key)>`), neither of which keeps key order, so each entry
 * also has a marker object, `<prefix>/_k/<ns>/<encodeOrderedKey(key)>` (storage-key.ts): S3 lists object names in
 * UTF-8 order, and the encoding keeps key order, so a listing of `_k/<ns>/` is the namespace's keys in order.
 *
 * The invariant: every entry object has a marker. What keeps it:
 * - A write that creates an entry object (S3Tier.put when the HEAD found none, S3Tier.commitUpload likewise: the
 *   only two writes that may create one, since every other write is conditional on the ETag of an object that
 *   exists) PUTs the marker first, then the object. A crash in between leaves a marker without an object: a listing
 *   names a key that is not there, which the coordinator reads and skips. The marker's body is random, so every
 *   marker PUT gives it a new ETag: that is what {@link S3OrderMarkers.prune} relies on.
 * - Markers are never deleted on the write path (a delete, an expiry, a lifecycle rule leave them): only
 *   {@link S3OrderMarkers.prune} deletes one, and only once its object is gone and nothing re-created it.
 * - Objects written before markers existed have none: {@link S3OrderMarkers.backfill}.
 */
import { randomBytes } from 'node:crypto';
import {
  DeleteObjectCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  type S3Client,
} from '@aws-sdk/client-s3';
import { belowUpper, inKeyRange, lowerBound, type OrderedKeysPage, type OrderedKeysQuery } from '../model/key-order.js';
import { mapLimit } from '../util/concurrency.js';
import { isConflict, isNotFound, isNotImplemented } from './s3-errors.js';
import {
  encodeOrderedKey,
  orderedKeyPrefix,
  parseS3OrderMarkerKey,
  s3ObjectKey,
  s3OrderMarkerFolder,
  s3OrderMarkerKey,
} from './storage-key.js';

/**
 * A marker younger than this is never pruned. Between a creation's marker PUT and its object PUT lies one write (a
 * Lambda is cut off after 15 minutes; a longer write marks again once it is done, see {@link S3OrderMarkers.settle}):
 * a marker this old whose object is absent belongs to no creation still running, whatever the clocks of S3 and of
 * the caller differ by (minutes at worst).
 */
export const ORDER_MARKER_MIN_AGE_MS = 3600_000;
/**
 * A creation that took longer than this between its marker PUT and the end of its object write PUTs the marker
 * again: far enough below {@link ORDER_MARKER_MIN_AGE_MS} that a prune cannot have judged the first one stale.
 */
const MARKER_REFRESH_AFTER_MS = 15 * 60_000;
/** Markers listed beyond what a page needs: the few before an inclusive bound (see `startAfter`), and one to tell `more`. */
const LIST_SLACK = 4;

export interface OrderMarkerDeps {
  client: S3Client;
  bucket: string;
  prefix: string;
  /** In-flight requests of prune and backfill. */
  concurrency: number;
  /** The clock markers' ages are measured with (tests move it). */
  now(): number;
  /** The tier's TierUnavailableError for a failed request. */
  unavailable(e: unknown): Error;
}

/** One marker of a {@link S3OrderMarkers.page}: the key it stands for and how old it is (by S3's LastModified). */
export interface OrderMarker {
  key: string;
  /** Now (the tier's clock) less the marker's LastModified; a prune considers only those of at least ORDER_MARKER_MIN_AGE_MS. */
  ageMs: number;
}

/** A page of a namespace's markers in listing order; `cursor` (null at the end) resumes after the last one. */
export interface OrderMarkerPage {
  markers: OrderMarker[];
  cursor: string | null;
}

/** What {@link S3OrderMarkers.prune} did with each key it was given. */
export interface PruneResult {
  /** Markers deleted: old, their object gone, unchanged since read. */
  removed: string[];
  /** Markers kept: none there, young, their object present, or changed before the delete (a creation re-PUT it). */
  kept: string[];
  /**
   * The backend refuses conditional deletes (LocalStack answers 501 Not Implemented): markers that could go were
   * kept, since an unconditional delete could remove the marker a creation had just written.
   */
  unsupported: boolean;
}

export class S3OrderMarkers {
  constructor(private readonly d: OrderMarkerDeps) {}

  /**
   * Writes (ns, key)'s marker, before a write that may create its object; returns when, for {@link settle}. Not
   * conditional: concurrent creations each write one, and any of them will do.
   */
  async mark(ns: string, key: string): Promise<number> {
    const at = this.d.now();
    const put = new PutObjectCommand({
      Bucket: this.d.bucket,
      Key: s3OrderMarkerKey(this.d.prefix, ns, key),
      Body: randomBytes(9).toString('base64url'),
      ContentType: 'text/plain',
    });
    try {
      await this.d.client.send(put);
    } catch (e) {
      throw this.d.unavailable(e);
    }
    return at;
  }

  /**
   * After a creation's object write succeeded: marks again when the write took long (a multipart write of a large
   * value from a process without Lambda's time limit). A prune may have found the first marker old and its object
   * not yet there, and deleted it; marking again puts it back. A listing between the two may miss the key, which
   * the object's write had not long finished.
   */
  async settle(ns: string, key: string, markedAt: number): Promise<void> {
    if (this.d.now() - markedAt > MARKER_REFRESH_AFTER_MS) await this.mark(ns, key);
  }

  /**
   * One page of `q` in key order. Markers are listed from just before the lower bound: StartAfter is exclusive, so
   * an exclusive bound starts after its own encoding, and an inclusive one after its encoding less the last
   * character (a proper prefix of it: before it, and after every encoding of a smaller key except the few that start
   * with that prefix, which the range check drops). The listing prefix is the encoding of the range's prefix cut to
   * its whole 6-bit groups (orderedKeyPrefix); the range check drops the rest. The first marker past the upper
   * bound ends the page: every later one is past it too.
   *
   * Markers whose object is gone (deleted, expired, a crash between marker and object) are listed like the others:
   * the coordinator reads each key. A key whose object exists for the whole call has had its marker since before
   * the object was created, and S3 lists are strongly consistent, so it is listed.
   */
  async list(ns: string, q: OrderedKeysQuery): Promise<OrderedKeysPage> {
    const folder = s3OrderMarkerFolder(this.d.prefix, ns);
    const limit = Math.max(1, Math.floor(q.limit));
    const Prefix = folder + (q.prefix ? orderedKeyPrefix(q.prefix) : '');
    const low = lowerBound(q);
    let startAfter: string | undefined;
    if (low) {
      const enc = encodeOrderedKey(low.key);
      startAfter = folder + (low.inclusive ? enc.slice(0, -1) : enc);
    }
    const keys: string[] = [];
    for (;;) {
      let res;
      try {
        res = await this.d.client.send(
          new ListObjectsV2Command({
            Bucket: this.d.bucket,
            Prefix,
            MaxKeys: Math.min(1000, limit - keys.length + LIST_SLACK),
            // Each request starts after the last name the previous one listed: what a continuation token does.
            ...(startAfter !== undefined ? { StartAfter: startAfter } : {}),
          }),
        );
      } catch (e) {
        throw this.d.unavailable(e);
      }
      const contents = res.Contents ?? [];
      for (const o of contents) {
        const key = o.Key === undefined ? undefined : parseS3OrderMarkerKey(this.d.prefix, ns, o.Key);
        if (key === undefined) continue; // not a marker we write
        if (!belowUpper(key, q)) return { keys, more: false };
        if (!inKeyRange(key, q)) continue; // before the lower bound: listed from just before it
        if (keys.length >= limit) return { keys, more: true };
        keys.push(key);
      }
      const last = contents[contents.length - 1]?.Key;
      if (!res.IsTruncated || last === undefined) return { keys, more: false };
      if (keys.length >= limit) return { keys, more: true };
      startAfter = last;
    }
  }

  /**
   * One page of up to `limit` (at most 1,000, S3's page) markers of `ns`, with their ages, for a maintenance pass that
   * prunes them: ListObjectsV2 answers each object's LastModified, so markers too young to prune cost no HEAD. The
   * cursor is the encoded key of the page's last marker (the listing's StartAfter), not S3's continuation token: it
   * stays valid for good, so a pass stopped mid-namespace resumes there in a later execution.
   * https://docs.aws.amazon.com/AmazonS3/latest/API/API_ListObjectsV2.html (StartAfter, Contents.LastModified)
   */
  async page(ns: string, cursor: string | null, limit: number): Promise<OrderMarkerPage> {
    const folder = s3OrderMarkerFolder(this.d.prefix, ns);
    let res;
    try {
      res = await this.d.client.send(
        new ListObjectsV2Command({
          Bucket: this.d.bucket,
          Prefix: folder,
          MaxKeys: Math.max(1, Math.min(1000, Math.floor(limit))),
          ...(cursor ? { StartAfter: folder + cursor } : {}),
        }),
      );
    } catch (e) {
      throw this.d.unavailable(e);
    }
    const now = this.d.now();
    const markers: OrderMarker[] = [];
    for (const o of res.Contents ?? []) {
      const key = o.Key === undefined ? undefined : parseS3OrderMarkerKey(this.d.prefix, ns, o.Key);
      // No LastModified: counted as young (age 0), so never pruned on this page's word.
      if (key !== undefined) markers.push({ key, ageMs: o.LastModified ? now - o.LastModified.getTime() : 0 });
    }
    const last = res.Contents?.at(-1)?.Key;
    return { markers, cursor: res.IsTruncated && last !== undefined ? last.slice(folder.length) : null };
  }

  /**
   * Deletes the markers of `keys` whose object is gone, for good: each marker is read (ETag, LastModified), kept when
   * younger than {@link ORDER_MARKER_MIN_AGE_MS}, kept when its object exists (HEAD), and otherwise deleted with
   * `If-Match: <the ETag read>`. Why that never deletes the marker of an object that exists, or is being created:
   * - an object created before the HEAD of the object is seen by it, and its marker kept;
   * - a creation whose marker PUT came before our read of the marker made the marker young (the age bound is longer
   *   than any creation between its marker PUT and the end of its object write: see MARKER_REFRESH_AFTER_MS);
   * - a creation whose marker PUT came after our read changed the marker's ETag (its body is random), so the
   *   conditional delete fails (412) and the marker stays, though its object may not exist yet at our HEAD of it.
   * S3 conditional deletes: https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-deletes.html (If-Match
   * with an ETag on DeleteObject; a mismatch answers 412 Precondition Failed). They need s3:GetObject besides
   * s3:DeleteObject (https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-delete-enforce.html): the
   * tier's policy grants both on its prefix (cdk/constructs/cold-tier-bucket.ts).
   *
   * Who calls it: anything that met keys listed but gone, e.g. a maintenance pass over listOrdered pages (this
   * method HEADs each key's object itself, so a page may be handed over as it is). Stale markers only cost listings
   * a read each until then.
   */
  async prune(ns: string, keys: readonly string[]): Promise<PruneResult> {
    const removed: string[] = [];
    const kept: string[] = [];
    let unsupported = false;
    await mapLimit(keys, this.d.concurrency, async (key) => {
      const markerKey = s3OrderMarkerKey(this.d.prefix, ns, key);
      const marker = await this.head(markerKey);
      // No marker, or one a creation may have just written.
      const young = !marker || this.d.now() - (marker.LastModified?.getTime() ?? Infinity) < ORDER_MARKER_MIN_AGE_MS;
      if (young || unsupported || (await this.head(s3ObjectKey(this.d.prefix, ns, key)))) return void kept.push(key);
      try {
        await this.d.client.send(new DeleteObjectCommand({ Bucket: this.d.bucket, Key: markerKey, IfMatch: marker.ETag }));
        removed.push(key);
      } catch (e) {
        if (isNotImplemented(e)) unsupported = true;
        else if (!isConflict(e) && !isNotFound(e)) throw this.d.unavailable(e);
        kept.push(key);
      }
    });
    return { removed, kept, unsupported };
  }

  /**
   * Gives the objects of `keys` (listed by S3Tier.keys: their objects existed) a marker where they have none, with
   * `If-None-Match: *`: one request per key that writes only a missing marker and leaves an existing one as it is
   * (a 412). S3Tier.keys lists in shard order, not key order, so a page of keys cannot be checked against one page of
   * markers. Returns how many it wrote. A marker written for an object deleted meanwhile is a stale one: allowed.
   */
  async backfill(ns: string, keys: readonly string[]): Promise<number> {
    const wrote = await mapLimit(keys, this.d.concurrency, async (key) => {
      try {
        await this.d.client.send(
          new PutObjectCommand({
            Bucket: this.d.bucket,
            Key: s3OrderMarkerKey(this.d.prefix, ns, key),
            Body: randomBytes(9).toString('base64url'),
            ContentType: 'text/plain',
            IfNoneMatch: '*',
          }),
        );
        return true;
      } catch (e) {
        if (isConflict(e)) return false;
        throw this.d.unavailable(e);
      }
    });
    return wrote.filter(Boolean).length;
  }

  private async head(objectKey: string): Promise<{ ETag?: string; LastModified?: Date } | undefined> {
    try {
      return await this.d.client.send(new HeadObjectCommand({ Bucket: this.d.bucket, Key: objectKey }));
    } catch (e) {
      if (isNotFound(e)) return undefined;
      throw this.d.unavailable(e);
    }
  }
}

/**
 * A tier that keeps order markers and can maintain them (S3Tier): the order-markers workflow
 * (core/workflows/steps/order-marker-steps.ts) prunes and backfills only tiers that pass {@link maintainsOrderMarkers};
 * the others have no markers.
 */
export interface OrderMarkerMaintenance {
  /** The tier's namespaces, sorted. */
  namespaces(): Promise<string[]>;
  orderMarkerPage(ns: string, cursor: string | null, limit: number): Promise<OrderMarkerPage>;
  pruneOrderMarkers(ns: string, keys: readonly string[]): Promise<PruneResult>;
  backfillOrderMarkers(
    ns: string,
    cursor: string | null,
    limit?: number,
  ): Promise<{ listed: number; created: number; cursor: string | null }>;
}

export function maintainsOrderMarkers<T extends object>(t: T): t is T & OrderMarkerMaintenance {
  const m = t as Partial<OrderMarkerMaintenance>;
  return (
    typeof m.namespaces === 'function' &&
    typeof m.orderMarkerPage === 'function' &&
    typeof m.pruneOrderMarkers === 'function' &&
    typeof m.backfillOrderMarkers === 'function'
  );
}
