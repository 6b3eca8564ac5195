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
// The alias runs `!py -3.9 <folder of this script>\tfstack.py --plain <options>` with
// Debugger.Utility.Control.ExecuteCommand and prints what it captured line by line.
// Captured output carries no DML, so this route prints plain text; for clickable
// thread/frame links run the Python script directly: !py -3.9 C:\path\to\tfstack.py
//
// Which Python: pykd 0.3.4.15, the last pykd, has wheels for CPython 2.7 and 3.5-3.9
// only, and dumpkit needs 3.9 or later, so 3.9 is the one interpreter that has both.
// Without a version, the pykd-ext bootstrapper picks the highest Python 3 installed,
// which then has no pykd; so the alias always names one, 3.9 unless told otherwise:
//   dx @$tfstackPython = "3.9"     the interpreter `!py` runs (major.minor, as `!info` lists it)
//   dx @$tfstackPython = ""        no version: pykd-ext's choice (tfstack.py's first line
//                                  `#! python3.9`, else `!select`'s, else the highest 3.x)
//
// This script's folder is found, in order, from:
//   1. a user variable:  dx @$tfstackDir = "C:\\path\\to\\windbg_scripts"
//   2. `.scriptlist`, which names the file every loaded script came from.

const TFSTACK_PY = "tfstack.py";
const DEFAULT_PYTHON = "3.9";

function initializeScript()
{
    return [new host.apiVersionSupport(1, 7),
            new host.functionAlias(tfstack, "tfstack")];
}

function __control()
{
    return host.namespace.Debugger.Utility.Control;
}

// The text of a `dx @$name = "..."` user variable, or null when it is not set.
function __userVariable(name)
{
    try
    {
        const value = host.namespace.Debugger.State.UserVariables[name];
        if (value !== undefined && value !== null)
        {
            return value.toString();
        }
    }
    catch (e)
    {
        // no such variable
    }
    return null;
}

function __userDirectory()
{
    const text = __userVariable("tfstackDir");
    if (text !== null && text.length > 0)
    {
        return text.replace(/[\\\/]+$/, "");
    }
    return null;
}

// The `!py` version switch: "-3.9" unless @$tfstackPython says otherwise ("" = none).
// Anything but major.minor (or a bare major) is refused rather than pasted into a command.
function __pythonSwitch()
{
    const wanted = __userVariable("tfstackPython");
    const version = wanted === null ? DEFAULT_PYTHON : wanted.trim();
    if (version.length === 0)
    {
        return "";
    }
    if (!/^[23](\.\d+)?$/.test(version))
    {
        throw new Error("@$tfstackPython must look like 3.9 (or be \"\"), not '" + version + "'");
    }
    return "-" + version + " ";
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
    let python;
    try
    {
        python = __pythonSwitch();
    }
    catch (e)
    {
        host.diagnostics.debugLog("tfstack: error: " + e.message + "\n");
        return;
    }
    const options = args.map(a => a.toString()).join(" ").trim();
    let command = "!py " + python + __quote(dir + "\\" + TFSTACK_PY) + " --plain";
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
                                  " (is pykd loaded? run .load pykd; does !info list Python " +
                                  (python.trim().slice(1) || "3.x") + "?)\n");
        return;
    }
    for (const line of lines)
    {
        host.diagnostics.debugLog(line.toString() + "\n");
    }
}
