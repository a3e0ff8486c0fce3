// What both sides of the invalidation-overhead measurements share (bench/invalidate-overhead.ts in one process,
// bench/invalidate-l1.ts in a process per round): the keys, their tags, and the check that can be switched off.
import { Invalidations } from '../../core/coordinator/invalidations.js';
import type { EntryHeader } from '../../core/model/entry.js';

/** Keys with some depth, so prefix generations at several lengths apply to them (hot-path's `k123` has none). */
export const keyOf = (i: number) => `tenant-${i % 8}/user-${String(i).padStart(5, '0')}/profile`;
export const tagsOf = (i: number) => [
  `tag-${i % 900}`,
  `tag-${(i * 7 + 3) % 900}`,
  ...(i % 2 ? [`tag-${(i * 13 + 5) % 900}`] : []),
];
export const PREFIX_LENGTHS = [7, 9, 14, 16, 19, 21];

/** The real check, or (`on` false) none: what a coordinator would do without invalidations. */
export class SwitchableInvalidations extends Invalidations {
  on = true;
  override ready(now?: number): Promise<void> | undefined {
    return this.on ? super.ready(now) : undefined;
  }
  override covers(ns: string, key: string, header: EntryHeader): boolean {
    return this.on && super.covers(ns, key, header);
  }
}
