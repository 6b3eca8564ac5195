/* Environment stand-in DLLs: tiny DLLs named like the real Python / TensorFlow /
 * CUDA DLLs, each carrying a real VERSIONINFO resource (see *.rc) with
 * realistic version strings.  They contain no code of the real products.
 * With -DPYWRAP this builds the _pywrap_tensorflow_internal.pyd stand-in,
 * whose TFE_Execute fails a CHECK the way TensorFlow's LOG(FATAL) does on
 * Windows: abort() -> __fastfail(FAST_FAIL_FATAL_APP_EXIT). */
#include <windows.h>
#include <stdint.h>

#define EXPORT __declspec(dllexport) __attribute__((noinline))

volatile int64_t standin_sink;

EXPORT int standin_marker(void) { return 1; }

#ifdef PYWRAP
static __inline__ __attribute__((always_inline, noreturn)) void fast_fail(unsigned code)
{
    __asm__ __volatile__("int $0x29" : : "c"(code) : "memory");
    __builtin_unreachable();
}

EXPORT void tensorflow_check_failed(const char *msg)
{
    standin_sink = (int64_t)(uintptr_t)msg;
    fast_fail(7); /* FAST_FAIL_FATAL_APP_EXIT: what abort() does */
}

EXPORT int64_t TFE_Execute(int64_t ndim)
{
    if (ndim != 4)
        tensorflow_check_failed("Check failed: input.dims() == 4");
    standin_sink = ndim;
    return ndim + 1;
}

EXPORT void *PyInit__pywrap_tensorflow_internal(void) { return NULL; }
#endif

BOOL WINAPI DllMain(HINSTANCE h, DWORD r, LPVOID p) { (void)h; (void)r; (void)p; return TRUE; }
