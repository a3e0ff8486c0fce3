// API Lambda: upload and download URLs for large values. The logic lives in core/api.
import { setWorkflowServiceFactory } from '../../core/api/admin-operations.js';
import { apiHandler } from '../../core/composition/api-handler.js';
import { workflowServiceFromEnv } from '../../core/composition/workflow-service-env.js';

// A large upload's completion starts the upload-commit workflow (Step Functions, STRATA_WORKFLOW_ARNS).
setWorkflowServiceFactory(() => workflowServiceFromEnv(process.env));

export const handler = apiHandler('transfer');
