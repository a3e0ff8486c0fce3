// API Lambda: upload and download URLs for large values. The logic lives in layers/core/api.
import { apiHandler } from '../../layers/core/api/handler.js';

export const handler = apiHandler('transfer');
