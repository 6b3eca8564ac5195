/* tfhost.exe - stand-in for python.exe running a TensorFlow program.
 *
 *   tfhost.exe SCENARIO [--self-dump OUT.dmp]
 *
 * Loads opkernels.dll, starts a few idle "inter-op" worker threads, and runs
 * the scenario's kernel on a worker thread created with a known stack
 * reserve (1 MiB, 64 MiB for deep_recursion_1m).  Normally run under
 * dumper.exe (an out-of-process debugger that writes the dump).  With
 * --self-dump, an in-process vectored handler + pre-created watchdog thread
 * write the dump instead (the only in-process way that survives a stack
 * overflow under Wine).
 */
#include <windows.h>
#include <dbghelp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* deep_recursion_1m's stack reserve; bench/build_inputs.py builds a larger one (deep1400k) */
#ifndef DEEP_RESERVE_MIB
#define DEEP_RESERVE_MIB 64
#endif

#define NOINLINE __attribute__((noinline))

typedef int64_t (*kernel_i64)(int64_t);
typedef int64_t (*kernel_i64_i64)(int64_t, int64_t);
typedef int64_t (*kernel_ptr)(const void *);
typedef int64_t (*kernel_ptr_i64)(const void *, int64_t);
typedef void *(*builder_i64)(int64_t);

static HMODULE g_ops;
static const char *g_scenario;
static volatile int64_t g_result;

static FARPROC op(const char *name)
{
    FARPROC p = GetProcAddress(g_ops, name);
    if (!p) {
        fprintf(stderr, "tfhost: opkernels!%s not found\n", name);
        ExitProcess(3);
    }
    return p;
}

/* ------------------------------------------------------------- self dump */
static HANDLE g_crash_event, g_dump_file;
static EXCEPTION_POINTERS *volatile g_crash_ptrs;
static volatile DWORD g_crash_tid;

static DWORD WINAPI watchdog_main(LPVOID arg)
{
    (void)arg;
    WaitForSingleObject(g_crash_event, INFINITE);
    MINIDUMP_EXCEPTION_INFORMATION mei;
    mei.ThreadId = g_crash_tid;
    mei.ExceptionPointers = g_crash_ptrs;
    mei.ClientPointers = TRUE;
    BOOL ok = MiniDumpWriteDump(GetCurrentProcess(), GetCurrentProcessId(), g_dump_file,
                                MiniDumpNormal, &mei, NULL, NULL);
    CloseHandle(g_dump_file);
    fprintf(stderr, "tfhost: self-dump %s (code 0x%08lx)\n", ok ? "written" : "FAILED",
            g_crash_ptrs->ExceptionRecord->ExceptionCode);
    fflush(stderr);
    TerminateProcess(GetCurrentProcess(), g_crash_ptrs->ExceptionRecord->ExceptionCode);
    return 0;
}

static LONG CALLBACK crash_veh(EXCEPTION_POINTERS *ep)
{
    DWORD code = ep->ExceptionRecord->ExceptionCode;
    if (code != EXCEPTION_STACK_OVERFLOW && code != EXCEPTION_ACCESS_VIOLATION &&
        code != EXCEPTION_ILLEGAL_INSTRUCTION && code != 0xC0000409)
        return EXCEPTION_CONTINUE_SEARCH;
    /* almost no stack left: only signal the watchdog and wait */
    g_crash_ptrs = ep;
    g_crash_tid = GetCurrentThreadId();
    SetEvent(g_crash_event);
    for (;;)
        Sleep(INFINITE);
}

/* ------------------------------------------------------- environment stand-ins */
static const char *const k_env_dlls[] = {
    "env\\Python310\\python310.dll",
    "env\\NVIDIA GPU Computing Toolkit\\CUDA\\v11.2\\bin\\cudart64_110.dll",
    "env\\NVIDIA GPU Computing Toolkit\\CUDA\\v11.2\\bin\\cublas64_11.dll",
    "env\\NVIDIA GPU Computing Toolkit\\CUDA\\v11.2\\bin\\cudnn64_8.dll",
    "env\\Windows\\System32\\nvcuda.dll",
    "env\\Python310\\Lib\\site-packages\\tensorflow\\python\\_pywrap_tensorflow_internal.pyd",
};
static HMODULE g_pywrap;

static void load_env_standins(void)
{
    char dir[MAX_PATH], path[MAX_PATH * 2];
    GetModuleFileNameA(NULL, dir, MAX_PATH);
    char *slash = strrchr(dir, '\\');
    if (slash) slash[1] = 0;
    for (size_t i = 0; i < sizeof k_env_dlls / sizeof k_env_dlls[0]; i++) {
        snprintf(path, sizeof path, "%s%s", dir, k_env_dlls[i]);
        HMODULE h = LoadLibraryExA(path, NULL, LOAD_WITH_ALTERED_SEARCH_PATH);
        if (!h) {
            fprintf(stderr, "tfhost: cannot load %s (%lu)\n", path, GetLastError());
            ExitProcess(4);
        }
        if (i == sizeof k_env_dlls / sizeof k_env_dlls[0] - 1)
            g_pywrap = h;
    }
}

