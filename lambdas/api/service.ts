// API Lambda: GET /v1/health and /v1/stats. The logic lives in layers/core/api.
import { apiHandler } from '../../layers/core/api/handler.js';

export const handler = apiHandler('service');
