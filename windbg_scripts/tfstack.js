"use strict";

// !tfstack for WinDbg: a function alias that runs dumpkit's tfstack.py through pykd.
//
//   .load pykd                                   (the pykd-ext bootstrapper: gives !py)
//   .scriptload C:\path\to\windbg_scripts\tfstack.js
//   !tfstack
//   !tfstack "--all"
//   !tfstack "--json"
//   !tfstack "--thread 0x1a78 --rows 100"
//
// Whatever follows a function alias is evaluated as a data-model expression, not passed
// as text, so options go inside one quoted string (or several: !tfstack("--all", "--rows 80")).
//
// The alias runs `!py <folder of this script>\tfstack.py --plain <options>` with
// Debugger.Utility.Control.ExecuteCommand and prints what it captured line by line.
// Captured output carries no DML, so this route prints plain text; for clickable
// thread/frame links run the Python script directly: !py C:\path\to\tfstack.py
//
// This script's folder is found, in order, from:
//   1. a user variable:  dx @$tfstackDir = "C:\\path\\to\\windbg_scripts"
//   2. `.scriptlist`, which names the file every loaded script came from.

const TFSTACK_PY = "tfstack.py";

function initializeScript()
{
    return [new host.apiVersionSupport(1, 7),
            new host.functionAlias(tfstack, "tfstack")];
}

function __control()
{
    return host.namespace.Debugger.Utility.Control;
}

function __userDirectory()
{
    try
    {
        const vars = host.namespace.Debugger.State.UserVariables;
        const value = vars.tfstackDir;
        if (value !== undefined && value !== null)
        {
            const text = value.toString();
            if (text.length > 0)
            {
                return text.replace(/[\\\/]+$/, "");
            }
        }
    }
    catch (e)
    {
        // no such variable: fall through to .scriptlist
    }
    return null;
}

function __scriptDirectory()
{
    const fromUser = __userDirectory();
    if (fromUser !== null)
    {
        return fromUser;
    }
    // .scriptlist prints lines such as:
    //     JavaScript script from 'C:\WinDbg\Scripts\tfstack.js'
    for (const line of __control().ExecuteCommand(".scriptlist"))
    {
        const m = /'([^']*[\\\/])tfstack\.js'/i.exec(line.toString());
        if (m)
        {
            return m[1].replace(/[\\\/]+$/, "");
        }
    }
    return null;
}

function __quote(path)
{
    return path.indexOf(" ") >= 0 ? "\"" + path + "\"" : path;
}

function tfstack(...args)
{
    const dir = __scriptDirectory();
    if (dir === null)
    {
        host.diagnostics.debugLog("tfstack: error: cannot tell where tfstack.js was loaded from; " +
                                  "set it with: dx @$tfstackDir = \"C:\\\\path\\\\to\\\\windbg_scripts\"\n");
        return;
    }
    const options = args.map(a => a.toString()).join(" ").trim();
    let command = "!py " + __quote(dir + "\\" + TFSTACK_PY) + " --plain";
    if (options.length > 0)
    {
        command += " " + options;
    }
    let lines;
    try
    {
        lines = __control().ExecuteCommand(command);
    }
    catch (e)
    {
        host.diagnostics.debugLog("tfstack: error: `" + command + "` failed: " + e.toString() +
                                  " (is pykd loaded? run .load pykd)\n");
        return;
    }
    for (const line of lines)
    {
        host.diagnostics.debugLog(line.toString() + "\n");
    }
}