/* -------------------------------------------------------------- scenarios */
NOINLINE static int64_t run_scenario(const char *s)
{
    int64_t r = 0;
    if (!strcmp(s, "recursion_one"))
        r = ((kernel_i64_i64)op("visit"))(0, 0);
    else if (!strcmp(s, "recursion_cycle3"))
        r = ((kernel_i64_i64)op("visit"))(0, 1);
    else if (!strcmp(s, "big_frame"))
        r = ((kernel_i64)op("conv_big_kernel"))(1);
    else if (!strcmp(s, "tree_free")) {
        void *root = ((builder_i64)op("tree_build_chain"))(1000000);
        r = ((kernel_ptr)op("tree_free"))(root);
    } else if (!strcmp(s, "fastfail_abort"))
        r = ((kernel_i64)op("op_compute"))(3);
    else if (!strcmp(s, "fastfail_gs")) {
        static char payload[96];
        memset(payload, 'A', sizeof payload);
        r = ((kernel_ptr_i64)op("gs_check_fail"))(payload, 80);
    } else if (!strcmp(s, "heap_oob"))
        r = ((kernel_i64)op("heap_oob_write"))(1 << 20);
    else if (!strcmp(s, "null_deref"))
        r = ((kernel_ptr)op("null_deref"))(NULL);
    else if (!strcmp(s, "illegal_instruction"))
        r = ((kernel_i64)op("illegal_instruction"))(42);
    else if (!strcmp(s, "deep_recursion_1m"))
        r = ((kernel_i64)op("descend"))(0);
    else if (!strcmp(s, "tf_env_abort")) {
        kernel_i64 fn = (kernel_i64)GetProcAddress(g_pywrap, "TFE_Execute");
        r = fn ? fn(3) : -1;
    } else {
        fprintf(stderr, "tfhost: unknown scenario %s\n", s);
        ExitProcess(2);
    }
    g_result = r;
    return r;
}

static DWORD WINAPI op_worker_main(LPVOID arg)
{
    int64_t r = run_scenario((const char *)arg);
    g_result = r;
    return (DWORD)r;
}

static HANDLE g_idle_event;

static DWORD WINAPI idle_worker_main(LPVOID arg)
{
    (void)arg;
    WaitForSingleObject(g_idle_event, INFINITE);
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
        fprintf(stderr, "usage: tfhost SCENARIO [--self-dump OUT.dmp]\n");
        return 2;
    }
    g_scenario = argv[1];
    if (argc >= 4 && !strcmp(argv[2], "--self-dump")) {
        g_dump_file = CreateFileA(argv[3], GENERIC_WRITE, 0, NULL, CREATE_ALWAYS,
                                  FILE_ATTRIBUTE_NORMAL, NULL);
        if (g_dump_file == INVALID_HANDLE_VALUE) {
            fprintf(stderr, "tfhost: cannot create %s\n", argv[3]);
            return 2;
        }
        g_crash_event = CreateEventA(NULL, TRUE, FALSE, NULL);
        HANDLE w = CreateThread(NULL, 256 << 10, watchdog_main, NULL, 0, NULL);
        name_thread(w, L"crash_watchdog");
        AddVectoredExceptionHandler(1, crash_veh);
    }

    if (!strcmp(g_scenario, "tf_env_abort"))
        load_env_standins();

    g_ops = LoadLibraryA("opkernels.dll");
    if (!g_ops) {
        fprintf(stderr, "tfhost: cannot load opkernels.dll (%lu)\n", GetLastError());
        return 3;
    }

    g_idle_event = CreateEventA(NULL, TRUE, FALSE, NULL);
    for (int i = 0; i < 3; i++) {
        wchar_t name[32];
        swprintf(name, 32, L"tf_inter_op_%d", i);
        HANDLE h = CreateThread(NULL, 1 << 20, idle_worker_main, NULL,
                                STACK_SIZE_PARAM_IS_A_RESERVATION, NULL);
        name_thread(h, name);
    }

    SIZE_T reserve = !strcmp(g_scenario, "deep_recursion_1m") ? ((SIZE_T)DEEP_RESERVE_MIB << 20) : (1u << 20);
    DWORD tid = 0;
    HANDLE worker = CreateThread(NULL, reserve, op_worker_main, (LPVOID)g_scenario,
                                 STACK_SIZE_PARAM_IS_A_RESERVATION, &tid);
    name_thread(worker, L"tf_op_worker");
    fprintf(stderr, "tfhost: pid %lu scenario %s worker tid %lu reserve %lu\n",
            GetCurrentProcessId(), g_scenario, tid, (unsigned long)reserve);
    fflush(stderr);
    WaitForSingleObject(worker, 120000);
    fprintf(stderr, "tfhost: worker returned without crashing\n");
    return 1;
}
