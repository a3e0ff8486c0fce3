import { ConfigurationError } from '../../../cdk/config/load.js';

/** The message of the ConfigurationError `fn` throws (fails the test when it throws none, or another error). */
export function configErrorOf(fn: () => unknown): string {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigurationError);
    return (e as Error).message;
  }
  throw new Error('expected a ConfigurationError');
}
