// API Lambda: the admin routes under /v1/admin (workflow executions). The logic lives in core/api; the
// Step Functions client is built from this function's environment (core/runtime/workflows.ts).
import { setWorkflowServiceFactory } from '../../core/api/admin-operations.js';
import { apiHandler } from '../../core/api/handler.js';
import { workflowServiceFromEnv } from '../../core/runtime/workflows.js';

setWorkflowServiceFactory(() => workflowServiceFromEnv(process.env));

export const handler = apiHandler('admin');
