/**
 * The server and the SDK agree on the API's contract (issue 21, "contracts written once"): error codes, their HTTP
 * statuses and the SDK class each maps to; workflow names and statuses; the progress document. The definitions are
 * written once in sdk/src/contract.ts and the server imports them; this test fails when either side drifts from it
 * (the type checks below are compile-time: `tsc -p tsconfig.json` checks this file).
 */
import * as sdk from '../../sdk/src/index.js';
import {
  CACHE_NODE_STATES,
  SERVER_ERROR_CODES,
  SERVER_ERROR_STATUS,
  WORKFLOW_EXECUTION_STATUSES,
  WORKFLOW_NAMES as CONTRACT_WORKFLOW_NAMES,
  WORKFLOW_PROGRESS_UNITS,
  type NodeRemovalWire,
  type ReplacementControlsWire,
} from '../../sdk/src/contract.js';
import { NODE_STATES, type NodeState } from '../../core/ring/document.js';
import type { HealthControlsDocument } from '../../core/nodes/health-controls.js';
import type { NodeRemoval } from '../../core/nodes/node-removal.js';
import type { ReplaceNodeRequest } from '../../core/workflows/steps/replace-steps.js';
import { NamespaceForbiddenError } from '../../core/api/tenant-access.js';
import { PlacementQueryError } from '../../core/cost/model/placement-query.js';
import {
  ERROR_STATUS,
  NotFoundError,
  StrataError,
  TierUnavailableError,
  ValidationError,
  VersionConflictError,
  type ErrorCode,
} from '../../core/errors.js';
import { WORKFLOW_NAMES, type WorkflowName, type WorkflowProgress } from '../../core/workflows/progress.js';
import { NodeLaunchTimeoutError, NoNodeToRemoveError, ScaleOutInFlightError } from '../../core/workflows/steps/scale-steps.js';
import {
  EXECUTION_STATUSES,
  ExecutionExistsError,
  WorkflowsUnavailableError,
  progressView,
  type ExecutionDetail,
  type ExecutionProgress,
  type ExecutionStatus,
} from '../../core/workflows/admin-service.js';

// ---- compile time: the types the server writes and the SDK reads are the same ----

/** True when A and B are the same type (not merely assignable). */
type Equals<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
function assertType<T extends true>(_: T): void {}

/** What the SDK makes of a progress view it receives as JSON: dates parsed, execution and workflow on the detail. */
type AsParsedBySdk<P> = {
  [K in keyof P as Exclude<K, 'execution' | 'workflow'>]: K extends 'startedAt' | 'updatedAt' ? Date : P[K];
};
type ServerProgressOnTheWire = NonNullable<ExecutionDetail['progress']>;

assertType<Equals<ErrorCode, sdk.ServerErrorCode>>(true);
assertType<Equals<WorkflowName, sdk.WorkflowName>>(true);
assertType<Equals<ExecutionStatus, sdk.WorkflowExecutionStatus>>(true);
assertType<Equals<ServerProgressOnTheWire, ExecutionProgress>>(true);
assertType<Equals<Omit<ExecutionProgress, 'fraction' | 'unit'>, Omit<WorkflowProgress, never>>>(true);
assertType<
  Equals<
    AsParsedBySdk<ServerProgressOnTheWire>,
    AsParsedBySdk<sdk.WorkflowProgress & Pick<ExecutionProgress, 'execution' | 'workflow'>>
  >
>(true);
// ... and so each is assignable to the other.
export const serverToSdk = (p: AsParsedBySdk<ServerProgressOnTheWire>): sdk.WorkflowProgress => p;
export const sdkToServer = (p: sdk.WorkflowProgress): AsParsedBySdk<ServerProgressOnTheWire> => p;

// The node admin API: the ring's node states, the replacement controls and a removal as the core has them.
assertType<Equals<NodeState, sdk.CacheNodeState>>(true);
assertType<Equals<HealthControlsDocument, ReplacementControlsWire>>(true);
assertType<Equals<NodeRemoval, NodeRemovalWire>>(true);
assertType<Equals<NodeRemovalWire, sdk.NodeRemoval>>(true);
// replace-node's input: the SDK's type has the fields of the server's schema, and what it allows the server takes.
assertType<Equals<keyof sdk.ReplaceNodeInput, keyof ReplaceNodeRequest>>(true);
export const replaceInputToServer = (i: sdk.ReplaceNodeInput): ReplaceNodeRequest => i;

// ---- run time ----

/** One instance of every error class the server raises (and the base with every code). */
function serverErrors(): StrataError[] {
  return [
    ...(Object.keys(ERROR_STATUS) as ErrorCode[]).map((code) => new StrataError(code, `a ${code}`)),
    new ValidationError('ttl', 'must be a whole number'),
    new NotFoundError('no such key', { key: 'k' }),
    new VersionConflictError('stale', { expected: 1, current: 2 }),
    new TierUnavailableError('hot', new Error('ECONNREFUSED')),
    new NamespaceForbiddenError('not yours', { namespace: 'b', allowed: ['a'] }),
    new ExecutionExistsError('run-1'),
    new WorkflowsUnavailableError('no workflows here', { workflow: 'scale-out' }, new Error('sfn')),
    new ScaleOutInFlightError('n1'),
    new NoNodeToRemoveError('one node left'),
    new NodeLaunchTimeoutError('n2', 1000),
    new PlacementQueryError('valueSize', 'must be positive'),
  ];
}

/** The SDK's class for a status alone (a body without a Strata error envelope). */
function sdkClassForStatus(status: number): typeof sdk.StrataError {
  return sdk.errorFromResponse({ status, body: '<html>error</html>' }).constructor as typeof sdk.StrataError;
}

