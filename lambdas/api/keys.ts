// API Lambda: GET/HEAD/PUT/DELETE /v1/ns/{ns}/keys/{key}. The logic lives in core/api.
import { apiHandler } from '../../core/composition/api-handler.js';

export const handler = apiHandler('keys');
