import { log } from '../../util/logger.js';
import type { WorkflowService } from '../admin-service.js';
import {
  measureScaleOut,
  prelaunchFill,
  scaleOutRequest,
  type ScaleMeasureDeps,
  type ScaleOutRequest,
  type ScaleTriggerSettings,
  type TriggerOutcome,
} from './scale-trigger.js';

/**
 * Paper 000's trigger as the policy evaluator runs it (the rule `default-prelaunch`, core/policy/defaults.ts): the
 * trigger's own measurement (the nodes' reports, its counter sample in the ring store, the scale-out locks) gives the
 * evaluator's state `warm.prelaunchFillPercent`, and the ScaleOut the evaluator then starts is the trigger's (for the
 * node that passed T, holding that node's lock, in the configured mode).
 *
 * A measurement is kept {@link PRELAUNCH_TTL_MS} per container: the ticks of one minute's execution (sub-minute timers)
 * share it, and each minute measures afresh, as the trigger did. A measurement that fails is logged and leaves the
 * metric unknown (the rule then does not fire), as a missing report does.
 */
export const PRELAUNCH_TTL_MS = 30_000;

export class PrelaunchSource {
  private last?: { at: number; out: TriggerOutcome | undefined };

  constructor(
    private readonly deps: ScaleMeasureDeps,
    readonly settings: ScaleTriggerSettings,
    private readonly now: () => number = Date.now,
  ) {}

  /** The fullest free node's fill as a percentage of T, and that node; undefined when nothing could be measured. */
  async fill(): Promise<{ percent: number; node?: string } | undefined> {
    const out = await this.measure();
    return out ? prelaunchFill(out) : undefined;
  }

  /** The ScaleOut the latest measurement calls for (a node passed T, or is full), while that measurement is fresh. */
  request(): ScaleOutRequest | undefined {
    const last = this.last;
    if (!last?.out || this.now() - last.at >= PRELAUNCH_TTL_MS) return undefined;
    return scaleOutRequest(last.out, this.settings);
  }

  private async measure(): Promise<TriggerOutcome | undefined> {
    const at = this.now();
    if (this.last && at - this.last.at < PRELAUNCH_TTL_MS) return this.last.out;
    const out = await measureScaleOut({ ...this.deps, now: this.now }, this.settings).catch((error: unknown) => {
      log.warn("policy evaluator: paper 000's measurement failed; warm.prelaunchFillPercent is unknown this tick", { error });
      return undefined;
    });
    this.last = { at, out };
    return out;
  }
}

/**
 * `workflows`, whose ScaleOuts are the trigger's while the latest measurement names a node past T: that node
 * (`forNode`, whose lock ScaleOut's begin step takes, so no second scale-out runs for it), the trigger's mode, and
 * why. Any other start goes through unchanged.
 */
export function withPrelaunch(workflows: WorkflowService, source: PrelaunchSource): WorkflowService {
  return {
    start: (workflow, input, name) => {
      const request = workflow === 'scale-out' && input.forNode === undefined ? source.request() : undefined;
      if (!request) return workflows.start(workflow, input, name);
      const reason = [input.reason, request.reason].filter((r) => typeof r === 'string' && r).join(': ');
      // ScaleOut's begin step takes a reason of at most 200 characters (scale-steps.ts scaleOutBeginInput).
      return workflows.start(
        workflow,
        { ...input, mode: input.mode ?? request.mode, forNode: request.forNode, reason: reason.slice(0, 200) },
        name,
      );
    },
    describe: (execution) => workflows.describe(execution),
    list: (o) => workflows.list(o),
  };
}
