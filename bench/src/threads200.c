/* threads200.exe - a process with many blocked threads that then crashes.
 *
 *   threads200.exe [N]      (default N = 200)
 *
 * Starts N worker threads (64 KiB stack reservation each), every one of which
 * goes through a few real frames (pool_worker_main -> wait_for_work ->
 * WaitForSingleObject) and blocks on an event that is never set. When all N
 * have checked in, the main thread dereferences a NULL pointer inside
 * dispatch_op. Run under sample_dumps/bin/dumper.exe, which writes the dump
 * (MiniDumpNormal) on the first-chance access violation: N + 1 threads.
 */
#include <windows.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define NOINLINE __attribute__((noinline))

static HANDLE g_never;          /* never signalled: workers block on it forever */
static HANDLE g_all_started;
static volatile LONG g_started;
static LONG g_n;

struct op { int64_t kind; int64_t dims[4]; };

NOINLINE static int64_t wait_for_work(int64_t id)
{
    volatile int64_t keep = id;
    if (InterlockedIncrement(&g_started) == g_n)
        SetEvent(g_all_started);
    WaitForSingleObject(g_never, INFINITE);
    return keep;
}

static DWORD WINAPI pool_worker_main(LPVOID arg)
{
    return (DWORD)wait_for_work((int64_t)(intptr_t)arg);
}

NOINLINE static int64_t dispatch_op(const struct op *o)
{
    return o->dims[1] * 2;   /* o == NULL: access violation reading 0x10 */
}

NOINLINE static int64_t run_graph(const struct op *o)
{
    volatile int64_t r = dispatch_op(o);
    return r + 1;
}

int main(int argc, char **argv)
{
    g_n = argc > 1 ? atol(argv[1]) : 200;
    g_never = CreateEventA(NULL, TRUE, FALSE, NULL);
    g_all_started = CreateEventA(NULL, TRUE, FALSE, NULL);
    for (LONG i = 0; i < g_n; i++) {
        HANDLE h = CreateThread(NULL, 64 << 10, pool_worker_main, (LPVOID)(intptr_t)i,
                                STACK_SIZE_PARAM_IS_A_RESERVATION, NULL);
        if (!h) {
            fprintf(stderr, "threads200: CreateThread %ld failed (%lu)\n", i, GetLastError());
            return 3;
        }
        CloseHandle(h);
    }
    if (WaitForSingleObject(g_all_started, 60000) != WAIT_OBJECT_0) {
        fprintf(stderr, "threads200: only %ld of %ld threads started\n", g_started, g_n);
        return 4;
    }
    fprintf(stderr, "threads200: %ld threads blocked; crashing\n", g_n);
    fflush(stderr);
    return (int)run_graph(NULL);
}
