"""`dumpkit triage`: many dumps in, one record per dump and the groups of one crash out.

Orchestration only: which files are dumps (collect), analysing one of them into a small
JSON-able record (analyse), running that over processes or a Dask cluster (run), the
content-keyed cache (cache) and grouping records by crash signature (group). What a crash
is comes from the engine and the signature rules (dumpkit/analysis/signature.py); how a
triage is shown lives in dumpkit/report/view/triage.py and dumpkit/report/triage.py."""
