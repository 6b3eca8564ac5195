/* dumpnow.exe PID OUT.dmp normal|full: a dump of a running process as the plain tools write
   it, with nothing of dumpkit's: the process is suspended (NtSuspendProcess, as ProcDump does
   for a dump without a clone), MiniDumpWriteDump writes it with no exception, no callback and
   no extra stream, and the process is resumed.
     normal: MiniDumpNormal (what WER's DumpType 1 and a "minidump" are)
     full:   MiniDumpWithFullMemory | MiniDumpWithHandleData | MiniDumpWithUnloadedModules |
             MiniDumpWithFullMemoryInfo | MiniDumpWithThreadInfo (procdump -ma, Task Manager's
             "Create dump file")
   Prints one line: what was written, or what failed (exit code 1; 2 for bad arguments). */
#include <windows.h>
#include <dbghelp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef LONG(NTAPI *process_call)(HANDLE);

int main(int argc, char **argv)
{
    if (argc != 4 || (strcmp(argv[3], "normal") && strcmp(argv[3], "full"))) {
        fprintf(stderr, "usage: dumpnow PID OUT.dmp normal|full\n");
        return 2;
    }
    DWORD pid = strtoul(argv[1], NULL, 10);
    int full = !strcmp(argv[3], "full");
    MINIDUMP_TYPE type = full ? (MiniDumpWithFullMemory | MiniDumpWithHandleData | MiniDumpWithUnloadedModules |
                                 MiniDumpWithFullMemoryInfo | MiniDumpWithThreadInfo)
                              : MiniDumpNormal;
    HMODULE ntdll = GetModuleHandleA("ntdll.dll");
    process_call suspend = (process_call)GetProcAddress(ntdll, "NtSuspendProcess");
    process_call resume = (process_call)GetProcAddress(ntdll, "NtResumeProcess");
    HANDLE process = OpenProcess(PROCESS_QUERY_INFORMATION | PROCESS_VM_READ | PROCESS_DUP_HANDLE |
                                 PROCESS_SUSPEND_RESUME, FALSE, pid);
    if (!process) {
        printf("dumpnow: cannot open process %lu: error %lu\n", pid, GetLastError());
        return 1;
    }
    HANDLE file = CreateFileA(argv[2], GENERIC_WRITE, 0, NULL, CREATE_ALWAYS, FILE_ATTRIBUTE_NORMAL, NULL);
    if (file == INVALID_HANDLE_VALUE) {
        printf("dumpnow: cannot create %s: error %lu\n", argv[2], GetLastError());
        return 1;
    }
    LONG suspended = suspend(process);
    DWORD started = GetTickCount();
    BOOL ok = MiniDumpWriteDump(process, pid, file, type, NULL, NULL, NULL);
    DWORD error = ok ? 0 : GetLastError();
    DWORD took = GetTickCount() - started;
    LONG resumed = suspended >= 0 ? resume(process) : 0;
    LARGE_INTEGER size = {0};
    GetFileSizeEx(file, &size);
    CloseHandle(file);
    CloseHandle(process);
    if (!ok) {
        printf("dumpnow: MiniDumpWriteDump failed on process %lu: error %lu\n", pid, error);
        return 1;
    }
    printf("dumpnow: process %lu: %s dump (type 0x%x) %s, %lld bytes, written in %lu ms; "
           "NtSuspendProcess 0x%08lx, NtResumeProcess 0x%08lx\n",
           pid, argv[3], (unsigned)type, argv[2], (long long)size.QuadPart, took, (unsigned long)suspended,
           (unsigned long)resumed);
    return suspended < 0 || resumed < 0;
}
