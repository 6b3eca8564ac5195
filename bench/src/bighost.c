/* bighost.exe - loads bigpdata.dll (a DLL with ~1,000,000 functions, each with its
 * own .pdata entry) and calls its exported bp_entry, which walks a chain of 16
 * functions spread across the whole table; the last reads through NULL.
 * Run under sample_dumps/bin/dumper.exe, which writes the dump (MiniDumpNormal).
 */
#include <windows.h>
#include <stdint.h>
#include <stdio.h>

#define NOINLINE __attribute__((noinline))

typedef int64_t (*entry_fn)(int64_t);

NOINLINE static int64_t call_into_big_dll(entry_fn fn)
{
    volatile int64_t r = fn(7);
    return r;
}

int main(void)
{
    HMODULE h = LoadLibraryA("bigpdata.dll");
    if (!h) {
        fprintf(stderr, "bighost: cannot load bigpdata.dll (%lu)\n", GetLastError());
        return 3;
    }
    entry_fn fn = (entry_fn)GetProcAddress(h, "bp_entry");
    if (!fn) {
        fprintf(stderr, "bighost: bp_entry not exported\n");
        return 3;
    }
    fprintf(stderr, "bighost: calling bp_entry\n");
    fflush(stderr);
    return (int)call_into_big_dll(fn);
}
