// The settings of many GPU hosts (docs/deploy.md): the shared queue (BullMQ on Redis) and the object store outputs and
// inputs travel through (S3-compatible). Read by the API and by a worker alike; validated once at boot.
import { IMAGE_PROFILES, TTS_PROFILE, VIDEO_PROFILES } from '../catalog';

export interface S3Settings {
  /** Unset: AWS's own endpoint for the region. */
  endpoint?: string;
  bucket: string;
  region: string;
  accessKeyId?: string;
  secretAccessKey?: string;
  /** Path-style URLs (bucket in the path): MinIO, Ceph, s3rver want them. Default true with S3_ENDPOINT. */
  forcePathStyle: boolean;
}

export interface ClusterSettings {
  /** `local`: the API's own worker over IPC (today's behaviour). `redis`: workers on any host take work from Redis. */
  queue: 'local' | 'redis';
  redisUrl?: string;
  /** Undefined: files stay under DATA_DIR (local). */
  s3?: S3Settings;
}

type Env = Record<string, string | undefined>;

export class ClusterSettingsError extends Error {}

function flag(env: Env, key: string, def: boolean): boolean {
  const raw = env[key]?.trim().toLowerCase();
  if (!raw) return def;
  if (['1', 'true', 'yes', 'on'].includes(raw)) return true;
  if (['0', 'false', 'no', 'off'].includes(raw)) return false;
  throw new ClusterSettingsError(`${key}=${JSON.stringify(env[key])}: expected 1/0, true/false, yes/no or on/off`);
}

export function loadClusterSettings(env: Env): ClusterSettings {
  const queue = (env.QUEUE ?? 'local').trim().toLowerCase();
  if (queue !== 'local' && queue !== 'redis') throw new ClusterSettingsError(`QUEUE=${JSON.stringify(env.QUEUE)}: expected local (one host) or redis (workers on many hosts)`);
  const redisUrl = env.REDIS_URL?.trim() || undefined;
  if (redisUrl && !/^rediss?:\/\/.+/.test(redisUrl)) throw new ClusterSettingsError(`REDIS_URL=${JSON.stringify(env.REDIS_URL)}: expected redis://[user:password@]host[:port][/db] (or rediss:// for TLS)`);
  if (queue === 'redis' && !redisUrl) throw new ClusterSettingsError('QUEUE=redis needs REDIS_URL (e.g. redis://127.0.0.1:6379)');
  const storage = (env.STORAGE ?? 'local').trim().toLowerCase();
  if (storage !== 'local' && storage !== 's3') throw new ClusterSettingsError(`STORAGE=${JSON.stringify(env.STORAGE)}: expected local (files under DATA_DIR) or s3 (an S3-compatible object store)`);
  if (storage === 'local') return { queue, redisUrl };
  const bucket = env.S3_BUCKET?.trim();
  if (!bucket || !/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/.test(bucket)) throw new ClusterSettingsError(`S3_BUCKET=${JSON.stringify(env.S3_BUCKET)}: STORAGE=s3 needs a bucket name (3 to 63 lower-case letters, digits, dots, hyphens)`);
  const endpoint = env.S3_ENDPOINT?.trim() || undefined;
  if (endpoint && !/^https?:\/\/.+/.test(endpoint)) throw new ClusterSettingsError(`S3_ENDPOINT=${JSON.stringify(env.S3_ENDPOINT)}: expected an http(s) URL, e.g. http://minio:9000`);
  const accessKeyId = env.S3_ACCESS_KEY_ID?.trim() || undefined;
  const secretAccessKey = env.S3_SECRET_ACCESS_KEY?.trim() || undefined;
  if (!accessKeyId !== !secretAccessKey) throw new ClusterSettingsError('S3_ACCESS_KEY_ID and S3_SECRET_ACCESS_KEY go together (or neither: the AWS default credentials)');
  return {
    queue,
    redisUrl,
    s3: { endpoint, bucket, region: env.S3_REGION?.trim() || 'us-east-1', accessKeyId, secretAccessKey, forcePathStyle: flag(env, 'S3_FORCE_PATH_STYLE', endpoint !== undefined) },
  };
}

/** The profiles a worker serves (WORKER_PROFILES, a comma list of catalog profile names; 'tts' for speech), or
 * undefined: every profile it has weights for, real or demo. */
export function loadWorkerProfiles(env: Env): string[] | undefined {
  const raw = env.WORKER_PROFILES?.trim();
  if (!raw) return undefined;
  const known = [...VIDEO_PROFILES, ...IMAGE_PROFILES].map((p) => p.profile).concat(TTS_PROFILE);
  const names = raw.split(',').map((s) => s.trim()).filter(Boolean);
  const unknown = names.filter((n) => !known.includes(n));
  if (unknown.length || names.length === 0) throw new ClusterSettingsError(`WORKER_PROFILES=${JSON.stringify(raw)}: unknown ${unknown.join(', ') || 'list'}; use profile names from ${known.join(', ')}`);
  return names;
}
