// Redis key layout of the hot tier: an entry's key, its shard's dirty set and member, and grouping by shard (= slot).
import { decodeKey, encodeKey, keyShard } from '../../model/keys.js';
import type { KeyRef } from '../tier.js';

/** The Redis keys of one entry. */
export interface RedisEntryKeys {
  shard: string;
  /** `<prefix>:{<shard>}:<ns>:<encodedKey>`: the entry, one string (see {@link encodeEntryBlob}). */
  entry: string;
  /** `<prefix>:{<shard>}:dirty`: the shard's dirty sorted set (same hash tag, so same cluster slot). */
  dirty: string;
  /** `<ns>:<encodedKey>`: the entry's member in the dirty set. */
  member: string;
}

export function redisEntryKeys(prefix: string, ns: string, key: string): RedisEntryKeys {
  const shard = keyShard(ns, key);
  const member = `${ns}:${encodeKey(key)}`;
  return { shard, entry: `${prefix}:{${shard}}:${member}`, dirty: dirtySetKey(prefix, shard), member };
}

/** Just the entry key of {@link redisEntryKeys} (the read path needs nothing else). */
export function redisEntryKey(prefix: string, ns: string, key: string): string {
  return `${prefix}:{${keyShard(ns, key)}}:${ns}:${encodeKey(key)}`;
}

export function dirtySetKey(prefix: string, shard: string): string {
  return `${prefix}:{${shard}}:dirty`;
}

/** Inverse of the dirty-set member layout (namespaces never contain ':'; encoded keys are base64url). */
export function parseDirtyMember(member: string): KeyRef {
  const i = member.indexOf(':');
  if (i <= 0) throw new Error(`corrupt dirty-set member '${member.slice(0, 80)}'`);
  return { ns: member.slice(0, i), key: decodeKey(member.slice(i + 1)) };
}

/** All 256 shard ids ('00'..'ff'). */
export const ALL_SHARDS: readonly string[] = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'));

/**
 * Groups item indexes by shard, groups in order of first appearance. One shard is one hash tag and therefore
 * one cluster slot, so each group can run as one pipeline on one node.
 */
export function groupByShard<T>(items: readonly T[], shardOf: (item: T) => string): number[][] {
  const groups = new Map<string, number[]>();
  items.forEach((item, i) => {
    const s = shardOf(item);
    const g = groups.get(s);
    if (g) g.push(i);
    else groups.set(s, [i]);
  });
  return [...groups.values()];
}
