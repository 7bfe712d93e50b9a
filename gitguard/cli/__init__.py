"""The command line: the console script entry, click commands, the fast call parser."""
