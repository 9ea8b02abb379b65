"""From result files to the page: tables (markdown tables of each kind of result, also printed by the
commands), doc_tables (rewrites the tables of docs/performance.md from the JSON they cite) and plots (a PNG
next to each JSON)."""