describe('the server and the SDK agree on error codes', () => {
  it('have one list of codes with one status each', () => {
    expect([...SERVER_ERROR_CODES].sort()).toEqual(Object.keys(ERROR_STATUS).sort());
    for (const code of SERVER_ERROR_CODES)
      expect({ code, status: ERROR_STATUS[code] }).toEqual({ code, status: SERVER_ERROR_STATUS[code] });
  });

  it('the SDK maps every code the server sends to a class of its own (not the fallback by status)', () => {
    for (const code of new Set(serverErrors().map((e) => e.code))) {
      const body = JSON.stringify({ error: { code, message: 'm' } });
      // An unknown code falls back to the class of the status: 418 and 599 fall back to different classes.
      const a = sdk.errorFromResponse({ status: 418, body }).constructor;
      const b = sdk.errorFromResponse({ status: 599, body }).constructor;
      expect({ code, knownToSdk: a === b }).toEqual({ code, knownToSdk: true });
    }
  });

  it.each(serverErrors().map((e) => [`${e.name} ${e.code}`, e] as const))(
    '%s reaches the SDK with its code, status and semantics',
    (_, e) => {
      expect(e.status).toBe(ERROR_STATUS[e.code]);
      const got = sdk.errorFromResponse({ status: e.status, body: JSON.stringify(e.toJSON()), requestId: 'r1' });
      expect({ code: got.code, status: got.status, message: got.message, details: got.details }).toEqual({
        code: e.code,
        status: e.status,
        message: e.message,
        details: e.details,
      });
      // Retried exactly when the status says so: throttling and server errors.
      expect({ code: e.code, retryable: got.retryable }).toEqual({
        code: e.code,
        retryable: e.status === 429 || e.status >= 500,
      });
      // The class is the status's class or a refinement of it; a class of its own only directly under StrataError.
      const statusClass = sdkClassForStatus(e.status);
      const ownClass = Object.getPrototypeOf(got.constructor) === sdk.StrataError;
      const refines = got instanceof statusClass || ownClass;
      expect({ code: e.code, sdkClass: got.name, statusClass: statusClass.name, refines }).toEqual({
        code: e.code,
        sdkClass: got.name,
        statusClass: statusClass.name,
        refines: true,
      });
      // A server class the SDK has too (ValidationError, NamespaceForbiddenError, ...) arrives as that class.
      const same = (sdk as Record<string, unknown>)[e.name];
      if (typeof same === 'function' && e.name !== 'StrataError')
        expect({ code: e.code, sdkClass: got.name }).toEqual({ code: e.code, sdkClass: e.name });
    },
  );

  it('server errors are named after their class and keep their cause', () => {
    for (const e of serverErrors()) expect(e.name).toBe(e.constructor.name);
    expect((new TierUnavailableError('hot', new Error('down')).cause as Error).message).toBe('down');
    expect(new StrataError('INTERNAL', 'x', undefined, { cause: 'why' }).cause).toBe('why');
  });
});

describe('the server and the SDK agree on the node admin API', () => {
  it('have the same node states, in the same order', () => {
    expect([...CACHE_NODE_STATES]).toEqual([...NODE_STATES]);
  });
});

describe('the server and the SDK agree on workflows', () => {
  it('have the same workflow names and execution statuses', () => {
    expect(WORKFLOW_NAMES).toEqual(sdk.WORKFLOW_NAMES);
    expect(CONTRACT_WORKFLOW_NAMES).toEqual(sdk.WORKFLOW_NAMES);
    expect(EXECUTION_STATUSES).toEqual(WORKFLOW_EXECUTION_STATUSES);
  });

  it('count progress in the units the contract names, for every workflow (replace-node: phases)', () => {
    expect(Object.keys(WORKFLOW_PROGRESS_UNITS)).toEqual([...WORKFLOW_NAMES]);
    expect(sdk.WORKFLOW_PROGRESS_UNITS).toEqual(WORKFLOW_PROGRESS_UNITS);
    expect(WORKFLOW_PROGRESS_UNITS['replace-node']).toBe('phases');
    const at = '2026-01-01T00:00:00.000Z';
    for (const workflow of WORKFLOW_NAMES) {
      const doc: WorkflowProgress = {
        execution: 'e',
        workflow,
        phase: 'p',
        total: 3,
        done: 1,
        keys: 0,
        bytes: 0,
        startedAt: at,
        updatedAt: at,
        facts: {},
      };
      expect({ workflow, unit: progressView(doc, 'RUNNING').unit }).toEqual({
        workflow,
        unit: WORKFLOW_PROGRESS_UNITS[workflow],
      });
    }
  });

  it('the progress the admin API returns has every field of the SDK progress type', () => {
    const doc: WorkflowProgress = {
      execution: 'e',
      workflow: 'scale-out',
      phase: 'streaming',
      total: 2,
      done: 1,
      keys: 3,
      bytes: 4,
      startedAt: '2026-01-01T00:00:00.000Z',
      updatedAt: '2026-01-01T00:00:01.000Z',
      outcome: 'succeeded',
      facts: { plan: 'p' },
    };
    const wire = JSON.parse(JSON.stringify(progressView(doc, 'RUNNING'))) as Record<string, unknown>;
    const sdkFields: Record<keyof sdk.WorkflowProgress, true> = {
      phase: true,
      total: true,
      done: true,
      unit: true,
      fraction: true,
      keys: true,
      bytes: true,
      outcome: true,
      facts: true,
      startedAt: true,
      updatedAt: true,
    };
    expect(Object.keys(wire).sort()).toEqual([...Object.keys(sdkFields), 'execution', 'workflow'].sort());
  });
});
