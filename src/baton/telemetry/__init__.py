"""What a process tells its operator while it runs: logs, trace spans and event counters."""
