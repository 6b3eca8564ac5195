/* dumper.exe - a minimal out-of-process crash reporter (like procdump -e 1).
 *
 *   dumper.exe OUT.dmp [--full] [--on-exit] PROGRAM [ARGS...]
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
 *
 * --on-exit also dumps a process that ends itself with a nonzero exit code
 * (abort() and Py_FatalError under Wine, raise(SIGABRT), _exit, exit(3) after
 * "OMP: Error #15", TerminateProcess on itself), as `bp ntdll!RtlExitUserProcess`
 * in cdb does: at the loader breakpoint an int3 is written over the first byte
 * of ntdll!RtlExitUserProcess and of ntdll!NtTerminateProcess (ntdll sits at
 * the same address in every process, so this process's addresses are the
 * debuggee's). When one is hit with a nonzero code (its first argument in RCX
 * for RtlExitUserProcess, the second in RDX for NtTerminateProcess on the
 * current process, handle -1), the original byte is put back, RIP is set back
 * to the function's entry and the dump is written with that breakpoint as its
 * exception (0x80000003 at the entry), as a debugger stopped there would write
 * it. An exit with code 0 removes both breakpoints and goes on.
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

/* the --on-exit breakpoints: where, and the byte the int3 replaced */
static struct { const char *name; BYTE *at; BYTE orig; int armed; } g_exit_bp[2] = {
    { "RtlExitUserProcess", NULL, 0, 0 },
    { "NtTerminateProcess", NULL, 0, 0 },
};

static void arm_exit_breakpoints(HANDLE hproc)
{
    HMODULE ntdll = GetModuleHandleA("ntdll.dll");
    for (int i = 0; i < 2; i++) {
        BYTE cc = 0xCC;
        g_exit_bp[i].at = (BYTE *)GetProcAddress(ntdll, g_exit_bp[i].name);
        if (!g_exit_bp[i].at ||
            !ReadProcessMemory(hproc, g_exit_bp[i].at, &g_exit_bp[i].orig, 1, NULL) ||
            !WriteProcessMemory(hproc, g_exit_bp[i].at, &cc, 1, NULL)) {
            fprintf(stderr, "dumper: cannot set a breakpoint on ntdll!%s (%lu)\n",
                    g_exit_bp[i].name, GetLastError());
            continue;
        }
        FlushInstructionCache(hproc, g_exit_bp[i].at, 1);
        g_exit_bp[i].armed = 1;
    }
}

static void disarm_exit_breakpoints(HANDLE hproc)
{
    for (int i = 0; i < 2; i++) {
        if (!g_exit_bp[i].armed) continue;
        WriteProcessMemory(hproc, g_exit_bp[i].at, &g_exit_bp[i].orig, 1, NULL);
        FlushInstructionCache(hproc, g_exit_bp[i].at, 1);
        g_exit_bp[i].armed = 0;
    }
}

/* the --on-exit breakpoint at `addr`, or -1 */
static int exit_breakpoint(void *addr)
{
    for (int i = 0; i < 2; i++)
        if (g_exit_bp[i].armed && (void *)g_exit_bp[i].at == addr) return i;
    return -1;
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
    int on_exit = 0, loader_seen = 0;
    for (;;) {
        if (argi < argc && !strcmp(argv[argi], "--full")) { type = MiniDumpWithFullMemory; argi++; }
        else if (argi < argc && !strcmp(argv[argi], "--on-exit")) { on_exit = 1; argi++; }
        else break;
    }
    if (argi >= argc) {
        fprintf(stderr, "usage: dumper OUT.dmp [--full] [--on-exit] PROGRAM [ARGS...]\n");
        return 2;
    }

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
            int bp = er->ExceptionCode == EXCEPTION_BREAKPOINT && first
                         ? exit_breakpoint(er->ExceptionAddress) : -1;
            if (er->ExceptionCode == EXCEPTION_BREAKPOINT && first && bp < 0) {
                if (on_exit && !loader_seen) arm_exit_breakpoints(hproc);
                loader_seen = 1;
                status = DBG_CONTINUE; /* loader breakpoint */
                break;
            }
            if (bp >= 0) {
                /* the process is ending itself: back to the function's entry, as it was */
                HANDLE ht = find_thread(de.dwThreadId);
                static CONTEXT bctx __attribute__((aligned(16)));
                memset(&bctx, 0, sizeof bctx);
                bctx.ContextFlags = CONTEXT_ALL;
                void *entry = g_exit_bp[bp].at;
                int got = ht && GetThreadContext(ht, &bctx);
                /* RtlExitUserProcess(code); NtTerminateProcess(handle, code): this process is -1 */
                DWORD exit_code = bp == 0 ? (DWORD)bctx.Rcx : (DWORD)bctx.Rdx;
                int self = bp == 0 || (HANDLE)bctx.Rcx == (HANDLE)-1;
                disarm_exit_breakpoints(hproc);
                if (got) {
                    bctx.Rip = (DWORD64)entry;
                    SetThreadContext(ht, &bctx);
                }
                if (!got || !self || exit_code == 0) {
                    if (!got) fprintf(stderr, "dumper: GetThreadContext failed (%lu)\n", GetLastError());
                    status = DBG_CONTINUE;
                    break;
                }
                er->ExceptionAddress = entry;
                EXCEPTION_POINTERS ep = { er, &bctx };
                MINIDUMP_EXCEPTION_INFORMATION mei = { de.dwThreadId, &ep, FALSE };
                HANDLE f = CreateFileA(out, GENERIC_READ | GENERIC_WRITE, 0, NULL, CREATE_ALWAYS,
                                       FILE_ATTRIBUTE_NORMAL, NULL);
                BOOL ok = MiniDumpWriteDump(hproc, de.dwProcessId, f, type, &mei, NULL, NULL);
                CloseHandle(f);
                printf("dumper: process exit through ntdll!%s with code %lu (0x%08lX) tid %lu"
                       " rip %p rsp %p -> dump %s\n", g_exit_bp[bp].name, exit_code, exit_code,
                       de.dwThreadId, (void *)bctx.Rip, (void *)bctx.Rsp, ok ? "written" : "FAILED");
                fflush(stdout);
                rc = ok ? 0 : 1;
                TerminateProcess(hproc, exit_code);
                status = DBG_CONTINUE;
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
