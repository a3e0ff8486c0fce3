import xxhash from 'xxhash-wasm';

/**
 * The ring's 64-bit hash space. A key's position is XXH64(ns NUL key), seed 0, from `xxhash-wasm` (a maintained
 * WebAssembly build of xxHash; ~0.1 µs per short key, where SHA-256 through node:crypto took 0.3 µs as hex and
 * 1.1 µs as a Buffer). xxHash passes SMHasher, so keys spread evenly. It is not keyed: whoever picks the keys could
 * crowd one range on purpose, but the keys come from the deployment's own applications, and a crowded range is
 * split at its median position like any other full range.
 *
 * The hash fixes where every key lives, in the ring and in each node's store order: {@link RING_HASH} names it so a
 * node's data directory can refuse a build that hashes differently.
 *
 * Positions travel as 16 lowercase hex digits: fixed width, so string order is numeric order, and JSON-safe.
 */
export const RING_HASH = 'xxh64';
export const HASH_HEX_DIGITS = 16;
export const HASH_BYTES = 8;
/** The lowest position (start of the first range). */
export const RING_MIN = '0000000000000000';
/** The highest position. Ranges are [start, end) with end = the next range's start, or the top of the space. */
export const RING_MAX = 'ffffffffffffffff';

const HEX16 = /^[0-9a-f]{16}$/;

export function isRingPosition(s: unknown): s is string {
  return typeof s === 'string' && HEX16.test(s);
}

// One WebAssembly instance per process, ready before any module that imports this one runs (top-level await).
const { h64, h64ToString } = await xxhash();

/** 8 bytes: the key's ring position, big-endian (so byte order is position order). */
export function ringHashBytes(ns: string, key: string): Buffer {
  const out = Buffer.allocUnsafe(HASH_BYTES);
  out.writeBigUInt64BE(h64(`${ns}\u0000${key}`));
  return out;
}

/** The key's ring position as 16 hex digits (xxhash-wasm zero-pads them). */
export function ringHash(ns: string, key: string): string {
  return h64ToString(`${ns}\u0000${key}`);
}

/** A position as a BigInt (for arithmetic: midpoints, fractions of the space). */
export function positionToBigInt(p: string): bigint {
  return BigInt(`0x${p}`);
}

export function bigIntToPosition(n: bigint): string {
  if (n < 0n || n > 0xffffffffffffffffn) throw new RangeError(`ring position out of range: ${n}`);
  return n.toString(16).padStart(HASH_HEX_DIGITS, '0');
}

/** `count` positions cutting the space into equal parts, starting at RING_MIN. */
export function evenStarts(count: number): string[] {
  if (!Number.isInteger(count) || count < 1) throw new RangeError('evenStarts: count must be a positive integer');
  const span = (1n << 64n) / BigInt(count);
  return Array.from({ length: count }, (_, i) => bigIntToPosition(span * BigInt(i)));
}
