import { type Static, Type } from 'typebox';
import { Uuid } from '../../http/schemas.js';

/** A path under the install's root that LargeFS serves from the bucket (relative, no `..`). */
const RelativePath = Type.String({
  minLength: 1,
  maxLength: 255,
  pattern: '^(?!/)(?!.*(^|/)\\.\\.(/|$))[A-Za-z0-9._~@+=,/-]+$',
  description: 'A path relative to the install root, e.g. wp-content/uploads/',
});

/** One entry of path_settings (LargeFSConfig in the reference document). */
const PathSetting = Type.Object({
  path: RelativePath,
  excluded_paths: Type.Optional(Type.Array(RelativePath, { maxItems: 50 })),
  redirect_type: Type.Optional(Type.String({ enum: ['break', 'permanent'] })),
});

/** S3 bucket naming rules: 3-63 characters of a-z, 0-9, `.` and `-`, starting and ending alphanumeric. */
const Bucket = Type.String({ minLength: 3, maxLength: 63, pattern: '^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$' });
/** An AWS region name such as us-east-1 or ap-southeast-2. */
const BucketRegion = Type.String({ minLength: 9, maxLength: 32, pattern: '^[a-z]{2}(-[a-z]+)+-[0-9]{1,2}$' });
const Cloud = Type.String({ enum: ['s3'] });
const PathSettings = Type.Array(PathSetting, { maxItems: 20 });

/** updateOffloadSettings (POST): the whole configuration; cloud, bucket and bucket_region are required. */
export const PutOffloadBody = Type.Object({
  largefs_settings: Type.Object({
    cloud: Cloud,
    bucket: Bucket,
    bucket_region: BucketRegion,
    path_settings: Type.Optional(PathSettings),
  }),
});

/** patchOffloadSettings (PATCH): the fields given replace the stored ones; the rest stay. */
export const PatchOffloadBody = Type.Object({
  largefs_settings: Type.Object({
    cloud: Type.Optional(Cloud),
    bucket: Type.Optional(Bucket),
    bucket_region: Type.Optional(BucketRegion),
    path_settings: Type.Optional(PathSettings),
  }),
});

export type LargeFsSettings = Static<typeof PutOffloadBody>['largefs_settings'];
export type LargeFsPatch = Static<typeof PatchOffloadBody>['largefs_settings'];

/** What is stored and shown: every path setting complete (defaults filled in). */
export const StoredSettingsSchema = Type.Object({
  cloud: Cloud,
  bucket: Type.String(),
  bucket_region: Type.String(),
  path_settings: Type.Array(
    Type.Object({
      path: Type.String(),
      excluded_paths: Type.Array(Type.String()),
      redirect_type: Type.String({ enum: ['break', 'permanent'] }),
    }),
  ),
});
export type StoredSettings = Static<typeof StoredSettingsSchema>;

/** The reference's LargeFSConfig: `{}` until the install is configured. */
export const OffloadSettingsSchema = Type.Object(
  { largefs_settings: Type.Optional(StoredSettingsSchema) },
  { description: 'LargeFS offload settings' },
);

/** The reference's LargeFSValidationFile. */
export const ValidationFileSchema = Type.Object(
  {
    name: Type.String({ description: 'File name to place at the bucket root, e.g. 64f1250c.largefs' }),
    content: Type.String({ description: 'Exact content of that file' }),
  },
  { description: 'LargeFS validation file' },
);

export const OffloadParams = Type.Object({ install_id: Uuid() });
