// EventBridge Lambda: EC2 spot interruption warnings drain the cache node (core/nodes/spot-interruption.ts).
export { handler } from '../../core/composition/spot-interruption-lambda.js';
