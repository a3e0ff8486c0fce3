/** The SDK version (kept in step with sdk/package.json; sdk/scripts/check-build.mjs verifies it). */
export const SDK_VERSION = '0.1.0';
