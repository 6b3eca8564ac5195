/* pdbhost.exe - host for pdbkernels.dll, built like it with clang + lld and a PDB.
 *
 *   pdbhost.exe pdb_static_cycle | pdb_static_fastfail
 *
 * Runs the scenario on a worker thread with a 1 MiB stack reserve (as tfhost.exe
 * does), under dumper.exe, which writes the dump.  run_scenario and
 * op_worker_main are static here: only pdbhost.pdb names them.
 */
#include <windows.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define NOINLINE __attribute__((noinline))

typedef int64_t (*kernel_ptr)(const char *);
typedef int64_t (*kernel_i64)(int64_t);

static HMODULE g_ops;
static volatile int64_t g_result;
static const char k_nested[] = "[[[[[[[[[[[[[[[[";  /* parse_value only looks at text[0] */

NOINLINE static int64_t run_scenario(const char *s)
{
    if (!strcmp(s, "pdb_static_cycle"))
        return ((kernel_ptr)(void *)GetProcAddress(g_ops, "parse_document"))(k_nested);
    if (!strcmp(s, "pdb_static_fastfail"))
        return ((kernel_i64)(void *)GetProcAddress(g_ops, "validate_shape"))(3);
    fprintf(stderr, "pdbhost: unknown scenario %s\n", s);
    ExitProcess(2);
}

NOINLINE static DWORD WINAPI op_worker_main(LPVOID arg)
{
    g_result = run_scenario((const char *)arg);
    return (DWORD)g_result;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: pdbhost SCENARIO\n");
        return 2;
    }
    g_ops = LoadLibraryA("pdbkernels.dll");
    if (!g_ops) {
        fprintf(stderr, "pdbhost: cannot load pdbkernels.dll (%lu)\n", GetLastError());
        return 3;
    }
    DWORD tid = 0;
    HANDLE worker = CreateThread(NULL, 1u << 20, op_worker_main, (LPVOID)argv[1],
                                 STACK_SIZE_PARAM_IS_A_RESERVATION, &tid);
    WaitForSingleObject(worker, 120000);
    fprintf(stderr, "pdbhost: worker returned without crashing\n");
    return 1;
}
