"""Reports: Markdown and JSON for hosts and the fleet, and the benchmark chart."""
