/*
 * ipc_pair.c - two processes sharing device memory through openreg.h's IPC
 * calls, in C. Not a collective library: just the handshake one is built on.
 *
 * The program forks before either process touches the runtime (a child
 * forked after initialisation cannot use it, as with CUDA). The parent
 * allocates a buffer, fills it and sends its orIpcMemHandle_t through a pipe;
 * the child opens it, copies it device-to-device into its own allocation,
 * adds its own buffer into the parent's in a kernel (a reduction across
 * processes), closes the handle and reports through a second pipe; the parent
 * checks the sums. It also checks that a process cannot open its own handle.
 *
 * Build:  cc -std=c11 ipc_pair.c -I<include> -L<libdir> -lopenreg \
 *             -Wl,-rpath,<libdir>
 * Prints one line starting with "ipc_pair: OK" and returns 0 on success.
 */
#define _POSIX_C_SOURCE 200809L
#include <openreg/openreg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define N 65536

#define CHECK(call)                                                          \
  do {                                                                       \
    orError_t status_ = (call);                                              \
    if (status_ != orSuccess) {                                              \
      fprintf(stderr, "ipc_pair: %s failed at line %d: %s: %s\n", #call,     \
              __LINE__, orGetErrorName(status_), orGetLastErrorMessage());   \
      return 1;                                                              \
    }                                                                        \
  } while (0)

#define EXPECT(cond)                                                         \
  do {                                                                       \
    if (!(cond)) {                                                           \
      fprintf(stderr, "ipc_pair: expectation failed at line %d: %s\n",      \
              __LINE__, #cond);                                              \
      return 1;                                                              \
    }                                                                        \
  } while (0)

typedef struct {
  float* total;        /* the parent's buffer, opened in the child */
  const float* addend; /* the child's own buffer */
  size_t n;
} AddArgs;

/* total += addend, both reached through translation. */
static orError_t add_into(void* data) {
  const AddArgs* args = (const AddArgs*)data;
  void *total, *addend;
  orError_t status;
  size_t bytes = args->n * sizeof(float);
  if ((status = orKernelTranslatePointer(&total, args->total, bytes)) != orSuccess) return status;
  if ((status = orKernelTranslatePointer(&addend, args->addend, bytes)) != orSuccess) return status;
  for (size_t i = 0; i < args->n; ++i) ((float*)total)[i] += ((const float*)addend)[i];
  return orSuccess;
}

static int child(int from_parent, int to_parent) {
  static float host[N];
  orIpcMemHandle_t handle;
  EXPECT(read(from_parent, &handle, sizeof(handle)) == (ssize_t)sizeof(handle));
  // LITERALINCLUDE START: OR_IPC_C_IMPORT
  void* shared = NULL;
  CHECK(orIpcOpenMemHandle(&shared, handle, 0));
  void* mine = NULL;
  CHECK(orMalloc(&mine, N * sizeof(float)));
  CHECK(orMemcpy(mine, shared, N * sizeof(float), orMemcpyDeviceToDevice));
  // LITERALINCLUDE END: OR_IPC_C_IMPORT
  CHECK(orMemcpy(host, mine, sizeof(host), orMemcpyDeviceToHost));
  for (size_t i = 0; i < N; ++i) EXPECT(host[i] == (float)i);
  for (size_t i = 0; i < N; ++i) host[i] = 0.5f;
  CHECK(orMemcpy(mine, host, sizeof(host), orMemcpyHostToDevice));
  AddArgs args = {(float*)shared, (const float*)mine, N};
  CHECK(orLaunchKernel(NULL, add_into, &args, "add_into"));
  CHECK(orDeviceSynchronize());  // done before the parent is told
  CHECK(orIpcCloseMemHandle(shared));
  CHECK(orFree(mine));
  char done = 1;
  EXPECT(write(to_parent, &done, 1) == 1);
  return 0;
}

static int parent(int to_child, int from_child, pid_t pid) {
  static float host[N];
  for (size_t i = 0; i < N; ++i) host[i] = (float)i;
  // LITERALINCLUDE START: OR_IPC_C_EXPORT
  void* buffer = NULL;
  CHECK(orMalloc(&buffer, N * sizeof(float)));
  CHECK(orMemcpy(buffer, host, sizeof(host), orMemcpyHostToDevice));
  orIpcMemHandle_t handle;
  CHECK(orIpcGetMemHandle(&handle, buffer));
  EXPECT(write(to_child, &handle, sizeof(handle)) == (ssize_t)sizeof(handle));
  // LITERALINCLUDE END: OR_IPC_C_EXPORT
  void* own = NULL;
  EXPECT(orIpcOpenMemHandle(&own, handle, 0) == orErrorNotPermitted);
  EXPECT(orGetLastError() == orErrorNotPermitted);
  char done = 0;
  EXPECT(read(from_child, &done, 1) == 1 && done == 1);
  int status = 0;
  EXPECT(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
  CHECK(orMemcpy(host, buffer, sizeof(host), orMemcpyDeviceToHost));
  for (size_t i = 0; i < N; ++i) EXPECT(host[i] == (float)i + 0.5f);
  CHECK(orFree(buffer));
  printf("ipc_pair: OK n=%d host[%d]=%.1f\n", N, N - 1, host[N - 1]);
  return 0;
}

int main(void) {
  int down[2], up[2];
  EXPECT(pipe(down) == 0 && pipe(up) == 0);
  pid_t pid = fork();  // before any runtime call: both processes may use it
  EXPECT(pid >= 0);
  if (pid == 0) {
    close(down[1]);
    close(up[0]);
    _exit(child(down[0], up[1]));
  }
  close(down[0]);
  close(up[1]);
  int result = parent(down[1], up[0], pid);
  if (result != 0) kill(pid, SIGKILL);  // never leave the child waiting on a pipe
  return result;
}
