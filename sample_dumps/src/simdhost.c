/* simdhost.exe - host for simdkernels.dll, built like tfhost.exe (stand-in
 * for python.exe running a TensorFlow program).
 *
 *   simdhost.exe SCENARIO        (gp_misaligned_sse | gp_wild_pointer)
 *
 * Loads simdkernels.dll, starts a few idle "inter-op" worker threads, and
 * runs the scenario's kernel on a worker thread created with a 1 MiB stack
 * reserve.  Run under dumper.exe (out-of-process MiniDumpWriteDump).
 *
 * Unlike tfhost.exe, every other thread is parked before the kernel runs
 * (SignalObjectAndWait: signal "ready" and wait in one call), so the dump
 * never catches a thread half-started: these kernels crash within
 * microseconds, and a first try caught an idle thread still inside Wine's
 * thread start-up, which put ~1 MB of its stack into the dump.
 * A separate program so that tfhost.exe/opkernels.dll, on whose exact
 * TimeDateStamp/SizeOfImage the older dumps depend, stay untouched.
 */
#include <windows.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define NOINLINE __attribute__((noinline))

typedef float *(*alloc_f32_fn)(int64_t);
typedef int64_t (*kernel_ptr_i64)(void *, int64_t);
typedef void *(*builder_i64)(int64_t);
typedef void (*release_fn)(void *);

static HMODULE g_ops;
static const char *g_scenario;
static volatile int64_t g_result;

static FARPROC op(const char *name)
{
    FARPROC p = GetProcAddress(g_ops, name);
    if (!p) {
        fprintf(stderr, "simdhost: simdkernels!%s not found\n", name);
        ExitProcess(3);
    }
    return p;
}

/* -------------------------------------------------------------- scenarios */
NOINLINE static int64_t run_scenario(const char *s)
{
    int64_t r = 0;
    if (!strcmp(s, "gp_misaligned_sse")) {
        /* 64 floats in a buffer whose data is 8 bytes past a 16-byte boundary */
        float *x = ((alloc_f32_fn)op("tensor_alloc_f32"))(64);
        r = ((kernel_ptr_i64)op("bias_add_compute"))(x, 64);
    } else if (!strcmp(s, "gp_wild_pointer")) {
        /* use after free: the context is released (0xDD-filled), then used */
        void *ctx = ((builder_i64)op("op_context_create"))(7);
        ((release_fn)op("op_context_release"))(ctx);
        r = ((kernel_ptr_i64)op("matmul_compute"))(ctx, 256);
    } else {
        fprintf(stderr, "simdhost: unknown scenario %s\n", s);
        ExitProcess(2);
    }
    g_result = r;
    return r;
}

static HANDLE g_start_event;

static DWORD WINAPI op_worker_main(LPVOID arg)
{
    WaitForSingleObject(g_start_event, INFINITE);   /* main thread is parked */
    int64_t r = run_scenario((const char *)arg);
    g_result = r;
    return (DWORD)r;
}

static HANDLE g_idle_event;

static DWORD WINAPI idle_worker_main(LPVOID arg)
{
    /* arg = this thread's "ready" event */
    SignalObjectAndWait((HANDLE)arg, g_idle_event, INFINITE, FALSE);
    return 0;
}

static void name_thread(HANDLE h, const wchar_t *name)
{
    typedef HRESULT(WINAPI * set_desc_fn)(HANDLE, PCWSTR);
    set_desc_fn set_desc =
        (set_desc_fn)GetProcAddress(GetModuleHandleA("kernel32.dll"), "SetThreadDescription");
    if (!set_desc)
        set_desc = (set_desc_fn)GetProcAddress(GetModuleHandleA("kernelbase.dll"),
                                               "SetThreadDescription");
    if (set_desc)
        set_desc(h, name);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: simdhost SCENARIO\n");
        return 2;
    }
    g_scenario = argv[1];

    g_ops = LoadLibraryA("simdkernels.dll");
    if (!g_ops) {
        fprintf(stderr, "simdhost: cannot load simdkernels.dll (%lu)\n", GetLastError());
        return 3;
    }

    g_idle_event = CreateEventA(NULL, TRUE, FALSE, NULL);
    HANDLE ready[3];
    for (int i = 0; i < 3; i++) {
        wchar_t name[32];
        swprintf(name, 32, L"tf_inter_op_%d", i);
        ready[i] = CreateEventA(NULL, TRUE, FALSE, NULL);
        HANDLE h = CreateThread(NULL, 1 << 20, idle_worker_main, ready[i],
                                STACK_SIZE_PARAM_IS_A_RESERVATION, NULL);
        name_thread(h, name);
    }
    WaitForMultipleObjects(3, ready, TRUE, 60000);
    g_start_event = CreateEventA(NULL, TRUE, FALSE, NULL);

    SIZE_T reserve = 1u << 20;
    DWORD tid = 0;
    HANDLE worker = CreateThread(NULL, reserve, op_worker_main, (LPVOID)g_scenario,
                                 STACK_SIZE_PARAM_IS_A_RESERVATION, &tid);
    name_thread(worker, L"tf_op_worker");
    fprintf(stderr, "simdhost: pid %lu scenario %s worker tid %lu reserve %lu\n",
            GetCurrentProcessId(), g_scenario, tid, (unsigned long)reserve);
    fflush(stderr);
    /* release the worker and wait for it in one call: this thread is parked
     * in the wait before the kernel starts */
    SignalObjectAndWait(g_start_event, worker, 120000, FALSE);
    fprintf(stderr, "simdhost: worker returned without crashing\n");
    return 1;
}
