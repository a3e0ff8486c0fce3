// A realistic invalidations document for the invalidate scenario (bench/invalidate.ts, bench/invalidate-overhead.ts).
import { apply, type InvalidationDocument } from '../../core/coordinator/invalidations.js';
import { LOGICAL_BITS } from '../../core/model/hlc.js';

/**
 * A realistic invalidations document besides the benchmark's own records: `tags` tag and `prefixes` prefix
 * generations in namespace `ns`, all an hour old, so they cover nothing written since. Prefixes of `keyOf(i)` at the
 * given lengths, shortest first: `apply` drops a longer prefix that a shorter, newer one covers, so they are recorded
 * in that order with rising generations. The invalidate part seeds one for another namespace (the document's size
 * is in every read and write of it); the overhead part one per benchmark namespace (every read checks them).
 */
export function seededDocument(
  doc: InvalidationDocument,
  ns: string,
  opts: { tags: number; prefixes: number; lengths: readonly number[]; keyOf: (i: number) => string },
): InvalidationDocument {
  const base = (Date.now() - 3_600_000) * LOGICAL_BITS;
  let g = base;
  const at = new Date(Date.now() - 3_600_000).toISOString();
  const prefixes = new Set<string>();
  for (let i = 0; prefixes.size < opts.prefixes && i < 1_000_000; i++) {
    const length = opts.lengths[i % opts.lengths.length]!;
    prefixes.add(opts.keyOf(i * 7).slice(0, length));
  }
  const ordered = [...prefixes].sort((a, b) => a.length - b.length);
  for (const prefix of ordered)
    doc = apply(doc, { id: doc.version + 1, ns, kind: 'prefix', prefix, generation: ++g, at, by: 'bench-seed' });
  // 64 tags per record, the most one call may name.
  for (let t = 0; t < opts.tags; t += 64) {
    const tags = Array.from({ length: Math.min(64, opts.tags - t) }, (_, j) => `tag-${t + j}`);
    doc = apply(doc, { id: doc.version + 1, ns, kind: 'tags', tags, generation: ++g, at, by: 'bench-seed' });
  }
  return doc;
}
