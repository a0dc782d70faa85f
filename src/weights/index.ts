// What the model pipelines use: where a profile's weights are and whether they are real, and the demo
// checkpoint helper. The CLI (cli.ts) and the downloader (download.ts, pull.ts) sit behind it.
export { defaultCatalog, loadCatalog, ManifestError, type WeightsCatalog } from './manifest';
export {
  checkProfile, componentPath, componentRoot, placeLabel, profileChecker, weightsNote, weightsState,
  type ComponentStatus, type FileStatus, type ProfileWeights, type VariantStatus, type WeightsPlace, type WeightsPlaces,
} from './state';
export { hubCacheDirOf, hubSnapshot } from './hub-cache';
export { comfyFoldersOf, type ComfyFolders } from './comfyui';
export { demoCheckpointVersion, ensureDemoCheckpoint, type DemoCheckpointSpec } from './demo';
