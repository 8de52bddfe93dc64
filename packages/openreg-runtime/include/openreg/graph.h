/*
 * graph.h - stream capture and graphs, part of the C API of openreg.h (which
 * includes this file; include openreg.h, not this). Like CUDA graphs: work
 * queued on a capturing stream is recorded, then launched again as a whole.
 * Not here: anything that changes a recorded graph after capture.
 */
#ifndef OPENREG_GRAPH_H
#define OPENREG_GRAPH_H

#include "openreg/openreg.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Stream capture and graphs                                                 */
/* ------------------------------------------------------------------------ */

/* What a capture forbids besides work on the capturing stream itself, which
 * every mode forbids to wait for (synchronise, query, pageable copies):
 * "unsafe" calls are those that wait for a whole device (orDeviceSynchronize,
 * orMemcpy, orMemset, orFree). */
typedef enum orStreamCaptureMode {
  orStreamCaptureModeGlobal = 0,      /* unsafe calls fail on every thread */
  orStreamCaptureModeThreadLocal = 1, /* ... on the capturing thread only */
  orStreamCaptureModeRelaxed = 2      /* unsafe calls are allowed */
} orStreamCaptureMode;

typedef enum orStreamCaptureStatus {
  orStreamCaptureStatusNone = 0,       /* not capturing */
  orStreamCaptureStatusActive = 1,     /* capturing */
  orStreamCaptureStatusInvalidated = 2 /* capturing, but a forbidden call failed it */
} orStreamCaptureStatus;

/* Starts capturing stream: until orStreamEndCapture, kernels, copies and
 * memsets queued on it are recorded into a graph instead of run, and the
 * queueing call returns orSuccess at once. A forbidden call (see
 * orStreamCaptureMode) returns orErrorStreamCaptureUnsupported and
 * invalidates the capture; the stream stays usable once the capture ends.
 * Recording or waiting for events on a capturing stream is forbidden too:
 * a graph holds the work of one stream.
 *   stream  in: a stream from orStreamCreate (default streams cannot capture)
 *   mode    in
 * Returns orSuccess, orErrorInvalidValue (unknown mode),
 * orErrorInvalidResourceHandle, orErrorStreamCaptureUnsupported (a default
 * stream), orErrorNotPermitted (the stream captures already).
 * Related: orStreamEndCapture, orStreamIsCapturing. */
OPENREG_API orError_t orStreamBeginCapture(orStream_t stream, orStreamCaptureMode mode);

/* Ends the capture of stream. On success writes a new graph holding the
 * recorded work, which the caller owns (orGraphDestroy). If the capture was
 * invalidated, writes NULL, discards the recorded work and returns
 * orErrorStreamCaptureInvalidated with the reason; either way the stream
 * captures no more.
 *   graph   out
 *   stream  in
 * Returns orSuccess, orErrorInvalidValue (graph is NULL),
 * orErrorInvalidResourceHandle, orErrorNotPermitted (not capturing),
 * orErrorStreamCaptureInvalidated.
 * Outputs last, as CUDA's cudaStreamEndCapture. Related: orStreamBeginCapture, orGraphInstantiate. */
OPENREG_API orError_t orStreamEndCapture(orStream_t stream, orGraph_t* graph);

/* Writes whether stream is capturing.
 *   status  out
 *   stream  in
 * Returns orSuccess, orErrorInvalidValue (status is NULL),
 * orErrorInvalidResourceHandle.
 * Outputs last, as CUDA's cudaStreamIsCapturing. Related: orStreamBeginCapture. */
OPENREG_API orError_t orStreamIsCapturing(orStream_t stream, orStreamCaptureStatus* status);

/* Writes the number of operations (kernels, copies, memsets) in a graph.
 *   graph  in
 *   count  out
 * Returns orSuccess, orErrorInvalidValue, orErrorInvalidResourceHandle.
 * Outputs last, as CUDA's cudaGraphGetNodes. Related: orGraphDebugDotPrint. */
OPENREG_API orError_t orGraphGetNodeCount(orGraph_t graph, size_t* count);

/* Writes a text description of a graph to the file at path: one line per
 * operation, in launch order, with its kind, name and operands.
 *   graph  in
 *   path   in: the file to write, replaced if it exists
 * Returns orSuccess, orErrorInvalidValue (path NULL or not writable),
 * orErrorInvalidResourceHandle.
 * Related: orGraphGetNodeCount. */
OPENREG_API orError_t orGraphDebugDotPrint(orGraph_t graph, const char* path);

/* Makes a launchable graph from graph. The two are independent afterwards:
 * either may be destroyed first.
 *   exec   out: owned by the caller (orGraphExecDestroy)
 *   graph  in
 * Returns orSuccess, orErrorInvalidValue, orErrorInvalidResourceHandle.
 * Related: orGraphLaunch, orGraphExecDestroy. */
OPENREG_API orError_t orGraphInstantiate(orGraphExec_t* exec, orGraph_t graph);

/* Queues every operation of exec on stream, in captured order, and returns
 * at once; the operations run on the stream's worker with the arguments
 * they were captured with (so they read and write the same memory). The
 * kernels' userData stays owned by the graph: destroying the graph while
 * a launch is queued is safe, and orGraphExecDestroy waits for the launch.
 *   exec    in
 *   stream  in: not a capturing stream
 * Returns orSuccess, orErrorInvalidResourceHandle,
 * orErrorStreamCaptureUnsupported (stream is capturing), or a sticky error.
 * Related: orGraphInstantiate. */
OPENREG_API orError_t orGraphLaunch(orGraphExec_t exec, orStream_t stream);

/* Destroys a launchable graph, after waiting for its queued launches to
 * finish (their kernels use the graph's userData).
 *   exec  in, may be NULL
 * Returns orSuccess, orErrorInvalidResourceHandle.
 * Related: orGraphInstantiate. */
OPENREG_API orError_t orGraphExecDestroy(orGraphExec_t exec);

/* Destroys a graph. Its kernels' userData is released (orLaunchKernelWithRelease)
 * once neither it nor any graph instantiated from it, nor a queued launch,
 * still needs it.
 *   graph  in, may be NULL
 * Returns orSuccess, orErrorInvalidResourceHandle.
 * Related: orStreamEndCapture, orGraphExecDestroy. */
OPENREG_API orError_t orGraphDestroy(orGraph_t graph);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* OPENREG_GRAPH_H */
