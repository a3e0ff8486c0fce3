// API Lambda: POST /v1/ns/{ns}/batch/{get,put,delete}. The logic lives in core/api.
import { apiHandler } from '../../core/composition/api-handler.js';

export const handler = apiHandler('batch');
