// API Lambda: POST /v1/ns/{ns}/batch/{get,put,delete}. The logic lives in layers/core/api.
import { apiHandler } from '../../layers/core/api/handler.js';

export const handler = apiHandler('batch');
