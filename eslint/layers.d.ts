// Types of eslint/layers.js for the tests that import it (the ESLint config loads the JavaScript directly).
import type { ESLint } from 'eslint';

export const CORE_LAYERS: ReadonlyArray<readonly [prefix: string, rank: number]>;
export function layeringViolation(from: string, to: string): string | undefined;
declare const plugin: ESLint.Plugin;
export default plugin;
