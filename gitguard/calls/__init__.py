"""Tool calls: lifecycle, attribution, classification, shell parsing, `gitguard run`."""
