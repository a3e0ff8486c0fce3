import { createHash } from 'node:crypto';
import type { Entry, EntryHeader } from '../../model/entry.js';
import { contentHash } from '../../model/keys.js';
import type { Tier } from '../../tiers/tier.js';

/**
 * Copying one entry into another tier and proving it arrived, before anyone removes the original (eviction to S3,
 * tier migration's demote). The rules every mover shares:
 *
 * - the copy is a versioned put, so it never replaces a newer version;
 * - the copy drops the flags that belong to the source tier (`dirty`: the target is below it; `pinned`: a pin
 *   holds in one tier);
 * - verification reads the target back: `head` compares version, size (S3 reports the stored object's length) and
 *   content hash; `content` reads the whole value and hashes it again;
 * - a newer version already in the target is as good as our copy: the original may go.
 */
export type VerifyMode = 'head' | 'content';

export type CopyOutcome =
  /** The target holds our version (just written, or already there) or a newer one. */
  | { ok: true; how: 'copied' | 'already-there' | 'newer-in-target' }
  /** The target refused for lack of room. */
  | { ok: false; full: true; reason: string }
  /** The target holds something else than what we wrote (or nothing). */
  | { ok: false; full?: undefined; reason: string };

/**
 * Whether `value` matches a header's content hash: true or false when the hash can be checked, undefined when it
 * cannot (no hash, or the ETag of a multipart upload). Hashes are base64url SHA-256 (`contentHash`), or
 * `etag:<etag>` for values committed from a presigned upload, whose single-part ETag is the MD5 of the bytes.
 */
export function checksumMatches(value: Buffer, hash: string): boolean | undefined {
  if (hash === '') return undefined;
  if (hash.startsWith('etag:')) {
    const etag = hash.slice(5).toLowerCase();
    if (!/^[0-9a-f]{32}$/.test(etag)) return undefined; // multipart: MD5 of the parts' MD5s, not recomputable here
    return createHash('md5').update(value).digest('hex') === etag;
  }
  return contentHash(value) === hash;
}

/** The header a copy carries: the source's, without the source tier's own flags. */
export function copyHeader(h: EntryHeader, size: number): EntryHeader {
  const { dirty: _dirty, pinned: _pinned, ...flags } = h.flags;
  return { ...h, size, tags: [...h.tags], flags };
}

/**
 * What is wrong with the target's state after copying `expected` there, or undefined when it holds that version
 * (or a newer one). `found` is the target's header; `foundValue` its value when verifying content.
 */
export function copyProblem(expected: Entry, found: EntryHeader | undefined, foundValue?: Buffer): string | undefined {
  const v = expected.header.version;
  if (!found) return `the target holds no copy of version ${v}`;
  if (found.version > v) return undefined;
  if (found.version < v) return `the target holds version ${found.version}, older than ${v}`;
  const h = expected.header;
  if (h.flags.tombstone) return found.flags.tombstone ? undefined : `the target holds version ${v} but not as a tombstone`;
  // A location marker says the value lives below: whatever the target holds at that version is the real thing.
  if (h.flags.elsewhere) return undefined;
  if (found.flags.tombstone || found.flags.elsewhere)
    return `the target holds version ${v} as a ${found.flags.tombstone ? 'tombstone' : 'location marker'}, not a value`;
  if (found.size !== expected.value.length)
    return `size mismatch: the target holds ${found.size} bytes, the source ${expected.value.length}`;
  if (found.hash !== h.hash)
    return `checksum mismatch: the target's hash is '${found.hash.slice(0, 60)}', the source's '${h.hash.slice(0, 60)}'`;
  if (foundValue !== undefined) {
    if (foundValue.length !== expected.value.length)
      return `size mismatch: the target's value is ${foundValue.length} bytes, the source's ${expected.value.length}`;
    if (checksumMatches(foundValue, h.hash) === false || (h.hash === '' && !foundValue.equals(expected.value)))
      return 'content mismatch: the bytes read back differ from the source';
  }
  return undefined;
}

/** Copies `entry` into `target` (versioned) and verifies it there (see the module comment). */
export async function copyVerified(
  target: Tier,
  ns: string,
  key: string,
  entry: Entry,
  mode: VerifyMode = 'head',
): Promise<CopyOutcome> {
  const copy: Entry = { header: copyHeader(entry.header, entry.value.length), value: entry.value };
  const o = await target.put(ns, key, copy);
  if (o.full) return { ok: false, full: true, reason: `tier '${target.name}' is full` };
  let problem: string | undefined;
  if (mode === 'content') {
    const e = await target.get(ns, key);
    problem = copyProblem(entry, e?.header, e && e.header.version === entry.header.version ? e.value : undefined);
  } else {
    problem = copyProblem(entry, await target.head(ns, key));
  }
  if (problem) return { ok: false, reason: problem };
  const current = o.current ?? entry.header.version;
  return { ok: true, how: o.applied ? 'copied' : current > entry.header.version ? 'newer-in-target' : 'already-there' };
}
