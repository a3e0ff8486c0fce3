// API Lambda: upload and download URLs for large values. The logic lives in core/api.
import { apiHandler } from '../../core/composition/api-handler.js';

export const handler = apiHandler('transfer');
