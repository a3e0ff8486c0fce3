import { hash } from 'node:crypto';

/**
 * The ring's 64-bit hash space. A key's position is the first 64 bits of SHA-256(ns NUL key) (Node's one-shot
 * `crypto.hash`; no 64-bit hash package is a dependency of the project). SHA-256 spreads keys evenly and nobody
 * can craft a hot range without breaking it; at ~1 µs per short key it is cheap next to a network round trip.
 *
 * Positions travel as 16 lowercase hex digits: fixed width, so string order is numeric order, and JSON-safe.
 */
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

/** 8 bytes: the key's ring position, big-endian (the first 8 bytes of the SHA-256). */
export function ringHashBytes(ns: string, key: string): Buffer {
  return hash('sha256', `${ns}\u0000${key}`, 'buffer').subarray(0, HASH_BYTES);
}

/** The key's ring position as 16 hex digits. */
export function ringHash(ns: string, key: string): string {
  return hash('sha256', `${ns}\u0000${key}`, 'hex').slice(0, HASH_HEX_DIGITS);
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
