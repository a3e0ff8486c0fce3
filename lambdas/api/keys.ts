// API Lambda: GET/HEAD/PUT/DELETE /v1/ns/{ns}/keys/{key}. The logic lives in layers/core/api.
import { apiHandler } from '../../layers/core/api/handler.js';

export const handler = apiHandler('keys');
