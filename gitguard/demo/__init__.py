"""`gitguard demo`: a narrated agent session on a throwaway repository."""
