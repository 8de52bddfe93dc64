/*
 * vector_add.c - a complete OpenReg program in C, using only openreg.h.
 *
 * Allocates three vectors on the device, copies the inputs over (one from
 * pinned memory, asynchronously), adds them in a kernel that reaches device
 * memory through orKernelTranslatePointer, times the kernel with events,
 * copies the result back and checks it. It also checks a few error paths:
 * an interior free, the last-error calls, and a faulting kernel whose
 * sticky error orDeviceReset clears.
 *
 * Build:  cc -std=c11 vector_add.c -I<include> -L<libdir> -lopenreg \
 *             -Wl,-rpath,<libdir>
 * Prints one line starting with "vector_add: OK" and returns 0 on success.
 */
#include <openreg/openreg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 100000

#define CHECK(call)                                                          \
  do {                                                                       \
    orError_t status_ = (call);                                              \
    if (status_ != orSuccess) {                                              \
      fprintf(stderr, "vector_add: %s failed at line %d: %s: %s\n", #call,   \
              __LINE__, orGetErrorName(status_), orGetLastErrorMessage());   \
      return 1;                                                              \
    }                                                                        \
  } while (0)

#define EXPECT(cond)                                                         \
  do {                                                                       \
    if (!(cond)) {                                                           \
      fprintf(stderr, "vector_add: expectation failed at line %d: %s\n",    \
              __LINE__, #cond);                                              \
      return 1;                                                              \
    }                                                                        \
  } while (0)

typedef struct {
  const float* a; /* device pointers */
  const float* b;
  float* c;
  size_t n;
} AddArgs;

/* The kernel: c = a + b. It may touch device memory only through the host
 * aliases that orKernelTranslatePointer hands out. */
static orError_t vector_add(void* data) {
  const AddArgs* args = (const AddArgs*)data;
  size_t bytes = args->n * sizeof(float);
  void *a, *b, *c;
  orError_t status;
  if ((status = orKernelTranslatePointer(&a, args->a, bytes)) != orSuccess) return status;
  if ((status = orKernelTranslatePointer(&b, args->b, bytes)) != orSuccess) return status;
  if ((status = orKernelTranslatePointer(&c, args->c, bytes)) != orSuccess) return status;
  for (size_t i = 0; i < args->n; ++i) {
    ((float*)c)[i] = ((const float*)a)[i] + ((const float*)b)[i];
  }
  return orSuccess;
}

/* A faulty kernel: it reaches one element past the end of its vector. */
static orError_t overrun(void* data) {
  const AddArgs* args = (const AddArgs*)data;
  void* c;
  return orKernelTranslatePointer(&c, args->c, (args->n + 1000) * sizeof(float));
}

int main(void) {
  int version = 0, count = 0;
  CHECK(orRuntimeGetVersion(&version));
  EXPECT(version == OPENREG_VERSION);
  CHECK(orGetDeviceCount(&count));
  EXPECT(count >= 1);
  CHECK(orSetDevice(0));

  const size_t bytes = N * sizeof(float);
  float* hostA = malloc(bytes); /* pageable */
  float* hostB = NULL;          /* pinned */
  float* hostC = malloc(bytes);
  EXPECT(hostA != NULL && hostC != NULL);
  CHECK(orMallocHost((void**)&hostB, bytes));
  for (int i = 0; i < N; ++i) {
    hostA[i] = (float)i;
    hostB[i] = 2.0f * (float)i + 0.5f;
  }

  float *devA, *devB, *devC;
  CHECK(orMalloc((void**)&devA, bytes));
  CHECK(orMalloc((void**)&devB, bytes));
  CHECK(orMalloc((void**)&devC, bytes));

  orStream_t stream;
  orEvent_t start, stop;
  CHECK(orStreamCreate(&stream));
  CHECK(orEventCreate(&start));
  CHECK(orEventCreate(&stop));

  CHECK(orMemcpy(devA, hostA, bytes, orMemcpyHostToDevice));
  CHECK(orMemcpyAsync(devB, hostB, bytes, orMemcpyHostToDevice, stream));
  CHECK(orMemsetAsync(devC, 0xFF, bytes, stream));

  AddArgs args = {devA, devB, devC, N};
  CHECK(orEventRecord(start, stream));
  CHECK(orLaunchKernel(stream, vector_add, &args, "vector_add"));
  CHECK(orEventRecord(stop, stream));
  CHECK(orMemcpyAsync(hostC, devC, bytes, orMemcpyDeviceToHost, stream));
  CHECK(orEventSynchronize(stop));
  CHECK(orStreamSynchronize(stream));
  EXPECT(orStreamQuery(stream) == orSuccess);

  float ms = -1.0f;
  CHECK(orEventElapsedTime(&ms, start, stop));
  EXPECT(ms >= 0.0f);

  int mismatches = 0;
  for (int i = 0; i < N; ++i) {
    if (hostC[i] != 3.0f * (float)i + 0.5f) ++mismatches;
  }
  EXPECT(mismatches == 0);

  /* Error paths: an interior pointer cannot be freed. */
  EXPECT(orFree(devA + 1) == orErrorInvalidDevicePointer);
  EXPECT(strstr(orGetLastErrorMessage(), "not the start of a live allocation") != NULL);
  EXPECT(orPeekAtLastError() == orErrorInvalidDevicePointer);
  EXPECT(orGetLastError() == orErrorInvalidDevicePointer);
  EXPECT(orGetLastError() == orSuccess);
  EXPECT(orSetDevice(count) == orErrorInvalidDevice);
  EXPECT(orMemcpy(hostC, devA, bytes, orMemcpyHostToDevice) == orErrorInvalidMemcpyDirection);
  void* alias = NULL;
  EXPECT(orKernelTranslatePointer(&alias, devA, 4) == orErrorNotPermitted);
  EXPECT(alias == NULL); /* outputs are written only on success */
  EXPECT(strcmp(orGetErrorName(orErrorIllegalAddress), "orErrorIllegalAddress") == 0);

  /* A faulting kernel leaves a sticky error naming it, until a reset. */
  CHECK(orLaunchKernel(stream, overrun, &args, "overrun_kernel"));
  EXPECT(orStreamSynchronize(stream) == orErrorIllegalAddress);
  EXPECT(strstr(orGetLastErrorMessage(), "overrun_kernel") != NULL);
  EXPECT(orLaunchKernel(stream, vector_add, &args, "refused") == orErrorIllegalAddress);
  EXPECT(orDeviceSynchronize() == orErrorIllegalAddress);
  CHECK(orDeviceReset());
  CHECK(orDeviceSynchronize());

  CHECK(orEventDestroy(start));
  CHECK(orEventDestroy(stop));
  CHECK(orStreamDestroy(stream));
  EXPECT(orStreamDestroy(stream) == orErrorInvalidResourceHandle);
  CHECK(orFree(devA));
  CHECK(orFree(devB));
  CHECK(orFree(devC));
  CHECK(orFreeHost(hostB));
  size_t freeBytes = 0, totalBytes = 0;
  CHECK(orMemGetInfo(&freeBytes, &totalBytes));
  EXPECT(freeBytes == totalBytes);
  free(hostA);
  free(hostC);

  printf("vector_add: OK n=%d c[%d]=%.1f version=%d\n", N, N - 1,
         3.0 * (N - 1) + 0.5, version);
  return 0;
}
