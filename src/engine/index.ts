// The engine's public surface. Op families: import from './ops/<family>'.
export { Engine, EngineHolder, UPLOAD_CHUNK_BYTES, type EngineOptions } from './engine';
export { GpuDevice, DeviceLostError, type DeviceDescription, type DeviceOptions } from './device';
export { TensorScope, storagesIn, type Owned } from './scope';
export { Tensor, Storage, broadcastShapes, contiguousStrides, fmtShape, numelOf } from './tensor';
export { BufferPool, GpuOutOfMemoryError, sizeClass, type PoolStats } from './memory';
export { KernelCache, KernelError, Params, withHeader, type Kernel, type KernelSpec } from './kernels';
export { Recorder, grid1d, type Binding, type Dispatch } from './recorder';
export { DTYPE_BYTES, type DType } from './dtype';
export { Checkpoint, CheckpointError, type SafeDType, type TensorEntry } from './safetensors';
export { writeSafetensors, writeShardedSafetensors, type WriteTensor } from './safetensors-writer';
export { loadTensor, loadTensors, type LoadOptions } from './load';
export { RowTable, type RowTableOptions, type RowTablePlacement } from './row-table';
export { quantizeInt8PerChannel, uploadInt8, type QuantizedInt8 } from './quantize';
export { gridPositions, mrope, rope1d, ropeAxes, ropeInvFreq, uploadRope, type MropeMode, type RopeTable } from './rope-tables';
export { besselI0, kaiserBeta, kaiserSincFilter1d, kaiserWindow } from './filters';
export { ADAPTERS, adapterProfile, adapterProfileOf, type AdapterProfile } from './plan-device';
export { Meter, boundBytes, noWork, workSince, type Work } from './meter';
