/* cudart64_110.dll stand-in - an OLD CUDA 11.0 runtime (version resource: src/cudart_old.rc).
 * It exports cudaRuntimeGetVersion (11000, success) and NOT cudaMallocAsync, which CUDA 11.2
 * added: gpuext.pyd's delay-loaded cudaMallocAsync then finds the DLL but not the function
 * (0xC06D007F). No code of the real product.
 *
 *   x86_64-w64-mingw32-windres src/cudart_old.rc -O coff -o $CACHE/cudart_old.res
 *   x86_64-w64-mingw32-gcc -O2 -fno-optimize-sibling-calls -g0 -shared -nostdlib \
 *       -e DllMain -o bin/cudart64_110.dll src/cudart_old.c $CACHE/cudart_old.res -lkernel32
 */
#include <windows.h>

BOOL WINAPI DllMain(HINSTANCE instance, DWORD reason, LPVOID reserved)
{
    (void)instance; (void)reason; (void)reserved;
    return TRUE;
}

/* CUDA 11.0: 1000 * major + 10 * minor */
__declspec(dllexport) __attribute__((noinline)) int cudaRuntimeGetVersion(int *runtime_version)
{
    *runtime_version = 11000;
    return 0; /* cudaSuccess */
}
