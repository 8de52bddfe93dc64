/*
 * ipc.h - interprocess device memory, part of the C API of openreg.h (which
 * includes this file; include openreg.h, not this). Like CUDA IPC: a process
 * exports a handle to an allocation, another process on the same host opens
 * it as device memory of its own. Not here: a transport for the handle.
 */
#ifndef OPENREG_IPC_H
#define OPENREG_IPC_H

#include "openreg/openreg.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Interprocess memory                                                       */
/* ------------------------------------------------------------------------ */

// LITERALINCLUDE START: OR_IPC_API
/* The size of an orIpcMemHandle_t in bytes, as CUDA_IPC_HANDLE_SIZE. */
#define OR_IPC_HANDLE_SIZE 64

/* Names one device allocation of one process so that other processes on the
 * same host can open it. Plain bytes: copy it through any channel (a pipe, a
 * socket, a file, a c10d store). See Note [How device memory crosses
 * processes] in src/ipc.cpp. */
typedef struct orIpcMemHandle_st {
  char reserved[OR_IPC_HANDLE_SIZE];
} orIpcMemHandle_t;

/* Writes a handle naming the whole allocation that devPtr lies in (an
 * interior pointer names its allocation: offsets are the caller's business,
 * as on CUDA). Asking again for the same live allocation writes the same
 * handle. The handle stays valid until the allocation is freed; if another
 * process still has it open then, orFree returns at once but the
 * allocation's bytes stay reserved on this device (counted by orMemGetInfo)
 * until the last process that opened it closes it or exits.
 *   handle  out
 *   devPtr  in: inside a live allocation from this process's orMalloc
 * Returns orSuccess, orErrorInvalidValue (NULL argument, not device memory,
 * or memory itself opened with orIpcOpenMemHandle, which openreg does not
 * export again), orErrorInvalidDevicePointer (freed or never allocated),
 * orErrorMemoryAllocation (the host has no file descriptors left).
 * Related: orIpcOpenMemHandle, orFree. */
OPENREG_API orError_t orIpcGetMemHandle(orIpcMemHandle_t* handle, void* devPtr);

/* Opens, in this process, an allocation another process on the same host
 * exported with orIpcGetMemHandle, and writes a device pointer to its first
 * byte. The memory belongs to the calling thread's current device: copies,
 * memsets and kernels (orKernelTranslatePointer) use it like memory from
 * orMalloc, and the host still cannot dereference it. Both processes see the
 * same bytes; ordering between them is the callers' business (synchronise
 * before signalling the other side). It does not count against this
 * device's capacity (orMemGetInfo): the exporter's device holds it. Each
 * successful open maps the allocation anew and needs its own
 * orIpcCloseMemHandle. If the exporter frees the allocation or exits while
 * it is open here, the bytes stay valid here until closed.
 *   devPtr  out
 *   handle  in
 *   flags   in: must be 0
 * Returns orSuccess, orErrorInvalidValue (devPtr is NULL, flags not 0, or
 * handle is not the bytes of an orIpcMemHandle_t: corrupted, or forged to
 * name another offset or size than the exported allocation's), orErrorNotPermitted (the
 * handle was exported by this very process: use the original pointer, as
 * CUDA refuses too), orErrorInvalidResourceHandle (the allocation was freed,
 * or the exporting process exited or cannot be reached),
 * orErrorMemoryAllocation (the host cannot map it).
 * Related: orIpcCloseMemHandle, orIpcGetMemHandle. */
OPENREG_API orError_t orIpcOpenMemHandle(void** devPtr, orIpcMemHandle_t handle,
                                         unsigned int flags);

/* Closes memory opened with orIpcOpenMemHandle, after waiting for all work
 * queued on every device (any of it may still use the memory). The pointer
 * is unusable afterwards; the exporter's allocation is untouched, and if the
 * exporter already freed it, this close lets its device reclaim the bytes.
 *   devPtr  in, may be NULL: exactly a pointer orIpcOpenMemHandle wrote
 * Returns orSuccess, orErrorInvalidValue (not a pointer opened with
 * orIpcOpenMemHandle, or closed already), orErrorNotPermitted (called from
 * inside a kernel, whose own stream it would wait for).
 * Related: orIpcOpenMemHandle. */
OPENREG_API orError_t orIpcCloseMemHandle(void* devPtr);
// LITERALINCLUDE END: OR_IPC_API

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* OPENREG_IPC_H */
