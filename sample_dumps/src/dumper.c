/* dumper.exe - a minimal out-of-process crash reporter (like procdump -e 1).
 *
 *   dumper.exe OUT.dmp [--full] PROGRAM [ARGS...]
 *
 * Starts PROGRAM under CreateProcess(DEBUG_ONLY_THIS_PROCESS), runs the
 * WaitForDebugEvent / ContinueDebugEvent loop, and on the first-chance
 * exception event of a fatal code (stack overflow, fail-fast, access
 * violation, illegal instruction, ...) or on any second-chance exception,
 * reads the faulting thread's CONTEXT with GetThreadContext, calls dbghelp's
 * MiniDumpWriteDump on the debuggee with MINIDUMP_EXCEPTION_INFORMATION
 * (ClientPointers = FALSE: the record and context live in this process),
 * then terminates the debuggee.
 *
 * First chance is used on purpose: a stack-overflowed thread has no stack
 * left to run the debuggee's unhandled-exception filter on, and __fastfail
 * must not be continued.
 */
#include <windows.h>
#include <dbghelp.h>
#include <stdio.h>
#include <string.h>

#define MAX_THREADS 256
static struct { DWORD tid; HANDLE h; } g_threads[MAX_THREADS];

static void add_thread(DWORD tid, HANDLE h)
{
    for (int i = 0; i < MAX_THREADS; i++)
        if (!g_threads[i].tid) { g_threads[i].tid = tid; g_threads[i].h = h; return; }
}
static HANDLE find_thread(DWORD tid)
{
    for (int i = 0; i < MAX_THREADS; i++)
        if (g_threads[i].tid == tid) return g_threads[i].h;
    return NULL;
}
static void del_thread(DWORD tid)
{
    for (int i = 0; i < MAX_THREADS; i++)
        if (g_threads[i].tid == tid) { g_threads[i].tid = 0; g_threads[i].h = NULL; }
}

static int is_fatal(DWORD code)
{
    switch (code) {
    case 0xC00000FD: /* STATUS_STACK_OVERFLOW */
    case 0xC0000409: /* STATUS_STACK_BUFFER_OVERRUN (fail-fast) */
    case 0xC0000005: /* STATUS_ACCESS_VIOLATION */
    case 0xC000001D: /* STATUS_ILLEGAL_INSTRUCTION */
    case 0xC0000374: /* STATUS_HEAP_CORRUPTION */
    case 0xC0000602: /* STATUS_FAIL_FAST_EXCEPTION */
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: dumper OUT.dmp [--full] PROGRAM [ARGS...]\n");
        return 2;
    }
    const char *out = argv[1];
    int argi = 2;
    MINIDUMP_TYPE type = MiniDumpNormal;
    if (!strcmp(argv[argi], "--full")) { type = MiniDumpWithFullMemory; argi++; }

    char cmd[4096] = "";
    for (int i = argi; i < argc; i++) {
        strcat(cmd, "\"");
        strcat(cmd, argv[i]);
        strcat(cmd, "\" ");
    }
    STARTUPINFOA si = { sizeof si };
    PROCESS_INFORMATION pi;
    if (!CreateProcessA(NULL, cmd, NULL, NULL, FALSE, DEBUG_ONLY_THIS_PROCESS, NULL, NULL,
                        &si, &pi)) {
        fprintf(stderr, "dumper: CreateProcess failed (%lu)\n", GetLastError());
        return 2;
    }
    HANDLE hproc = pi.hProcess;
    int rc = 1, done = 0;
    DEBUG_EVENT de;
    while (!done) {
        if (!WaitForDebugEvent(&de, 180000)) {
            fprintf(stderr, "dumper: timeout waiting for a debug event\n");
            TerminateProcess(hproc, 1);
            return 1;
        }
        DWORD status = DBG_CONTINUE;
        switch (de.dwDebugEventCode) {
        case CREATE_PROCESS_DEBUG_EVENT:
            add_thread(de.dwThreadId, de.u.CreateProcessInfo.hThread);
            if (de.u.CreateProcessInfo.hFile) CloseHandle(de.u.CreateProcessInfo.hFile);
            break;
        case CREATE_THREAD_DEBUG_EVENT:
            add_thread(de.dwThreadId, de.u.CreateThread.hThread);
            break;
        case EXIT_THREAD_DEBUG_EVENT:
            del_thread(de.dwThreadId);
            break;
        case LOAD_DLL_DEBUG_EVENT:
            if (de.u.LoadDll.hFile) CloseHandle(de.u.LoadDll.hFile);
            break;
        case EXIT_PROCESS_DEBUG_EVENT:
            done = 1;
            break;
        case EXCEPTION_DEBUG_EVENT: {
            EXCEPTION_RECORD *er = &de.u.Exception.ExceptionRecord;
            int first = de.u.Exception.dwFirstChance;
            if (er->ExceptionCode == EXCEPTION_BREAKPOINT && first) {
                status = DBG_CONTINUE; /* loader breakpoint */
                break;
            }
            if (!(is_fatal(er->ExceptionCode) || !first)) {
                status = DBG_EXCEPTION_NOT_HANDLED;
                break;
            }
            HANDLE ht = find_thread(de.dwThreadId);
            static CONTEXT ctx __attribute__((aligned(16)));
            memset(&ctx, 0, sizeof ctx);
            ctx.ContextFlags = CONTEXT_ALL;
            if (!ht || !GetThreadContext(ht, &ctx))
                fprintf(stderr, "dumper: GetThreadContext failed (%lu)\n", GetLastError());
            EXCEPTION_POINTERS ep = { er, &ctx };
            MINIDUMP_EXCEPTION_INFORMATION mei = { de.dwThreadId, &ep, FALSE };
            HANDLE f = CreateFileA(out, GENERIC_READ | GENERIC_WRITE, 0, NULL, CREATE_ALWAYS,
                                   FILE_ATTRIBUTE_NORMAL, NULL);
            BOOL ok = MiniDumpWriteDump(hproc, de.dwProcessId, f, type, &mei, NULL, NULL);
            CloseHandle(f);
            printf("dumper: %s-chance exception 0x%08lX at %p tid %lu rip %p rsp %p"
                   " nparams %lu p0 0x%llx p1 0x%llx -> dump %s\n",
                   first ? "first" : "second", er->ExceptionCode, er->ExceptionAddress,
                   de.dwThreadId, (void *)ctx.Rip, (void *)ctx.Rsp, er->NumberParameters,
                   (unsigned long long)er->ExceptionInformation[0],
                   (unsigned long long)er->ExceptionInformation[1],
                   ok ? "written" : "FAILED");
            fflush(stdout);
            rc = ok ? 0 : 1;
            TerminateProcess(hproc, er->ExceptionCode);
            status = DBG_CONTINUE;
            break;
        }
        default:
            break;
        }
        ContinueDebugEvent(de.dwProcessId, de.dwThreadId, status);
    }
    return rc;
}
