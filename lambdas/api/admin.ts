// API Lambda: the admin routes under /v1/admin (workflow executions). The logic lives in core/api; the
// Step Functions client is built from this function's environment (core/composition/workflow-service-env.ts).
import { setWorkflowServiceFactory } from '../../core/api/admin-operations.js';
import { apiHandler } from '../../core/composition/api-handler.js';
import { workflowServiceFromEnv } from '../../core/composition/workflow-service-env.js';

setWorkflowServiceFactory(() => workflowServiceFromEnv(process.env));

export const handler = apiHandler('admin');
