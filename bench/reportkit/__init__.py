"""bench/report's modules (reportkit): one per concept (processes, the shm check, results,
Markdown, plots) and one per benchmark section (sec_*.py). Debian's python3 only, no PyPI."""
