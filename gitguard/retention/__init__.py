"""What `gitguard gc` does: collection, the retention policy, repacking."""
