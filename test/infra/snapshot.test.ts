import { ENVIRONMENT_NAMES } from '../../cdk/config/schema.js';
import { assetHashSerializer } from './helpers/asset-hash-serializer.js';
import { STACK_KEYS, synthesized } from './helpers/synth.js';

expect.addSnapshotSerializer(assetHashSerializer);

// A reviewed change to the infrastructure updates these with `npm test -- test/infra/snapshot.test.ts -u`.
describe.each(ENVIRONMENT_NAMES)('Template snapshots: %s', (env) => {
  const s = synthesized(env);
  it.each(STACK_KEYS)('%s', (key) => {
    expect(s.templates[key].toJSON()).toMatchSnapshot();
  });
});

describe('Serializer: asset hashes', () => {
  it('replaces 64-hex asset hashes and nothing else', () => {
    const key = `${'ab12'.repeat(16)}.zip`;
    expect({ S3Key: key, LogicalId: 'HotTierCache9D551FE0' }).toMatchInlineSnapshot(`
{
  "LogicalId": "HotTierCache9D551FE0",
  "S3Key": "[ASSET HASH].zip",
}
`);
  });
});
