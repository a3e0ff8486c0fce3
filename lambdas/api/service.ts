// API Lambda: GET /v1/health and /v1/stats. The logic lives in core/api.
import { apiHandler } from '../../core/composition/api-handler.js';

export const handler = apiHandler('service');
