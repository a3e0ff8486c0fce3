import * as z from 'zod';
import { ValidationError } from '../../errors.js';
import { prelaunchSettingsSchema } from '../../policy/defaults.js';

/**
 * Paper 000's speculative scale-out trigger. A node that fills past the threshold
 *
 *     T = c/2 + δ_H · (‖N‖ − R/δ_L)
 *
 * (c = node capacity, δ_L / δ_H = the lowest / highest expected request rate, R = the current rate, ‖N‖ = the
 * number of nodes) gets a node launched for it in the background, so the instance has booted by the time the
 * node overflows; a node that overflows is split at once. The clamps keep T within the node: below 0.1·c it
 * becomes 0.1·c (launch early rather than never), above 0.75·c it becomes 0.95·c (a large fleet under a low rate
 * has time to launch late). The threshold rises with the fleet (more nodes share new keys, so each fills more
 * slowly) and falls with the rate (a fast stream fills a node before an instance boots).
 *
 * Capacity and fill must be in the same unit (records, as in the paper, or bytes); rates in requests per second.
 */
export const thresholdParamsSchema = z
  .strictObject({
    /** Node capacity c (records or bytes: the unit of `fill`). */
    capacity: z.number().positive('capacity must be a positive number of records or bytes'),
    /** δ_L: the lowest request rate expected (requests/s). */
    lowRate: z.number().positive('lowRate (δ_L) must be a positive request rate'),
    /** δ_H: the highest request rate expected (requests/s). */
    highRate: z.number().positive('highRate (δ_H) must be a positive request rate'),
  })
  .refine((p) => p.highRate >= p.lowRate, { message: 'highRate (δ_H) must be at least lowRate (δ_L)', path: ['highRate'] });
export type ThresholdParams = z.infer<typeof thresholdParamsSchema>;

/** T for a fleet of `nodes` under `rate` requests/s, with the paper's clamps. */
export function speculativeThreshold(p: ThresholdParams, nodes: number, rate: number): number {
  if (!(nodes >= 1) || !Number.isInteger(nodes)) throw new ValidationError('nodes', `must be a positive integer (got ${nodes})`);
  if (!(rate >= 0)) throw new ValidationError('rate', `must be a non-negative number of requests per second (got ${rate})`);
  const t = p.capacity / 2 + p.highRate * (nodes - rate / p.lowRate);
  if (t < 0.1 * p.capacity) return 0.1 * p.capacity;
  if (t > 0.75 * p.capacity) return 0.95 * p.capacity;
  return t;
}

export interface NodeLoad {
  id: string;
  /** Records or bytes held (the unit of the params' capacity). */
  fill: number;
}

export type ScaleDecision =
  /** Every node is below T. */
  | { action: 'none'; threshold: number }
  /** `node` passed T: launch a node in the background and split `node` onto it once it boots. */
  | { action: 'prelaunch'; node: string; threshold: number; fill: number }
  /** `node` is full: split it now. */
  | { action: 'split'; node: string; threshold: number; fill: number }
  /** The fullest node passed T but a scale-out for it is already running (at most one per node). */
  | { action: 'in-flight'; node: string; threshold: number; fill: number };

/**
 * The trigger: evaluated from live node fill and the request rate. Looks at the fullest node (the one a split
 * relieves most); a node with a scale-out already in flight is skipped in favour of the next fullest, so at
 * most one scale-out per node runs at a time.
 */
export function decideScaleOut(
  p: ThresholdParams,
  nodes: readonly NodeLoad[],
  rate: number,
  inFlight: ReadonlySet<string> = new Set(),
): ScaleDecision {
  const threshold = speculativeThreshold(p, Math.max(1, nodes.length), rate);
  const over = [...nodes].filter((n) => n.fill > threshold).sort((a, b) => b.fill - a.fill);
  if (over.length === 0) return { action: 'none', threshold };
  const free = over.find((n) => !inFlight.has(n.id));
  if (!free) return { action: 'in-flight', node: over[0]!.id, threshold, fill: over[0]!.fill };
  return { action: free.fill >= p.capacity ? 'split' : 'prelaunch', node: free.id, threshold, fill: free.fill };
}

/**
 * The trigger's settings (cdk/config's `workflows.scaleTrigger`): the unit of fill and capacity, δ_L and δ_H, and the
 * migration mode of the scale-outs it starts. Defined with the policy rule that carries them (core/policy/defaults.ts
 * `default-prelaunch`, below this layer), so the scheduled trigger and the rule read the same.
 */
export const scaleTriggerSettingsSchema = prelaunchSettingsSchema;
