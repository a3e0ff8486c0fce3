// API Lambda: the admin routes under /v1/admin (workflow executions). The logic lives in layers/core/api; the
// Step Functions client is built from this function's environment (layers/core/runtime/workflows.ts).
import { setWorkflowServiceFactory } from '../../layers/core/api/admin-operations.js';
import { apiHandler } from '../../layers/core/api/handler.js';
import { workflowServiceFromEnv } from '../../layers/core/runtime/workflows.js';

setWorkflowServiceFactory(() => workflowServiceFromEnv(process.env));

export const handler = apiHandler('admin');
