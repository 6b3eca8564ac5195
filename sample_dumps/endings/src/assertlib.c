/* assertlib.dll - a tiny native helper whose exported function checks its arguments with
 * the C runtime's own assert(), as a release build that kept asserts (no NDEBUG) does.
 *
 * Built with mingw-w64 against the Universal C Runtime, the way MSVC builds it:
 *   x86_64-w64-mingw32-gcc -O2 -fno-optimize-sibling-calls -g0 -DUNICODE -D_UNICODE \
 *       -shared -nostdlib -e DllMain -o bin/assertlib.dll src/assertlib.c -lucrt -lkernel32
 * so assert() is `_wassert(L"expr", L"file", line)` imported from
 * api-ms-win-crt-runtime-l1-1-0.dll (ucrtbase), the same C runtime python3X.dll uses; no
 * custom handler. _wassert prints "Assertion failed: rows > 0 && cols > 0, file
 * src/assertlib.c, line NN" to stderr and calls abort(): exit code 3 under Wine.
 */
#include <windows.h>
#include <assert.h>

BOOL WINAPI DllMain(HINSTANCE instance, DWORD reason, LPVOID reserved)
{
    (void)instance; (void)reason; (void)reserved;
    return TRUE;
}

/* fills out[rows * cols] with row-major indices; rows and cols must be positive */
__declspec(dllexport) __attribute__((noinline)) int al_fill_matrix(int *out, int rows, int cols)
{
    assert(rows > 0 && cols > 0);
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++)
            out[r * cols + c] = r * cols + c;
    return rows * cols;
}
