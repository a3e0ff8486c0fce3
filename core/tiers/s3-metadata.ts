import { ValidationError } from '../errors.js';
import type { HeadObjectCommandOutput } from '@aws-sdk/client-s3';
import type { EntryEncoding, EntryFlags, EntryHeader } from '../model/entry.js';

/**
 * How the S3 tier keeps an entry's header on its object: the version in `x-amz-meta-strata-version` (read on its own
 * by the compare-and-set), the rest as compact ASCII JSON in `x-amz-meta-strata`, within S3's 2 KB of user metadata.
 * The object's body is the value itself, so that a presigned GET downloads exactly the value. And how a HEAD of such
 * an object reads back ({@link headResultOf}).
 */

/** User-metadata names (S3 lower-cases them; sent as x-amz-meta-*). */
export const META_VERSION = 'strata-version';
export const META_HEADER = 'strata';
/** On a staging key: `completed` once the upload was committed (the marker that refuses a second PUT). */
export const META_UPLOAD = 'strata-upload';
/** S3 allows 2 KB of user metadata (names + values); stay well below. */
export const META_BUDGET_BYTES = 1800;

/** The JSON stored in x-amz-meta-strata (the version travels separately in x-amz-meta-strata-version). */
interface StoredHeader {
  /** expiresAt */
  e: number | null;
  /** hash */
  h: string;
  /** tags */
  t: string[];
  /** contentType as given (the object's Content-Type may differ when this one is not a valid header value) */
  c?: string;
  /** flags */
  f: EntryFlags;
  /** encoding (a compressed or encrypted value: model/entry.ts) */
  x?: EntryEncoding;
  /** staleAt (a read-through value's TTL under stale-while-revalidate) */
  s?: number;
  /** 1 when the body is a placeholder and the value is empty (tombstones and location markers) */
  p?: 1;
}

/** The user metadata and Content-Type of an entry's object; a ValidationError when the header does not fit. */
export function encodeMeta(h: EntryHeader, placeholder: boolean): { meta: Record<string, string>; contentType: string } {
  const stored: StoredHeader = {
    e: h.expiresAt,
    h: h.hash,
    t: h.tags,
    f: h.flags,
    ...(h.contentType !== undefined ? { c: h.contentType } : {}),
    ...(h.encoding !== undefined ? { x: h.encoding } : {}),
    ...(h.staleAt !== undefined ? { s: h.staleAt } : {}),
    ...(placeholder ? { p: 1 as const } : {}),
  };
  const meta = { [META_VERSION]: String(h.version), [META_HEADER]: asciiJson(stored) };
  const bytes = Object.entries(meta).reduce((n, [k, v]) => n + k.length + v.length, 0);
  if (bytes > META_BUDGET_BYTES)
    throw new ValidationError(
      'tags',
      `entry header is ${bytes} bytes; S3 metadata allows about ${META_BUDGET_BYTES} (fewer or shorter tags / content type)`,
    );
  const contentType = h.contentType && isHeaderValue(h.contentType) ? h.contentType : 'application/octet-stream';
  return { meta, contentType };
}

/** The header an object's metadata holds; undefined when it holds none (or not one Strata wrote). */
export function decodeStored(meta: Record<string, string> | undefined, contentLength: number): EntryHeader | undefined {
  const v = meta?.[META_VERSION];
  const raw = meta?.[META_HEADER];
  if (v === undefined || raw === undefined || !/^\d+$/.test(v)) return undefined;
  try {
    const s = JSON.parse(raw) as StoredHeader;
    const header: EntryHeader = {
      version: Number(v),
      expiresAt: typeof s.e === 'number' ? s.e : null,
      size: s.p ? 0 : contentLength,
      hash: typeof s.h === 'string' ? s.h : '',
      tags: Array.isArray(s.t) ? s.t.map(String) : [],
      flags: s.f && typeof s.f === 'object' ? { ...s.f } : {},
    };
    if (typeof s.c === 'string') header.contentType = s.c;
    if (s.x && typeof s.x === 'object' && typeof s.x.size === 'number') header.encoding = s.x;
    if (typeof s.s === 'number') header.staleAt = s.s;
    return header;
  } catch {
    return undefined;
  }
}

/** JSON with every non-ASCII character escaped (\uXXXX), so it is a valid HTTP header value. */
function asciiJson(v: unknown): string {
  return JSON.stringify(v).replace(/[\u007f-\uffff]/g, (c) => '\\u' + c.charCodeAt(0).toString(16).padStart(4, '0'));
}

export function isHeaderValue(s: string): boolean {
  return /^[\x20-\x7e]*$/.test(s) && s.length <= 256;
}

/** What the tier's compare-and-set learns from a HEAD. */
export interface HeadResult {
  /** Undefined for objects without (valid) Strata metadata: such objects are treated as absent, but overwritten conditionally. */
  header?: EntryHeader;
  etag: string;
  size: number;
  contentType?: string;
  /** A completed upload's marker at its staging key (see S3Uploads.commitUpload). */
  completedMarker?: boolean;
}

/** A HEAD's answer as the tier reads it. */
export function headResultOf(res: HeadObjectCommandOutput): HeadResult {
  const size = res.ContentLength ?? 0;
  const header = decodeStored(res.Metadata, size);
  return {
    ...(header ? { header } : {}),
    etag: res.ETag ?? '',
    size,
    ...(res.ContentType ? { contentType: res.ContentType } : {}),
    ...(res.Metadata?.[META_UPLOAD] === 'completed' ? { completedMarker: true } : {}),
  };
}
