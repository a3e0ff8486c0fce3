/**
 * `@strata-cache/sdk`: the TypeScript client for Strata's HTTP API. Zero runtime dependencies (global `fetch`).
 *
 * @example
 * ```ts
 * import { StrataClient, VersionConflictError } from '@strata-cache/sdk';
 * const strata = new StrataClient({ endpoint: 'http://localhost:8080', namespace: 'app' });
 * ```
 * @packageDocumentation
 */
export { StrataClient, BATCH_SIZE } from './client.js';
export {
  StrataError,
  ValidationError,
  AuthenticationError,
  NamespaceForbiddenError,
  NotFoundError,
  VersionConflictError,
  PayloadTooLargeError,
  UnsupportedMediaTypeError,
  RangeNotSatisfiableError,
  RateLimitedError,
  OriginError,
  UnavailableError,
  TimeoutError,
  UploadCompletionTimeoutError,
  NetworkError,
  StrataServerError,
  WorkflowsUnavailableError,
  ExecutionExistsError,
  PoliciesUnavailableError,
  KeyUnavailableError,
  TransformedScopeError,
  errorFromResponse,
} from './errors.js';
export type { ServerErrorCode, ClientErrorCode, StrataErrorCode, StrataErrorInit, ErrorResponseInfo } from './errors.js';
export type {
  CacheItem,
  GetOptions,
  NotModified,
  CacheValue,
  DeleteManyResult,
  DeleteOptions,
  DeleteResult,
  FetchLike,
  HealthResponse,
  PutManyItem,
  PutManyOptions,
  PutManyResult,
  PutOptions,
  PutResult,
  RequestOptions,
  RetryInfo,
  StatsResponse,
  StrataClientOptions,
  TouchOptions,
  TierStats,
} from './types.js';
export { WorkflowsClient, WORKFLOW_NAMES, WORKFLOW_PROGRESS_UNITS } from './workflows.js';
export type {
  ReplaceNodeInput,
  RollingUpgradeInput,
  ScaleInInput,
  ScaleMode,
  ScaleOutInput,
  WorkflowExecution,
  WorkflowExecutionDetail,
  WorkflowExecutionStatus,
  WorkflowInputs,
  WorkflowListOptions,
  WorkflowName,
  WorkflowProgress,
  WorkflowRequestOptions,
  WorkflowStartOptions,
  WorkflowWaitOptions,
} from './workflows.js';
export { CostClient } from './cost.js';
export type {
  CostBreakdown,
  CostCatalog,
  CostCatalogsResult,
  CostPlacement,
  CostPlacementsResult,
  CostRecommendation,
  CostRequestOptions,
  CostWorkload,
  Paper2010Result,
  PaperCell,
  PaperDiscrepancy,
} from './cost.js';
export { PoliciesClient } from './policies.js';
export type {
  FiringPreview,
  PolicyDocument,
  PolicyFiring,
  PolicyFiringOutcome,
  PolicyFiringsOptions,
  PolicyProblem,
  PolicyPutOptions,
  PolicyRequestOptions,
  PolicyRollbackOptions,
  PolicySource,
  PolicyValidation,
  PolicyVersionsOptions,
  PolicyVersionSummary,
  PolicyView,
} from './policies.js';
export { NodesClient, ReplacementControlsClient } from './nodes.js';
export type {
  CacheNode,
  CacheNodeState,
  NodeList,
  NodeRemoval,
  NodeReplaceRequestOptions,
  NodeRequestOptions,
  ReplaceNodeOptions,
  ReplacementControls,
  UpgradeOptions,
} from './nodes.js';
export { NamespacesClient, MAX_TAGS_PER_INVALIDATION } from './invalidation.js';
export type { InvalidationRecord, InvalidationResult, NamespaceRequestOptions, SweepStarted } from './invalidation.js';
export { formatBytes, graceWait, renderProgressBar } from './progress.js';
export type { GraceWait, ProgressBarOptions, ProgressSubject } from './progress.js';
export { MAX_LIST_LIMIT } from './listing.js';
export type { BoundInclusion, KeyPage, ListedKey, ListKeysOptions } from './listing.js';
export { SDK_VERSION } from './version.js';
export { MIN_PART_BYTES, MAX_PART_BYTES, MAX_PARTS } from './streams.js';
export type { GetStreamOptions, PutStreamOptions, StreamSource, ValueStream } from './streams.js';
