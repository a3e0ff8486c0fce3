import { HeadObjectCommand, type DeleteObjectCommandInput, type S3Client } from '@aws-sdk/client-s3';
import { isNotFound } from '../../core/tiers/s3-errors.js';

/**
 * Makes `client`'s DeleteObject honour If-Match as AWS does. LocalStack answers it 501 Not Implemented and nothing
 * else local runs it, so this stands in for S3 (CONTRIBUTING: mock AWS only where nothing local runs it): before the
 * request goes out it compares the object's ETag (read with `admin`) with If-Match, failing as S3 does (412, or 404
 * when there is no object), and sends the delete without the header only when they match. `before` runs first, for
 * a test to act between the tier's read and its delete; `seen` records the requests.
 * https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-deletes.html
 */
export function honourConditionalDeletes(
  client: S3Client,
  admin: S3Client,
  seen: DeleteObjectCommandInput[] = [],
  before?: () => Promise<void>,
): S3Client {
  client.middlewareStack.add(
    (next, context) => async (args) => {
      if (context.commandName !== 'DeleteObjectCommand') return next(args);
      const input = args.input as DeleteObjectCommandInput;
      seen.push({ ...input });
      await before?.();
      if (input.IfMatch === undefined) return next(args);
      let etag: string | undefined;
      try {
        etag = (await admin.send(new HeadObjectCommand({ Bucket: input.Bucket, Key: input.Key }))).ETag;
      } catch (e) {
        if (!isNotFound(e)) throw e;
        throw Object.assign(new Error('NoSuchKey'), { name: 'NoSuchKey', $metadata: { httpStatusCode: 404 } });
      }
      if (input.IfMatch !== '*' && input.IfMatch !== etag)
        throw Object.assign(new Error('At least one of the pre-conditions you specified did not hold'), {
          name: 'PreconditionFailed',
          $metadata: { httpStatusCode: 412 },
        });
      const { IfMatch: _checked, ...rest } = input;
      return next({ ...args, input: rest });
    },
    { step: 'initialize', name: 'conditionalDelete' },
  );
  return client;
}
